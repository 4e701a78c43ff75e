//! The envelope: preamble, header (meta section, frame table, node tree), header checksum, then
//! frames at 64-byte aligned offsets (16 for small ones in packed payloads). docs/FORMAT.md describes the same bytes in prose.

use rayon::prelude::*;

use crate::bits::{codec, flags};
use crate::checksum;
use crate::error::{Error, Result};
use crate::sign;
use crate::varint::put_uvarint;

pub const MAGIC: [u8; 4] = *b"\x89FRT";
pub const VERSION: u8 = 1;
/// Frames start at offsets (from the payload's first byte) that are multiples of this.
pub const ALIGN: usize = 64;

mod frame_table;
mod header;
mod parts;
pub use frame_table::{FrameDigests, FrameInfo, Seal, Sealed};
pub use header::{check_preamble, head_signature, locate_frames, parse_header, Header};
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

impl Limits {
    /// `declared` when it is within `limit`, else the error naming `what` (a header, a frame).
    pub(crate) fn within(what: &'static str, declared: u64, limit: u64) -> Result<u64> {
        if declared > limit {
            return Err(Error::OverLimit {
                what,
                declared,
                limit,
            });
        }
        Ok(declared)
    }
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
    /// Whether the payload is signed (the header signature of format 1.2, `write_header`).
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
    /// The prefix of a payload of its tree alone (`bare`), kept inline: no allocation for it.
    bare: Option<BarePrefix>,
    tree: &'a [u8],
    /// What seals each frame, and where in `prefix` its checksum or digests go.
    seals: Vec<Seal>,
    frame_lens: Vec<u64>,
    signed: bool,
}

/// Magic, version, flags and a header length (at most 10 bytes): the whole prefix of a payload
/// with no meta section and no frames.
#[derive(Debug, Clone, Copy)]
struct BarePrefix {
    bytes: [u8; 16],
    len: u8,
}

impl BarePrefix {
    #[inline]
    fn new(tree_len: usize, flag_bits: u8) -> Self {
        let mut bytes = [0u8; 16];
        bytes[..MAGIC.len()].copy_from_slice(&MAGIC);
        bytes[4] = VERSION;
        bytes[5] = flag_bits;
        // The header length as put_uvarint writes it (LEB128).
        let (mut len, mut v) = (6, tree_len as u64);
        while v >= 0x80 {
            bytes[len] = (v as u8) | 0x80;
            v >>= 7;
            len += 1;
        }
        bytes[len] = v as u8;
        Self {
            bytes,
            len: len as u8 + 1,
        }
    }

    #[inline]
    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// The envelope of an unsigned payload that is its tree alone: no frames, no serializer tags,
/// no producer versions (most small values). The bytes `EnvelopeWriter::new` lays out for such a
/// spec, written without building one (its buffers and bookkeeping were a third of a small
/// value's `dumps`).
pub struct TreeOnly<'a> {
    prefix: BarePrefix,
    tree: &'a [u8],
}

impl<'a> TreeOnly<'a> {
    #[inline]
    pub fn new(tree: &'a [u8], needs_pickle: bool) -> Self {
        let flag_bits = if needs_pickle { flags::NEEDS_PICKLE } else { 0 };
        Self {
            prefix: BarePrefix::new(tree.len(), flag_bits),
            tree,
        }
    }

    /// The payload's length: prefix, tree and the header checksum (never empty).
    #[allow(clippy::len_without_is_empty)]
    #[inline]
    pub fn len(&self) -> usize {
        self.prefix.len as usize + self.tree.len() + HEADER_CHECKSUM_LEN
    }

    /// Writes the payload into `out` (exactly `len()` bytes).
    #[inline]
    pub fn write(&self, out: &mut [u8]) {
        seal_header(out, self.prefix.as_bytes(), self.tree);
    }
}

/// Writes `head` and `tree` at the start of `out`, then the checksum of both after them;
/// returns where the checksum ends.
#[inline]
fn seal_header(out: &mut [u8], head: &[u8], tree: &[u8]) -> usize {
    let (prefix, rest) = out.split_at_mut(head.len());
    prefix.copy_from_slice(head);
    rest[..tree.len()].copy_from_slice(tree);
    let end = head.len() + tree.len();
    let sum = checksum::hash(&out[..end]);
    let end = end + HEADER_CHECKSUM_LEN;
    out[end - HEADER_CHECKSUM_LEN..end].copy_from_slice(&sum.to_le_bytes());
    end
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
            flag_bits |= flags::SIGNED | flags::HEAD_SIGNED;
        }
        if !has_meta && spec.frames.is_empty() {
            return Self::bare(spec, flag_bits);
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
        let mut seals = Vec::with_capacity(spec.frames.len());
        if !spec.frames.is_empty() {
            put_uvarint(&mut sections, spec.frames.len() as u64);
            for frame in &spec.frames {
                seals.push(frame_table::write_entry(
                    &mut sections,
                    frame,
                    Seal::choose(frame, spec.checksums, spec.signed),
                ));
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
        for seal in &mut seals {
            seal.shift(preamble);
        }
        Self {
            prefix,
            bare: None,
            tree: spec.tree,
            seals,
            frame_lens: spec.frames.iter().map(|f| f.stored_len).collect(),
            signed: spec.signed,
        }
    }

    /// A payload of its tree alone (no meta section, no frames: a small value's `dumps`), laid
    /// out as `new` lays it out, without the section buffer, frame bookkeeping and prefix
    /// allocation that `new` pays for otherwise (a tenth of a small value's `dumps`).
    #[inline(never)]
    fn bare(spec: &EnvelopeSpec<'a>, flag_bits: u8) -> Self {
        Self {
            prefix: Vec::new(),
            bare: Some(BarePrefix::new(spec.tree.len(), flag_bits)),
            tree: spec.tree,
            seals: Vec::new(),
            frame_lens: Vec::new(),
            signed: spec.signed,
        }
    }

    /// Magic, version, flags, header length, meta section and frame table.
    fn prefix(&self) -> &[u8] {
        match &self.bare {
            Some(bare) => bare.as_bytes(),
            None => &self.prefix,
        }
    }

    /// Length of the header including its checksum (and the signature that follows it in a
    /// signed payload).
    pub fn header_len(&self) -> usize {
        self.prefix().len()
            + self.tree.len()
            + HEADER_CHECKSUM_LEN
            + if self.signed { sign::SIGNATURE_LEN } else { 0 }
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

    /// Total length of the contiguous layout.
    pub fn total_len(&self) -> usize {
        let mut end = self.header_len();
        for &len in &self.frame_lens {
            end = frame_start(end, len, true) + len as usize;
        }
        end
    }

    /// Bytes of frames that carry a checksum or digests (what sealing them hashes).
    pub fn sealed_len(&self) -> usize {
        self.seals
            .iter()
            .zip(&self.frame_lens)
            .filter(|(seal, _)| !matches!(seal, Seal::None))
            .map(|(_, &len)| len as usize)
            .sum()
    }

    pub fn frame_count(&self) -> usize {
        self.frame_lens.len()
    }

    /// Writes the header, sealed with its checksum, into `out[..header_len()]` (the first
    /// buffer of `dumps_frames`, or the start of the contiguous layout), then, in a signed
    /// payload, the HMAC of everything before it under `key`. Call it after the frames are
    /// sealed (`seal_frames`, or `write_contiguous`).
    pub fn write_header(&self, out: &mut [u8], key: Option<&[u8]>) {
        let end = seal_header(out, self.prefix(), self.tree);
        match (self.signed, key) {
            (true, Some(key)) => {
                let signature = sign::sign(key, &[&out[..end]]);
                out[end..end + sign::SIGNATURE_LEN].copy_from_slice(&signature);
            }
            (false, None) => {}
            _ => panic!("a signed payload's header is written with its key, and only it"),
        }
    }

    /// Writes the whole envelope into `out` (exactly `total_len()` bytes): header, zeroed
    /// padding, and each frame copied once, its checksum computed on the way. Payloads of
    /// several frames totalling `PARALLEL_FRAMES` bytes or more copy and hash their frames on
    /// all cores (a frame's blocks already are, but frames of 1 MiB or less are one block).
    pub fn write_contiguous(&mut self, out: &mut [u8], frames: &[&[u8]], key: Option<&[u8]>) {
        assert_eq!(frames.len(), self.frame_lens.len(), "one source per frame");
        if frames.is_empty() {
            // The header alone (most small values): no layout to compute, nothing to seal.
            assert_eq!(out.len(), self.header_len(), "output sized by total_len");
            return self.write_header(out, key);
        }
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
        let seals = &self.seals;
        let write = |(i, (dst, frame)): (usize, (&mut [u8], &&[u8]))| seals[i].copy(dst, frame);
        let total: usize = frames.iter().map(|f| f.len()).sum();
        let sealed: Vec<Sealed> = if frames.len() > 1 && total >= PARALLEL_FRAMES {
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
        for (i, sealed) in sealed.into_iter().enumerate() {
            self.seals[i].fill(&mut self.prefix, sealed);
        }
        self.write_header(out, key);
    }
}
