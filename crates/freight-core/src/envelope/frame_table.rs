//! One entry of the frame table: how a frame is stored (codec, lengths, shuffle) and what seals
//! it (a checksum, or block digests: `digest.rs`), written by `EnvelopeWriter` and read by
//! `parse_header`. docs/FORMAT.md, "Frame table", describes the same bytes.

use crate::bits::{codec, frame_flags};
use crate::checksum;
use crate::digest::{self, Scheme};
use crate::envelope::{FrameLayout, Limits};
use crate::error::{Error, Result};
use crate::reader::Reader;
use crate::varint::put_uvarint;

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
    /// The frame's block digests (format 1.2).
    pub digests: Option<FrameDigests>,
}

/// Where a frame's digest table lies in the buffer its header was parsed from, and how it was
/// computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDigests {
    pub scheme: Scheme,
    /// Offset of the table in the header's buffer; `scheme.table_len(stored_len)` bytes.
    pub at: usize,
}

impl FrameInfo {
    /// The digest table's byte range in the header's buffer.
    pub fn digest_range(&self) -> Option<std::ops::Range<usize>> {
        let d = self.digests?;
        Some(d.at..d.at + d.scheme.table_len(self.stored_len) as usize)
    }
}

/// What a writer seals a frame with, and where in the header the result goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seal {
    None,
    Checksum { at: usize, block: bool },
    Digests { scheme: Scheme, at: usize },
}

/// A frame's seal, computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sealed {
    None,
    Checksum(u64),
    Digests(Vec<u8>),
}

impl Seal {
    /// The one policy for what seals a frame: in a signed payload, SHA-256 block digests (the
    /// header's signature then authenticates every block); otherwise, when checksums are asked
    /// for (and on every compressed frame, whose checksum guards the decompressor), xxh3 block
    /// digests for a frame larger than one checksum block (so that a part of it can be checked
    /// alone) and a plain xxh3 checksum for a smaller one.
    pub fn choose(frame: &FrameLayout, checksums: bool, signed: bool) -> Seal {
        let at = 0;
        if signed {
            return Seal::Digests {
                scheme: Scheme::SHA256,
                at,
            };
        }
        if !(checksums || frame.codec != codec::NONE) {
            return Seal::None;
        }
        if checksum::block_mode(frame.stored_len as usize) {
            Seal::Digests {
                scheme: Scheme::XXH3,
                at,
            }
        } else {
            Seal::Checksum { at, block: false }
        }
    }

    pub(super) fn shift(&mut self, by: usize) {
        match self {
            Seal::None => {}
            Seal::Checksum { at, .. } | Seal::Digests { at, .. } => *at += by,
        }
    }

    /// Computes the seal of a frame's stored bytes.
    pub fn compute(&self, stored: &[u8]) -> Sealed {
        match *self {
            Seal::None => Sealed::None,
            Seal::Checksum { block, .. } => {
                Sealed::Checksum(checksum::frame_checksum(stored, block))
            }
            Seal::Digests { scheme, .. } => {
                let mut table = vec![0u8; scheme.table_len(stored.len() as u64) as usize];
                scheme.digest(stored, &mut table);
                Sealed::Digests(table)
            }
        }
    }

    /// Copies a frame's stored bytes into `dst` and computes its seal on the way.
    pub fn copy(&self, dst: &mut [u8], src: &[u8]) -> Sealed {
        match *self {
            Seal::None => {
                checksum::copy_parallel(dst, src);
                Sealed::None
            }
            Seal::Checksum { block, .. } => {
                Sealed::Checksum(checksum::copy_and_checksum(dst, src, block))
            }
            Seal::Digests { scheme, .. } => {
                let mut table = vec![0u8; scheme.table_len(src.len() as u64) as usize];
                scheme.copy_and_digest(dst, src, &mut table);
                Sealed::Digests(table)
            }
        }
    }

    /// Writes a computed seal into its place in the header's prefix.
    pub fn fill(&self, prefix: &mut [u8], sealed: Sealed) {
        match (*self, sealed) {
            (Seal::Checksum { at, .. }, Sealed::Checksum(sum)) => {
                prefix[at..at + 8].copy_from_slice(&sum.to_le_bytes())
            }
            (Seal::Digests { at, .. }, Sealed::Digests(table)) => {
                prefix[at..at + table.len()].copy_from_slice(&table)
            }
            (Seal::None, Sealed::None) => {}
            (seal, _) => panic!("a seal of another kind filled for {seal:?}"),
        }
    }
}

/// Writes a frame's table entry, its checksum or digests zeroed (filled by `Seal::fill`); the
/// seal's offset is within `out`.
pub(super) fn write_entry(out: &mut Vec<u8>, frame: &FrameLayout, seal: Seal) -> Seal {
    let mut bits = 0;
    match seal {
        Seal::None => {}
        Seal::Checksum { block, .. } => {
            bits |= frame_flags::CHECKSUM;
            if block {
                bits |= frame_flags::BLOCK_CHECKSUM;
            }
        }
        Seal::Digests { .. } => bits |= frame_flags::DIGESTS,
    }
    if frame.shuffle.is_some() {
        bits |= frame_flags::SHUFFLE;
    }
    out.push(bits);
    out.push(frame.codec);
    put_uvarint(out, frame.raw_len);
    if frame.codec != codec::NONE {
        put_uvarint(out, frame.stored_len);
    }
    if let Some(itemsize) = frame.shuffle {
        put_uvarint(out, itemsize as u64);
    }
    match seal {
        Seal::None => Seal::None,
        Seal::Checksum { block, .. } => {
            let at = out.len();
            out.extend_from_slice(&[0; 8]);
            Seal::Checksum { at, block }
        }
        Seal::Digests { scheme, .. } => {
            out.push(scheme.kind);
            out.push(scheme.block_log2);
            let at = out.len();
            out.resize(at + scheme.table_len(frame.stored_len) as usize, 0);
            Seal::Digests { scheme, at }
        }
    }
}

/// Reads frame `i`'s table entry; `base` is the offset of `r`'s bytes in the header's buffer
/// (digest tables are located by their offset there).
pub(super) fn parse_entry(
    r: &mut Reader<'_>,
    i: usize,
    limits: &Limits,
    base: usize,
) -> Result<FrameInfo> {
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
    let raw_len = Limits::within("a frame", r.uvarint("a frame length")?, limits.max_frame)?;
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
    let digests = if frame_flags & frame_flags::DIGESTS != 0 {
        let kind = r.u8("a digest kind")?;
        let block_log2 = r.u8("a digest block size")?;
        if kind > digest::kind::SHA256 || !digest::BLOCK_LOG2_RANGE.contains(&block_log2) {
            return Err(Error::corrupt(format!(
                "frame {i} has digests of unknown kind {kind} or block size 2^{block_log2}"
            )));
        }
        let scheme = Scheme { kind, block_log2 };
        let at = base + r.position();
        r.take(scheme.table_len(stored_len) as usize, "a digest table")?;
        Some(FrameDigests { scheme, at })
    } else {
        None
    };
    Ok(FrameInfo {
        codec,
        raw_len,
        stored_len,
        checksum,
        block_checksum: frame_flags & frame_flags::BLOCK_CHECKSUM != 0,
        shuffle,
        digests,
    })
}
