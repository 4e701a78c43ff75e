//! The reading side of the envelope: the preamble's check, the header parsed and verified (its
//! checksum, and where a head-signed payload's signature lies), and the frames of a contiguous
//! payload located. The writing side is `EnvelopeWriter` (envelope.rs).

use std::ops::Range;

use super::frame_table::{self, FrameInfo};
use super::{frame_start, packed, Limits, HEADER_CHECKSUM_LEN, MAGIC, VERSION};
use crate::bits::flags;
use crate::checksum;
use crate::error::{Error, Result};
use crate::reader::Reader;
use crate::sign;

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

    /// Whether the signature follows the header and covers it alone (format 1.2), every frame
    /// authenticated by its SHA-256 digests; otherwise a signed payload's signature is the 1.0
    /// trailer over everything.
    pub fn head_signed(&self) -> bool {
        self.flags & flags::HEAD_SIGNED != 0
    }

    /// Whether a 1.0 signature trailer follows the frames.
    pub fn has_trailer(&self) -> bool {
        self.signed() && !self.head_signed()
    }
}

/// Where a head-signed payload's header signature lies (the 32 bytes after the header checksum)
/// and the bytes it covers, read from the preamble alone: the signature is checked before the
/// header is parsed. None when `buf` is too short or is not head-signed.
pub fn head_signature(buf: &[u8]) -> Option<(&[u8], &[u8])> {
    let flag_bits = *buf.get(MAGIC.len() + 1)?;
    if flag_bits & flags::HEAD_SIGNED == 0 {
        return None;
    }
    let mut r = Reader::new(buf);
    r.take(MAGIC.len() + 2, "the preamble").ok()?;
    let body_len = r.uvarint("the header length").ok()?;
    let covered = (r.position() as u64)
        .checked_add(body_len)?
        .checked_add(HEADER_CHECKSUM_LEN as u64)? as usize;
    let signature = buf.get(covered..covered.checked_add(sign::SIGNATURE_LEN)?)?;
    Some((&buf[..covered], signature))
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
    let body_len = Limits::within(
        "a header",
        r.uvarint("the header length")?,
        limits.max_header,
    )?;
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
    if flag_bits & flags::HEAD_SIGNED != 0 {
        if flag_bits & flags::SIGNED == 0 {
            return Err(Error::corrupt("flag head_signed without flag signed"));
        }
        r.take(sign::SIGNATURE_LEN, "the header's signature")?;
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
            frames.push(frame_table::parse_entry(&mut r, i, limits, body_start)?);
        }
    }
    if flag_bits & flags::HEAD_SIGNED != 0 {
        if let Some(i) = frames.iter().position(|f| {
            f.digests
                .is_none_or(|d| d.scheme.kind != crate::digest::kind::SHA256)
        }) {
            return Err(Error::corrupt(format!(
                "frame {i} of a head-signed payload has no SHA-256 digests to authenticate it"
            )));
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
    // A signed payload of format 1.0 ends with its signature, after the frames.
    let buf = if header.has_trailer() {
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
                needed: (start as u64)
                    .saturating_add(frame.stored_len)
                    .saturating_sub(buf.len() as u64)
                    .try_into()
                    .unwrap_or(usize::MAX),
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
