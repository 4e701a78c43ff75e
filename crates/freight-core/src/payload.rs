//! The reading contract, in one place: `Payload::open` takes a payload as one buffer (`dumps`)
//! or as a list of buffers (`dumps_frames`), checks its signature first when keys are given,
//! then the header, the frame table, every length and flag; `Frames` hands each frame out at
//! most once, verifies its checksum at most once (in the same pass as a copy when there is
//! one) and decompresses it. `loads`, `inspect`, `verify`, storage and the fuzz targets all
//! come through here, so they accept and refuse exactly the same inputs.
//!
//! Generic over the owner of the bytes (`B: AsRef<[u8]> + Clone`: a Python buffer export in the
//! bindings, `bytes::Bytes` from an object store, an `Arc<[u8]>`, a mapped file), so that no
//! Python is needed to open a payload.

use crate::bits::flags;
use crate::envelope::{self, Header, Limits};
use crate::error::{Error, Result};
use crate::walk::{self, TreeSummary};
use crate::{compress, sign};

mod frames;
pub use frames::{Frame, Frames};

/// A payload as it arrives: one buffer, or the header, each frame and (when signed) the
/// signature as separate buffers.
#[derive(Debug, Clone)]
pub enum Parts<B> {
    Single(B),
    Split(Vec<B>),
}

/// Whether frame checksums are checked when the caller does not say. A payload that carries
/// checksums asked for them to be checked: a zero-copy or mapped load reads each such frame once
/// (no copy) before handing out a view of it, so that a damaged file never decodes into wrong
/// numbers in silence. Opting out (`verify=False`) is the caller's explicit choice, for
/// constant-time views of bytes they trust.
pub const VERIFY_BY_DEFAULT: bool = true;

/// How `Payload::open` reads a payload.
#[derive(Debug, Clone)]
pub struct OpenOptions<'k> {
    /// Keys the signature is checked against, before anything else is read (any of them
    /// verifies); empty: no signature is required.
    pub keys: &'k [Vec<u8>],
    pub limits: Limits,
    /// Whether frame checksums are checked when frames are used (`VERIFY_BY_DEFAULT`).
    pub verify: bool,
}

impl Default for OpenOptions<'_> {
    fn default() -> Self {
        Self {
            keys: &[],
            limits: Limits::default(),
            verify: VERIFY_BY_DEFAULT,
        }
    }
}

/// The node tree of a payload that holds builtins only (no frames, serializer tags, producer
/// versions, pickle or signature), after every check `Payload::open` makes of such a payload;
/// None when the payload has any of those (open it with `Payload::open`). The common small
/// payload (a task's result) then decodes with no shared state to set up.
pub fn builtins_tree(bytes: &[u8], limits: &Limits) -> Result<Option<std::ops::Range<usize>>> {
    // The flags byte says most of it before the header is parsed (its strings, its checksum):
    // `Payload::open` then parses it once rather than twice (a pickled function's load).
    let not_builtins = flags::NEEDS_PICKLE | flags::SIGNED | flags::FRAMES | flags::META;
    if bytes
        .get(envelope::MAGIC.len() + 1)
        .is_some_and(|f| f & not_builtins != 0)
    {
        return Ok(None);
    }
    let header = envelope::parse_header(bytes, limits)?;
    if !header.frames.is_empty()
        || !header.tags.is_empty()
        || !header.versions.is_empty()
        || header.needs_pickle()
        || header.signed()
    {
        return Ok(None);
    }
    envelope::locate_frames(&header, bytes)?;
    Ok(Some(header.tree))
}

/// An opened payload: its checked header and its frames, over the buffers that own the bytes.
#[derive(Debug)]
pub struct Payload<B> {
    /// Boxed: a `Payload` moves through a few `Result`s on every load, and a small one moves
    /// with register copies rather than a `memcpy` call (measured on the smallest loads).
    header: Box<Header>,
    /// The buffer holding the header (the whole payload in the single-buffer layout).
    head: B,
    /// The signature trailer of a signed payload in parts.
    signature: Option<B>,
    single: bool,
    frames: Frames<B>,
}

impl<B: AsRef<[u8]> + Clone> Payload<B> {
    /// Opens a payload: signature (when `opts.keys` is not empty), header, frame table, frame
    /// lengths, padding. Nothing is decompressed or checksummed here but the header and the
    /// signature; frames are checked when used (`Frames`) or by `verify`.
    #[inline]
    pub fn open(parts: Parts<B>, opts: &OpenOptions<'_>) -> Result<Self> {
        match parts {
            Parts::Single(buf) => Self::open_single(buf, opts),
            Parts::Split(parts) => Self::open_split(parts, opts),
        }
    }

    #[inline]
    fn open_single(buf: B, opts: &OpenOptions<'_>) -> Result<Self> {
        let bytes = buf.as_ref();
        if !opts.keys.is_empty() {
            // Before reading anything else: a forged payload must not reach the parser.
            check_single_signature(bytes, opts.keys)?;
        }
        let header = envelope::parse_header(bytes, &opts.limits)?;
        let ranges = envelope::locate_frames(&header, bytes)?;
        let frames = ranges
            .into_iter()
            .zip(&header.frames)
            .map(|(range, info)| Frame::new(buf.clone(), range, *info, bytes))
            .collect();
        let verify = must_verify(&header, opts);
        Ok(Self {
            header: Box::new(header),
            head: buf,
            signature: None,
            single: true,
            frames: Frames::new(frames, verify),
        })
    }

    fn open_split(mut parts: Vec<B>, opts: &OpenOptions<'_>) -> Result<Self> {
        if parts.is_empty() {
            return Err(Error::NoHeader);
        }
        if !opts.keys.is_empty() {
            // The signature is the last buffer, over all the others: checked before parsing.
            check_split_signature(&parts, opts.keys)?;
        }
        let head = parts.remove(0);
        let header = envelope::parse_header(head.as_ref(), &opts.limits)?;
        if header.len != head.as_ref().len() {
            return Err(Error::HeaderPart {
                expected: header.len,
                found: head.as_ref().len(),
            });
        }
        let signed = header.has_trailer();
        if parts.len() != header.frames.len() + signed as usize {
            return Err(Error::PartCount {
                frames: header.frames.len(),
                signed,
                found: parts.len(),
            });
        }
        let signature = if signed { parts.pop() } else { None };
        let mut frames = Vec::with_capacity(parts.len());
        for (index, (owner, info)) in parts.into_iter().zip(&header.frames).enumerate() {
            let len = owner.as_ref().len();
            if len as u64 != info.stored_len {
                return Err(Error::FrameLength {
                    index,
                    found: len as u64,
                    declared: info.stored_len,
                });
            }
            frames.push(Frame::new(owner, 0..len, *info, head.as_ref()));
        }
        let verify = must_verify(&header, opts);
        Ok(Self {
            header: Box::new(header),
            head,
            signature,
            single: false,
            frames: Frames::new(frames, verify),
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The node tree's bytes.
    pub fn tree(&self) -> &[u8] {
        &self.head.as_ref()[self.header.tree.clone()]
    }

    /// The buffer that holds the header and the tree.
    pub fn head(&self) -> &B {
        &self.head
    }

    pub fn frames(&self) -> &Frames<B> {
        &self.frames
    }

    /// Whether the payload came as one buffer (frames then have offsets in it).
    pub fn is_single(&self) -> bool {
        self.single
    }

    /// Bytes in all, header, frames and signature.
    pub fn total_len(&self) -> usize {
        if self.single {
            return self.head.as_ref().len();
        }
        self.head.as_ref().len()
            + self.frames.iter().map(|f| f.stored().len()).sum::<usize>()
            + self.signature.as_ref().map_or(0, |s| s.as_ref().len())
    }

    /// Checks the signature against `keys` (any of them): `Unsigned` or `BadSignature` if it
    /// does not verify. `open` does this first when given keys; `inspect` asks afterwards.
    pub fn check_signature(&self, keys: &[Vec<u8>]) -> Result<()> {
        if self.header.head_signed() {
            // The header's signature, then every frame against the digests it authenticates.
            check_head_signature(self.head.as_ref(), keys)?;
            return self
                .frames
                .iter()
                .enumerate()
                .try_for_each(|(i, f)| f.check(i));
        }
        if self.single {
            return check_single_signature(self.head.as_ref(), keys);
        }
        let Some(signature) = &self.signature else {
            return Err(Error::Unsigned);
        };
        let mut covered: Vec<&[u8]> = vec![self.head.as_ref()];
        covered.extend(self.frames.iter().map(Frame::stored));
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        if sign::verify(&refs, &covered, signature.as_ref()) {
            Ok(())
        } else {
            Err(Error::BadSignature)
        }
    }

    /// A structural walk of the tree (no Python): node counts, depth, and every index in range.
    pub fn walk(&self) -> Result<TreeSummary> {
        walk::walk_tree(
            self.tree(),
            self.frames.len() as u32,
            self.header.tags.len() as u32,
        )
    }

    /// Everything that can be checked without decoding: every frame checksum (whatever
    /// `OpenOptions::verify` said), every compressed frame's block table, and the tree's
    /// structure. The signature is `open`'s job (or `check_signature`'s).
    pub fn verify(&self) -> Result<()> {
        for (index, frame) in self.frames.iter().enumerate() {
            frame.check(index)?;
            if frame.compressed() {
                compress::check_layout(frame.stored(), frame.raw_len())?;
            }
        }
        self.walk().map(|_| ())
    }
}

/// The signature check of a payload in one buffer (its last 32 bytes). Nothing else is read
/// first, not even the magic bytes: with a key, any change (the preamble's included) is an
/// integrity error.
fn check_single_signature(buf: &[u8], keys: &[Vec<u8>]) -> Result<()> {
    if envelope::head_signature(buf).is_some() {
        return check_head_signature(buf, keys);
    }
    let flag_bits = *buf.get(envelope::MAGIC.len() + 1).ok_or(Error::Truncated {
        what: "the flags byte",
        offset: envelope::MAGIC.len() + 1,
        needed: 1,
    })?;
    if flag_bits & flags::SIGNED == 0 || buf.len() < envelope::MAGIC.len() + 2 + sign::SIGNATURE_LEN
    {
        return Err(Error::Unsigned);
    }
    let (body, signature) = buf.split_at(buf.len() - sign::SIGNATURE_LEN);
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    if sign::verify(&refs, &[body], signature) {
        Ok(())
    } else {
        Err(Error::BadSignature)
    }
}

/// The signature check of a head-signed payload (format 1.2): the HMAC after the header
/// checksum, over the bytes before it, located from the preamble alone.
pub fn check_head_signature(buf: &[u8], keys: &[Vec<u8>]) -> Result<()> {
    let Some((covered, signature)) = envelope::head_signature(buf) else {
        return Err(Error::Truncated {
            what: "the header's signature",
            offset: buf.len(),
            needed: sign::SIGNATURE_LEN,
        });
    };
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    if sign::verify(&refs, &[covered], signature) {
        Ok(())
    } else {
        Err(Error::BadSignature)
    }
}

/// Whether frames are verified on use: when the caller asks (the default), and always in a
/// head-signed payload read with keys, where the digests are what authenticates the frames.
fn must_verify(header: &Header, opts: &OpenOptions<'_>) -> bool {
    opts.verify || (header.head_signed() && !opts.keys.is_empty())
}

/// The signature check of a payload in parts, before its header is parsed: the header's own
/// signature (format 1.2), or the last buffer signing all the others (1.0). A mismatch is
/// `Unsigned` when the header says it is not signed.
fn check_split_signature<B: AsRef<[u8]>>(parts: &[B], keys: &[Vec<u8>]) -> Result<()> {
    if let Some(head) = parts
        .first()
        .filter(|h| envelope::head_signature(h.as_ref()).is_some())
    {
        return check_head_signature(head.as_ref(), keys);
    }
    let Some((signature, covered)) = parts.split_last().filter(|(_, rest)| !rest.is_empty()) else {
        return Err(Error::Unsigned);
    };
    let covered: Vec<&[u8]> = covered.iter().map(AsRef::as_ref).collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    if sign::verify(&refs, &covered, signature.as_ref()) {
        return Ok(());
    }
    let signed = covered[0]
        .get(envelope::MAGIC.len() + 1)
        .is_some_and(|f| f & flags::SIGNED != 0);
    Err(if signed {
        Error::BadSignature
    } else {
        Error::Unsigned
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{EnvelopeSpec, EnvelopeWriter, FrameLayout};
    use crate::TreeWriter;
    use std::sync::Arc;

    fn payload(frames: &[&[u8]], signed_with: Option<&[u8]>) -> (Vec<u8>, Vec<Vec<u8>>) {
        let mut tree = TreeWriter::new();
        tree.none();
        let spec = EnvelopeSpec {
            frames: frames
                .iter()
                .map(|f| FrameLayout::raw(f.len() as u64))
                .collect(),
            checksums: true,
            signed: signed_with.is_some(),
            tree: tree.as_bytes(),
            ..Default::default()
        };
        let mut writer = EnvelopeWriter::new(&spec);
        let mut single = vec![0u8; writer.total_len()];
        writer.write_contiguous(&mut single, frames, signed_with);
        let mut parts = vec![single[..writer.header_len()].to_vec()];
        parts.extend(frames.iter().map(|f| f.to_vec()));
        (single, parts)
    }

    fn opts(verify: bool) -> OpenOptions<'static> {
        OpenOptions {
            verify,
            ..Default::default()
        }
    }

    #[test]
    fn both_layouts_open_to_the_same_frames() {
        let (single, parts) = payload(&[b"abc", &[7u8; 100]], None);
        let one = Payload::open(Parts::Single(Arc::<[u8]>::from(single)), &opts(true)).unwrap();
        let parts = parts.into_iter().map(Arc::<[u8]>::from).collect();
        let split = Payload::open(Parts::Split(parts), &opts(true)).unwrap();
        for p in [&one, &split] {
            assert_eq!(p.frames().len(), 2);
            assert_eq!(&*p.frames().raw(0).unwrap(), b"abc");
            let mut out = vec![0u8; 100];
            p.frames().copy_into(1, &mut out).unwrap();
            assert_eq!(out, vec![7u8; 100]);
            p.verify().unwrap();
        }
        assert_eq!(one.total_len(), one.head().len());
        assert_eq!(split.total_len(), split.head().len() + 103);
    }

    #[test]
    fn bytes_owners_are_shared_not_copied() {
        let (single, parts) = payload(&[&[5u8; 4096]], None);
        let single = bytes::Bytes::from(single);
        let p = Payload::open(Parts::Single(single.clone()), &opts(true)).unwrap();
        // The frame views the very buffer it was opened from.
        let frame = p.frames().view(0).unwrap();
        assert_eq!(frame.stored().as_ptr(), single[frame.range()].as_ptr());
        let parts: Vec<bytes::Bytes> = parts.into_iter().map(bytes::Bytes::from).collect();
        let p = Payload::open(Parts::Split(parts.clone()), &opts(true)).unwrap();
        assert_eq!(
            p.frames().view(0).unwrap().stored().as_ptr(),
            parts[1].as_ptr()
        );
    }

    #[test]
    fn frames_are_used_once() {
        let (single, _) = payload(&[b"abc"], None);
        let p = Payload::open(Parts::Single(single), &opts(true)).unwrap();
        p.frames().raw(0).unwrap();
        assert_eq!(
            p.frames().raw(0).unwrap_err(),
            Error::FrameReused { index: 0 }
        );
        assert_eq!(
            p.frames().get(1).unwrap_err(),
            Error::NoSuchFrame { index: 1, count: 1 }
        );
    }

    #[test]
    fn a_changed_frame_is_caught_when_used_or_verified() {
        let (mut single, _) = payload(&[&[1u8; 64]], None);
        let last = single.len() - 1;
        single[last] ^= 1;
        let p = Payload::open(Parts::Single(single.clone()), &opts(true)).unwrap();
        assert!(p.frames().raw(0).unwrap_err().is_integrity());
        assert!(p.verify().unwrap_err().is_integrity());
        // Not verifying: the bytes come back as they are.
        let p = Payload::open(Parts::Single(single), &opts(false)).unwrap();
        assert_eq!(p.frames().raw(0).unwrap()[63], 0);
    }

    #[test]
    fn parts_are_checked_against_the_header() {
        let (_, parts) = payload(&[b"abc"], None);
        let open = |parts: Vec<Vec<u8>>| Payload::open(Parts::Split(parts), &opts(true));
        assert_eq!(open(vec![]).unwrap_err(), Error::NoHeader);
        let mut longer = parts.clone();
        longer[0].push(0);
        assert!(matches!(open(longer), Err(Error::HeaderPart { .. })));
        assert!(matches!(
            open(parts[..1].to_vec()),
            Err(Error::PartCount { found: 0, .. })
        ));
        let mut short = parts.clone();
        short[1].pop();
        assert!(matches!(open(short), Err(Error::FrameLength { .. })));
    }

    #[test]
    fn signatures_are_checked_before_parsing() {
        let key = b"k".repeat(32);
        let keys = vec![key.clone()];
        let with_keys = OpenOptions {
            keys: &keys,
            ..Default::default()
        };
        let (single, parts) = payload(&[b"abc"], Some(&key));
        Payload::open(Parts::Single(single.clone()), &with_keys).unwrap();
        Payload::open(Parts::Split(parts.clone()), &with_keys).unwrap();
        let other = vec![b"x".repeat(32)];
        let p = Payload::open(Parts::Split(parts), &opts(true)).unwrap();
        assert_eq!(p.check_signature(&other).unwrap_err(), Error::BadSignature);
        p.check_signature(&keys).unwrap();
        let (unsigned, parts) = payload(&[b"abc"], None);
        for parts in [Parts::Single(unsigned), Parts::Split(parts)] {
            assert_eq!(
                Payload::open(parts, &with_keys).unwrap_err(),
                Error::Unsigned
            );
        }
        let mut forged = single;
        forged[8] ^= 1;
        assert_eq!(
            Payload::open(Parts::Single(forged), &with_keys).unwrap_err(),
            Error::BadSignature
        );
    }
}
