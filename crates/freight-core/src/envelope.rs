//! The envelope: preamble, header (meta section, frame table, node tree), header checksum, then
//! frames at 64-byte aligned offsets. docs/FORMAT.md describes the same bytes in prose.

use crate::checksum;
use crate::error::{Error, Result};
use crate::reader::Reader;
use crate::varint::put_uvarint;

pub const MAGIC: [u8; 4] = *b"\x89FRT";
pub const VERSION: u8 = 1;
/// Frames start at offsets (from the payload's first byte) that are multiples of this.
pub const ALIGN: usize = 64;
/// Size of the header checksum that ends the header.
pub const HEADER_CHECKSUM_LEN: usize = 8;

/// Bits of the preamble's flags byte.
pub mod flags {
    /// Some node runs pickle (or an unsafe serializer) when decoded.
    pub const NEEDS_PICKLE: u8 = 1 << 0;
    /// A frame table is present.
    pub const FRAMES: u8 = 1 << 1;
    /// A meta section (tags used, producer versions) is present.
    pub const META: u8 = 1 << 2;
    /// Reserved for the HMAC-SHA256 trailer (next format feature; v1 readers refuse it).
    pub const SIGNED: u8 = 1 << 3;
    pub const KNOWN: u8 = NEEDS_PICKLE | FRAMES | META;
}

/// Bits of a frame table entry's flags byte.
pub mod frame_flags {
    /// An xxh3-64 checksum of the stored bytes follows the lengths.
    pub const CHECKSUM: u8 = 1 << 0;
    /// Reserved: byte-shuffle filter applied before the codec (item size follows).
    pub const SHUFFLE: u8 = 1 << 1;
    pub const KNOWN: u8 = CHECKSUM;
}

/// Frame codecs. v1 writers only write `None`; the byte is reserved for lz4 (1) and zstd (2).
pub mod codec {
    pub const NONE: u8 = 0;
}

/// Limits a reader enforces before it allocates or walks anything.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest header (meta + frame table + tree) accepted.
    pub max_header: u64,
    /// Largest raw frame accepted.
    pub max_frame: u64,
}

impl Default for Limits {
    fn default() -> Self {
        // Generous but finite: the header is also always bounded by the input's length.
        Self {
            max_header: 1 << 34,
            max_frame: 1 << 40,
        }
    }
}

/// One entry of the frame table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameInfo {
    pub codec: u8,
    pub raw_len: u64,
    pub stored_len: u64,
    pub checksum: Option<u64>,
}

/// What a writer knows before it lays the envelope out.
#[derive(Debug, Default, Clone)]
pub struct EnvelopeSpec<'a> {
    pub needs_pickle: bool,
    /// Registered serializer tags, referenced by index from Ext nodes.
    pub tags: Vec<&'a str>,
    /// Producer versions that matter to a reader ("python" -> "3.11", "cloudpickle" -> ...).
    pub versions: Vec<(&'a str, &'a str)>,
    /// Stored length of each frame (v1 writes raw frames: stored == raw).
    pub frame_lens: Vec<u64>,
    /// Whether frame checksums are written.
    pub checksums: bool,
    pub tree: &'a [u8],
}

#[inline]
pub fn align_up(offset: usize) -> usize {
    (offset + ALIGN - 1) & !(ALIGN - 1)
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_uvarint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Lays an envelope out and writes it. The header is written straight into the output (no
/// intermediate copy of the tree); frame checksums are patched in as the frames are copied, and
/// the header checksum is computed last, over the header as written.
#[derive(Debug, Clone)]
pub struct EnvelopeWriter<'a> {
    /// Magic, version, flags, header length, meta section and frame table.
    prefix: Vec<u8>,
    tree: &'a [u8],
    /// Where each frame's checksum sits in `prefix`, when it has one.
    checksum_at: Vec<Option<usize>>,
    frame_lens: Vec<u64>,
}

impl<'a> EnvelopeWriter<'a> {
    pub fn new(spec: &EnvelopeSpec<'a>) -> Self {
        let mut flag_bits = 0u8;
        if spec.needs_pickle {
            flag_bits |= flags::NEEDS_PICKLE;
        }
        let has_meta = !spec.tags.is_empty() || !spec.versions.is_empty();
        if has_meta {
            flag_bits |= flags::META;
        }
        if !spec.frame_lens.is_empty() {
            flag_bits |= flags::FRAMES;
        }

        // Meta section and frame table first, to know the header body's length.
        let mut sections = Vec::new();
        if has_meta {
            put_uvarint(&mut sections, spec.tags.len() as u64);
            for tag in &spec.tags {
                put_str(&mut sections, tag);
            }
            put_uvarint(&mut sections, spec.versions.len() as u64);
            for (name, version) in &spec.versions {
                put_str(&mut sections, name);
                put_str(&mut sections, version);
            }
        }
        let mut checksum_at = Vec::with_capacity(spec.frame_lens.len());
        if !spec.frame_lens.is_empty() {
            put_uvarint(&mut sections, spec.frame_lens.len() as u64);
            for &len in &spec.frame_lens {
                sections.push(if spec.checksums {
                    frame_flags::CHECKSUM
                } else {
                    0
                });
                sections.push(codec::NONE);
                put_uvarint(&mut sections, len);
                if spec.checksums {
                    checksum_at.push(Some(sections.len()));
                    sections.extend_from_slice(&[0; 8]);
                } else {
                    checksum_at.push(None);
                }
            }
        }
        let body_len = (sections.len() + spec.tree.len()) as u64;
        let mut prefix = Vec::with_capacity(MAGIC.len() + 2 + 10 + sections.len());
        prefix.extend_from_slice(&MAGIC);
        prefix.push(VERSION);
        prefix.push(flag_bits);
        put_uvarint(&mut prefix, body_len);
        let preamble = prefix.len();
        prefix.extend_from_slice(&sections);
        let checksum_at = checksum_at
            .into_iter()
            .map(|at| at.map(|at| at + preamble))
            .collect();
        Self {
            prefix,
            tree: spec.tree,
            checksum_at,
            frame_lens: spec.frame_lens.clone(),
        }
    }

    /// Length of the header including its checksum.
    pub fn header_len(&self) -> usize {
        self.prefix.len() + self.tree.len() + HEADER_CHECKSUM_LEN
    }

    /// Offsets of the frames in the contiguous (single buffer) layout.
    pub fn frame_offsets(&self) -> Vec<usize> {
        let mut offsets = Vec::with_capacity(self.frame_lens.len());
        let mut end = self.header_len();
        for &len in &self.frame_lens {
            let start = align_up(end);
            offsets.push(start);
            end = start + len as usize;
        }
        offsets
    }

    /// Total length of the contiguous layout.
    pub fn total_len(&self) -> usize {
        let mut end = self.header_len();
        for &len in &self.frame_lens {
            end = align_up(end) + len as usize;
        }
        end
    }

    pub fn frame_count(&self) -> usize {
        self.frame_lens.len()
    }

    pub fn set_frame_checksum(&mut self, frame: usize, value: u64) {
        if let Some(Some(at)) = self.checksum_at.get(frame) {
            self.prefix[*at..*at + 8].copy_from_slice(&value.to_le_bytes());
        }
    }

    /// Writes the header, sealed with its checksum, into `out[..header_len()]` (the first
    /// buffer of `dumps_frames`, or the start of the contiguous layout). Call it after the
    /// frame checksums are set.
    pub fn write_header(&self, out: &mut [u8]) {
        let (prefix, rest) = out.split_at_mut(self.prefix.len());
        prefix.copy_from_slice(&self.prefix);
        rest[..self.tree.len()].copy_from_slice(self.tree);
        let end = self.prefix.len() + self.tree.len();
        let sum = checksum::hash(&out[..end]);
        out[end..end + HEADER_CHECKSUM_LEN].copy_from_slice(&sum.to_le_bytes());
    }

    /// Writes the whole envelope into `out` (exactly `total_len()` bytes): header, zeroed
    /// padding, and each frame copied once, its checksum computed on the way.
    pub fn write_contiguous(&mut self, out: &mut [u8], frames: &[&[u8]]) -> Result<()> {
        assert_eq!(frames.len(), self.frame_lens.len(), "one source per frame");
        assert_eq!(out.len(), self.total_len(), "output sized by total_len");
        let offsets = self.frame_offsets();
        let mut end = self.header_len();
        for (i, (frame, &start)) in frames.iter().zip(&offsets).enumerate() {
            out[end..start].fill(0);
            let dst = &mut out[start..start + frame.len()];
            if self.checksum_at[i].is_some() {
                let sum = checksum::copy_and_hash(dst, frame);
                self.set_frame_checksum(i, sum);
            } else {
                checksum::copy_parallel(dst, frame);
            }
            end = start + frame.len();
        }
        self.write_header(out);
        Ok(())
    }
}

/// A parsed header. Borrowed from the input; frames are located separately so that both the
/// contiguous layout (`dumps`) and the list layout (`dumps_frames`) share this parser.
#[derive(Debug, Clone)]
pub struct Header<'a> {
    pub version: u8,
    pub flags: u8,
    pub tags: Vec<&'a str>,
    pub versions: Vec<(&'a str, &'a str)>,
    pub frames: Vec<FrameInfo>,
    pub tree: &'a [u8],
    /// Length of the header including its checksum: where the contiguous layout's padding starts.
    pub len: usize,
}

impl Header<'_> {
    pub fn needs_pickle(&self) -> bool {
        self.flags & flags::NEEDS_PICKLE != 0
    }
}

fn read_str<'a>(r: &mut Reader<'a>, what: &'static str) -> Result<&'a str> {
    let bytes = r.byte_string(what)?;
    std::str::from_utf8(bytes).map_err(|_| Error::corrupt(format!("{what} is not valid UTF-8")))
}

/// Checks magic and version only: the cheapest way to tell whether bytes are a freight payload.
pub fn check_preamble(buf: &[u8]) -> Result<()> {
    if buf.len() < MAGIC.len() || buf[..MAGIC.len()] != MAGIC {
        return Err(Error::BadMagic {
            found: buf[..buf.len().min(MAGIC.len())].to_vec(),
        });
    }
    match buf.get(MAGIC.len()) {
        None => Err(Error::Truncated {
            what: "the format version",
            offset: MAGIC.len(),
            needed: 1,
        }),
        Some(&VERSION) => Ok(()),
        Some(&found) => Err(Error::UnsupportedVersion {
            found,
            supported: VERSION,
        }),
    }
}

/// Parses and verifies the header at the start of `buf` (which may hold more bytes after it).
pub fn parse_header<'a>(buf: &'a [u8], limits: &Limits) -> Result<Header<'a>> {
    check_preamble(buf)?;
    let mut r = Reader::new(buf);
    r.take(MAGIC.len() + 1, "the preamble")?;
    let flag_bits = r.u8("the flags byte")?;
    if flag_bits & flags::SIGNED != 0 {
        return Err(Error::corrupt(
            "the payload is signed, and signed payloads need a newer freight build to read",
        ));
    }
    if flag_bits & !flags::KNOWN != 0 {
        return Err(Error::corrupt(format!(
            "unknown header flags {:#04x}; the payload may come from a newer freight",
            flag_bits & !flags::KNOWN
        )));
    }
    let body_len = r.uvarint("the header length")?;
    if body_len > limits.max_header {
        return Err(Error::OverLimit {
            what: "a header",
            declared: body_len,
            limit: limits.max_header,
        });
    }
    let body_start = r.position();
    let body = r.take(body_len as usize, "the header")?;
    let stored = r.u64_le("the header checksum")?;
    let computed = checksum::hash(&buf[..body_start + body.len()]);
    if stored != computed {
        return Err(Error::Checksum {
            what: "the header".into(),
            stored,
            computed,
        });
    }
    let len = r.position();

    let mut r = Reader::new(body);
    let mut tags = Vec::new();
    let mut versions = Vec::new();
    if flag_bits & flags::META != 0 {
        let n = r.count(1, "the tag table")?;
        for _ in 0..n {
            tags.push(read_str(&mut r, "a tag")?);
        }
        let n = r.count(2, "the version table")?;
        for _ in 0..n {
            versions.push((
                read_str(&mut r, "a producer name")?,
                read_str(&mut r, "a producer version")?,
            ));
        }
    }
    let mut frames = Vec::new();
    if flag_bits & flags::FRAMES != 0 {
        let n = r.count(3, "the frame table")?;
        frames.reserve(n);
        for i in 0..n {
            let frame_flags = r.u8("frame flags")?;
            if frame_flags & !frame_flags::KNOWN != 0 {
                return Err(Error::corrupt(format!(
                    "frame {i} has unknown flags {frame_flags:#04x}"
                )));
            }
            let codec = r.u8("a frame codec")?;
            if codec != codec::NONE {
                return Err(Error::corrupt(format!(
                    "frame {i} uses codec {codec}, which this freight build cannot decode"
                )));
            }
            let raw_len = r.uvarint("a frame length")?;
            if raw_len > limits.max_frame {
                return Err(Error::OverLimit {
                    what: "a frame",
                    declared: raw_len,
                    limit: limits.max_frame,
                });
            }
            let checksum = if frame_flags & frame_flags::CHECKSUM != 0 {
                Some(r.u64_le("a frame checksum")?)
            } else {
                None
            };
            frames.push(FrameInfo {
                codec,
                raw_len,
                stored_len: raw_len,
                checksum,
            });
        }
    }
    let tree = &body[r.position()..];
    if tree.is_empty() {
        return Err(Error::corrupt("the header holds no root node"));
    }
    Ok(Header {
        version: VERSION,
        flags: flag_bits,
        tags,
        versions,
        frames,
        tree,
        len,
    })
}

/// Locates every frame of a contiguous payload: checks that each lies inside `buf`, that the
/// padding between them is zero and that nothing trails the last one.
pub fn locate_frames(header: &Header<'_>, buf: &[u8]) -> Result<Vec<std::ops::Range<usize>>> {
    let mut ranges = Vec::with_capacity(header.frames.len());
    let mut end = header.len;
    for (i, frame) in header.frames.iter().enumerate() {
        let start = align_up(end);
        let stop = (start as u64)
            .checked_add(frame.stored_len)
            .filter(|&s| s <= buf.len() as u64);
        let Some(stop) = stop else {
            return Err(Error::Truncated {
                what: "a frame",
                offset: start.min(buf.len()),
                needed: (start as u64 + frame.stored_len - buf.len() as u64) as usize,
            });
        };
        if start > buf.len() || buf[end..start].iter().any(|&b| b != 0) {
            return Err(Error::Checksum {
                what: format!("the padding before frame {i}"),
                stored: 0,
                computed: 1,
            });
        }
        ranges.push(start..stop as usize);
        end = stop as usize;
    }
    if end != buf.len() {
        return Err(Error::corrupt(format!(
            "{} trailing bytes after the last frame",
            buf.len() - end
        )));
    }
    Ok(ranges)
}

/// Checks one frame's bytes against the table: length, and checksum when `verify` and present.
pub fn check_frame(header: &Header<'_>, index: usize, data: &[u8], verify: bool) -> Result<()> {
    let info = header
        .frames
        .get(index)
        .ok_or_else(|| Error::corrupt(format!("no frame {index}")))?;
    if data.len() as u64 != info.stored_len {
        return Err(Error::corrupt(format!(
            "frame {index} holds {} bytes but the frame table says {}",
            data.len(),
            info.stored_len
        )));
    }
    if verify {
        if let Some(stored) = info.checksum {
            let computed = checksum::hash(data);
            if computed != stored {
                return Err(Error::Checksum {
                    what: format!("frame {index}"),
                    stored,
                    computed,
                });
            }
        }
    }
    Ok(())
}
