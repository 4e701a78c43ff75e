//! The envelope: preamble, header (meta section, frame table, node tree), header checksum, then
//! frames at 64-byte aligned offsets (16 for small ones in packed payloads). docs/FORMAT.md describes the same bytes in prose.

use std::ops::Range;

use rayon::prelude::*;

use crate::bits::{codec, flags, frame_flags};
use crate::checksum;
use crate::error::{Error, Result};
use crate::reader::Reader;
use crate::sign;
use crate::varint::put_uvarint;

pub const MAGIC: [u8; 4] = *b"\x89FRT";
pub const VERSION: u8 = 1;
/// Frames start at offsets (from the payload's first byte) that are multiples of this.
pub const ALIGN: usize = 64;

mod parts;
pub use parts::{Part, ZEROS};

/// Size of the header checksum that ends the header.
pub const HEADER_CHECKSUM_LEN: usize = 8;

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
    /// The checksum is a block checksum (checksum.rs).
    pub block_checksum: bool,
    /// Item size of the byte shuffle applied before compression.
    pub shuffle: Option<u32>,
}

/// How a writer stores one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLayout {
    pub raw_len: u64,
    pub stored_len: u64,
    pub codec: u8,
    pub shuffle: Option<u32>,
}

impl FrameLayout {
    /// A frame stored as it is.
    pub fn raw(len: u64) -> Self {
        Self {
            raw_len: len,
            stored_len: len,
            codec: codec::NONE,
            shuffle: None,
        }
    }
}

/// What a writer knows before it lays the envelope out.
#[derive(Debug, Default, Clone)]
pub struct EnvelopeSpec<'a> {
    pub needs_pickle: bool,
    /// Registered serializer tags, referenced by index from Ext nodes.
    pub tags: Vec<&'a str>,
    /// Producer versions that matter to a reader ("python" -> "3.11", "cloudpickle" -> ...).
    pub versions: Vec<(&'a str, &'a str)>,
    /// How each frame is stored.
    pub frames: Vec<FrameLayout>,
    /// Whether frame checksums are written for every frame (compressed frames always get one).
    pub checksums: bool,
    /// Whether a signature trailer follows the frames (written by `sign_contiguous`).
    pub signed: bool,
    pub tree: &'a [u8],
}

#[inline]
pub fn align_up(offset: usize) -> usize {
    (offset + ALIGN - 1) & !(ALIGN - 1)
}

/// In packed payloads (flag PACKED), frames of fewer stored bytes than this start at multiples
/// of `PACKED_ALIGN`: small arrays stop paying up to 63 bytes of padding each (many tiny arrays
/// made a payload much larger than pickle's), and 16 still aligns every numpy and Arrow
/// type for zero-copy views (complex128, decimal128, string views).
pub const PACK_BELOW: u64 = 4096;

/// Frames totalling this many bytes are written (copied and hashed) on all cores. Waking the
/// pool's threads costs more than it saves below this when other work runs between calls: a
/// table of a few MB was faster on one core, median of calls interleaved with other work; only a
/// tight loop of dumps favours parallel there (figures in docs/ARCHITECTURE.md, "Compression,
/// checksums and signatures").
pub const PARALLEL_FRAMES: usize = 32 << 20;
pub const PACKED_ALIGN: usize = 16;

/// Where a frame of `stored_len` bytes starts when the previous one ends at `end`.
#[inline]
pub fn frame_start(end: usize, stored_len: u64, packed: bool) -> usize {
    if packed && stored_len < PACK_BELOW {
        (end + PACKED_ALIGN - 1) & !(PACKED_ALIGN - 1)
    } else {
        align_up(end)
    }
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
    block_checksums: Vec<bool>,
    signed: bool,
}

/// Whether a payload with these header flags packs its small frames.
#[inline]
pub fn packed(flag_bits: u8) -> bool {
    flag_bits & flags::PACKED != 0
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
        if !spec.frames.is_empty() {
            // PACKED only where it changes the layout: payloads without frames stay readable
            // by readers of format 1.0.
            flag_bits |= flags::FRAMES | flags::PACKED;
        }
        if spec.signed {
            flag_bits |= flags::SIGNED;
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
        let mut checksum_at = Vec::with_capacity(spec.frames.len());
        let mut block_checksums = Vec::with_capacity(spec.frames.len());
        if !spec.frames.is_empty() {
            put_uvarint(&mut sections, spec.frames.len() as u64);
            for frame in &spec.frames {
                // A compressed frame always carries its checksum: it guards the decompressor and
                // costs little next to compressing.
                let summed = spec.checksums || frame.codec != codec::NONE;
                let block = summed && checksum::block_mode(frame.stored_len as usize);
                let mut bits = 0;
                if summed {
                    bits |= frame_flags::CHECKSUM;
                }
                if block {
                    bits |= frame_flags::BLOCK_CHECKSUM;
                }
                if frame.shuffle.is_some() {
                    bits |= frame_flags::SHUFFLE;
                }
                sections.push(bits);
                sections.push(frame.codec);
                put_uvarint(&mut sections, frame.raw_len);
                if frame.codec != codec::NONE {
                    put_uvarint(&mut sections, frame.stored_len);
                }
                if let Some(itemsize) = frame.shuffle {
                    put_uvarint(&mut sections, itemsize as u64);
                }
                if summed {
                    checksum_at.push(Some(sections.len()));
                    sections.extend_from_slice(&[0; 8]);
                } else {
                    checksum_at.push(None);
                }
                block_checksums.push(block);
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
            frame_lens: spec.frames.iter().map(|f| f.stored_len).collect(),
            block_checksums,
            signed: spec.signed,
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
            let start = frame_start(end, len, true);
            offsets.push(start);
            end = start + len as usize;
        }
        offsets
    }

    /// Total length of the contiguous layout (with the signature trailer, when signed).
    pub fn total_len(&self) -> usize {
        let mut end = self.header_len();
        for &len in &self.frame_lens {
            end = frame_start(end, len, true) + len as usize;
        }
        end + if self.signed { sign::SIGNATURE_LEN } else { 0 }
    }

    /// Whether frame `i` gets a block checksum.
    pub fn block_checksum(&self, frame: usize) -> bool {
        self.block_checksums.get(frame).copied().unwrap_or(false)
    }

    /// Whether frame `i` carries a checksum (all frames when checksums were asked for, and
    /// every compressed frame).
    pub fn has_checksum(&self, frame: usize) -> bool {
        matches!(self.checksum_at.get(frame), Some(Some(_)))
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
    /// padding, and each frame copied once, its checksum computed on the way. Payloads of
    /// several frames totalling `PARALLEL_FRAMES` bytes or more copy and hash their frames on
    /// all cores (a frame's blocks already are, but frames of 1 MiB or less are one block).
    pub fn write_contiguous(&mut self, out: &mut [u8], frames: &[&[u8]]) {
        assert_eq!(frames.len(), self.frame_lens.len(), "one source per frame");
        assert_eq!(out.len(), self.total_len(), "output sized by total_len");
        let offsets = self.frame_offsets();
        let header_len = self.header_len();
        // Split the output after the header into (padding, frame) pieces, one per frame.
        let (_, mut rest) = out.split_at_mut(header_len);
        let mut end = header_len;
        let mut pieces = Vec::with_capacity(frames.len());
        for (frame, &start) in frames.iter().zip(&offsets) {
            let (padding, tail) = rest.split_at_mut(start - end);
            let (dst, tail) = tail.split_at_mut(frame.len());
            padding.fill(0);
            pieces.push(dst);
            rest = tail;
            end = start + frame.len();
        }
        let checksums = &self.checksum_at;
        let blocks = &self.block_checksums;
        let write = |(i, (dst, frame)): (usize, (&mut [u8], &&[u8]))| {
            if checksums[i].is_some() {
                Some(checksum::copy_and_checksum(dst, frame, blocks[i]))
            } else {
                checksum::copy_parallel(dst, frame);
                None
            }
        };
        let total: usize = frames.iter().map(|f| f.len()).sum();
        let sums: Vec<Option<u64>> = if frames.len() > 1 && total >= PARALLEL_FRAMES {
            crate::parallel::run(|| {
                pieces
                    .into_par_iter()
                    .zip(frames.par_iter())
                    .enumerate()
                    .map(write)
                    .collect()
            })
        } else {
            pieces
                .into_iter()
                .zip(frames.iter())
                .enumerate()
                .map(write)
                .collect()
        };
        for (i, sum) in sums.into_iter().enumerate() {
            if let Some(sum) = sum {
                self.set_frame_checksum(i, sum);
            }
        }
        self.write_header(out);
    }

    /// Signs a payload written by `write_contiguous` (its last 32 bytes are the trailer).
    pub fn sign_contiguous(&self, out: &mut [u8], key: &[u8]) {
        debug_assert!(self.signed);
        let (body, trailer) = out.split_at_mut(out.len() - sign::SIGNATURE_LEN);
        trailer.copy_from_slice(&sign::sign(key, &[body]));
    }
}

/// A parsed header. It owns its few strings and says where the tree lies in the buffer it was
/// parsed from, so that a `Payload` can keep it beside the buffer that owns the bytes. Frames
/// are located separately: the contiguous layout (`dumps`) and the list layout (`dumps_frames`)
/// share this parser.
#[derive(Debug, Clone)]
pub struct Header {
    pub version: u8,
    pub flags: u8,
    pub tags: Vec<String>,
    pub versions: Vec<(String, String)>,
    pub frames: Vec<FrameInfo>,
    /// Where the node tree lies in the buffer the header was parsed from.
    pub tree: Range<usize>,
    /// Length of the header including its checksum: where the contiguous layout's padding starts.
    pub len: usize,
}

impl Header {
    pub fn needs_pickle(&self) -> bool {
        self.flags & flags::NEEDS_PICKLE != 0
    }

    pub fn signed(&self) -> bool {
        self.flags & flags::SIGNED != 0
    }
}

fn read_str(r: &mut Reader<'_>, what: &'static str) -> Result<String> {
    let bytes = r.byte_string(what)?;
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| Error::corrupt(format!("{what} is not valid UTF-8")))
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
pub fn parse_header(buf: &[u8], limits: &Limits) -> Result<Header> {
    check_preamble(buf)?;
    let mut r = Reader::new(buf);
    r.take(MAGIC.len() + 1, "the preamble")?;
    let flag_bits = r.u8("the flags byte")?;
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
            if codec > codec::MAX {
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
            let stored_len = if codec == codec::NONE {
                raw_len
            } else {
                r.uvarint("a stored frame length")?
            };
            let shuffle = if frame_flags & frame_flags::SHUFFLE != 0 {
                let itemsize = r.uvarint("a shuffle item size")?;
                if !(2..=1 << 16).contains(&itemsize) || codec == codec::NONE {
                    return Err(Error::corrupt(format!(
                        "frame {i} has a bad shuffle item size {itemsize}"
                    )));
                }
                Some(itemsize as u32)
            } else {
                None
            };
            let checksum = if frame_flags & frame_flags::CHECKSUM != 0 {
                Some(r.u64_le("a frame checksum")?)
            } else {
                None
            };
            let block_checksum = frame_flags & frame_flags::BLOCK_CHECKSUM != 0;
            frames.push(FrameInfo {
                codec,
                raw_len,
                stored_len,
                checksum,
                block_checksum,
                shuffle,
            });
        }
    }
    let tree = body_start + r.position()..body_start + body.len();
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
pub fn locate_frames(header: &Header, buf: &[u8]) -> Result<Vec<std::ops::Range<usize>>> {
    // A signed payload ends with its signature, after the frames.
    let buf = if header.signed() {
        let Some(end) = buf
            .len()
            .checked_sub(sign::SIGNATURE_LEN)
            .filter(|&e| e >= header.len)
        else {
            return Err(Error::Truncated {
                what: "the signature",
                offset: buf.len(),
                needed: sign::SIGNATURE_LEN,
            });
        };
        &buf[..end]
    } else {
        buf
    };
    let mut ranges = Vec::with_capacity(header.frames.len());
    let mut end = header.len;
    for (i, frame) in header.frames.iter().enumerate() {
        let start = frame_start(end, frame.stored_len, packed(header.flags));
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
