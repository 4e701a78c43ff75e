//! A payload's frames and the rules of their use: each frame used by one node at most, its
//! checksum or block digests verified once (fused with the copy when there is one), compressed
//! frames decompressed on the way. `Payload::open` builds them (payload.rs).

use rayon::prelude::*;
use std::borrow::Cow;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::bits::codec;
use crate::envelope::FrameInfo;
use crate::error::{Error, Result};
use crate::{checksum, compress};

/// One frame: where its stored bytes lie, what the table says of them, and whether a node has
/// used it or its checksum has been verified.
#[derive(Debug)]
pub struct Frame<B> {
    owner: B,
    range: Range<usize>,
    info: FrameInfo,
    /// The frame's block digest table (format 1.2), copied out of the header.
    digests: Option<Box<[u8]>>,
    /// Atomic rather than `Cell` so that frames can be used with the interpreter released.
    used: AtomicBool,
    verified: AtomicBool,
}

impl<B: AsRef<[u8]>> Frame<B> {
    /// `head`: the buffer the header was parsed from (the frame's digest table lies in it).
    pub(super) fn new(owner: B, range: Range<usize>, info: FrameInfo, head: &[u8]) -> Self {
        Self {
            owner,
            range,
            digests: info.digest_range().map(|r| head[r].into()),
            info,
            used: AtomicBool::new(false),
            verified: AtomicBool::new(false),
        }
    }

    /// The bytes as stored (compressed or not).
    pub fn stored(&self) -> &[u8] {
        &self.owner.as_ref()[self.range.clone()]
    }

    /// The buffer the stored bytes lie in, and where (for zero-copy views of it).
    pub fn owner(&self) -> &B {
        &self.owner
    }

    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }

    pub fn info(&self) -> &FrameInfo {
        &self.info
    }

    /// Bytes once decompressed (the stored length for raw frames).
    pub fn raw_len(&self) -> usize {
        self.info.raw_len as usize
    }

    /// Whether the frame is compressed (so it can only be copied out, never viewed).
    pub fn compressed(&self) -> bool {
        self.info.codec != codec::NONE
    }

    /// Whether the stored checksum or digests (if any) match, computed now.
    pub fn checksum_ok(&self) -> Option<bool> {
        if self.info.checksum.is_none() && self.digests.is_none() {
            return None;
        }
        Some(self.check(0).is_ok())
    }

    /// The frame's block digest table (format 1.2), to check a part of the frame on its own
    /// (`check_blocks`).
    pub fn digest_table(&self) -> Option<&[u8]> {
        self.digests.as_deref()
    }

    /// Checks `data`, the stored bytes of this frame from block `first` on (a lazy read of a
    /// part of it), against the frame's block digests.
    pub fn check_blocks(&self, index: usize, first: usize, data: &[u8]) -> Result<()> {
        let (Some(d), Some(table)) = (self.info.digests, &self.digests) else {
            return Err(Error::corrupt(format!(
                "frame {index} has no block digests to check a part of it against"
            )));
        };
        d.scheme
            .check(data, first, table)
            .map_err(|block| bad_block(index, block, d.scheme.kind == crate::digest::kind::SHA256))
    }

    /// Checks the stored checksum and digests, if any.
    pub(super) fn check(&self, index: usize) -> Result<()> {
        if let Some(stored) = self.info.checksum {
            let computed = checksum::frame_checksum(self.stored(), self.info.block_checksum);
            same_checksum(index, stored, computed)?;
        }
        self.check_blocks_all(index)
    }

    fn check_blocks_all(&self, index: usize) -> Result<()> {
        match self.info.digests {
            Some(_) => self.check_blocks(index, 0, self.stored()),
            None => Ok(()),
        }
    }

    fn decompress_into(&self, dst: &mut [u8]) -> Result<()> {
        let shuffle = self.info.shuffle.map(|s| s as usize);
        compress::decompress(self.info.codec, self.stored(), shuffle, dst)
    }
}

fn bad_block(index: usize, block: usize, signed: bool) -> Error {
    Error::Digest {
        what: format!("block {block} of frame {index}"),
        signed,
    }
}

fn same_checksum(index: usize, stored: u64, computed: u64) -> Result<()> {
    if stored == computed {
        return Ok(());
    }
    Err(Error::Checksum {
        what: format!("frame {index}"),
        stored,
        computed,
    })
}

/// The frames of an opened payload, with the rules of their use: each frame is used by one
/// node at most (`claim`), its checksum is verified once (when `verify` is on), fused with the
/// copy when the frame is copied out, and compressed frames are decompressed on the way.
#[derive(Debug)]
pub struct Frames<B> {
    frames: Vec<Frame<B>>,
    verify: bool,
}

impl<B: AsRef<[u8]>> Frames<B> {
    pub(super) fn new(frames: Vec<Frame<B>>, verify: bool) -> Self {
        Self { frames, verify }
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Frame<B>> {
        self.frames.iter()
    }

    /// Frame `index`, to look at (length, codec, owner) before using it.
    pub fn get(&self, index: u32) -> Result<&Frame<B>> {
        self.frames.get(index as usize).ok_or(Error::NoSuchFrame {
            index,
            count: self.frames.len(),
        })
    }

    /// Marks frame `index` as used by the calling node; a second use is refused.
    pub fn claim(&self, index: u32) -> Result<&Frame<B>> {
        let frame = self.get(index)?;
        if frame.used.swap(true, Ordering::Relaxed) {
            return Err(Error::FrameReused { index });
        }
        Ok(frame)
    }

    /// Verifies a frame's checksum unless it was verified already or verifying is off.
    fn verify_once(&self, index: u32, frame: &Frame<B>) -> Result<()> {
        if self.verify && !frame.verified.load(Ordering::Relaxed) {
            frame.check(index as usize)?;
        }
        frame.verified.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Claims an uncompressed frame to be viewed in place (verified first). Compressed frames
    /// cannot be viewed: copy them out with `copy_into`.
    pub fn view(&self, index: u32) -> Result<&Frame<B>> {
        let frame = self.claim(index)?;
        if frame.compressed() {
            return Err(Error::corrupt(format!(
                "frame {index} is compressed and cannot be viewed in place"
            )));
        }
        self.verify_once(index, frame)?;
        Ok(frame)
    }

    /// The verified raw bytes of a frame: borrowed from the input, or decompressed.
    pub fn raw(&self, index: u32) -> Result<Cow<'_, [u8]>> {
        let frame = self.claim(index)?;
        self.verify_once(index, frame)?;
        if !frame.compressed() {
            return Ok(Cow::Borrowed(frame.stored()));
        }
        let mut raw = vec![0u8; frame.raw_len()];
        frame.decompress_into(&mut raw)?;
        Ok(Cow::Owned(raw))
    }

    /// Copies (or decompresses) a frame into `dst`, exactly its raw length, verifying its
    /// checksum: in the same pass as the copy, or before decompressing.
    pub fn copy_into(&self, index: u32, dst: &mut [u8]) -> Result<()> {
        let frame = self.claim(index)?;
        if dst.len() != frame.raw_len() {
            return Err(Error::corrupt(format!(
                "frame {index} holds {} bytes once decoded, not the {} its node needs",
                frame.raw_len(),
                dst.len()
            )));
        }
        if frame.compressed() {
            self.verify_once(index, frame)?;
            return frame.decompress_into(dst);
        }
        let src = frame.stored();
        let check = self.verify && !frame.verified.load(Ordering::Relaxed);
        match (frame.info.checksum, frame.info.digests, &frame.digests) {
            (Some(stored), _, _) if check => {
                let computed = checksum::copy_and_checksum(dst, src, frame.info.block_checksum);
                same_checksum(index as usize, stored, computed)?;
                frame.check_blocks_all(index as usize)?;
            }
            (None, Some(d), Some(table)) if check => {
                // Copied and hashed block by block in one pass, then compared.
                let mut computed = vec![0u8; table.len()];
                d.scheme.copy_and_digest(dst, src, &mut computed);
                if computed != **table {
                    let len = d.scheme.digest_len();
                    let block = (computed.chunks(len).zip(table.chunks(len)))
                        .position(|(a, b)| a != b)
                        .unwrap_or(0);
                    let signed = d.scheme.kind == crate::digest::kind::SHA256;
                    return Err(bad_block(index as usize, block, signed));
                }
            }
            _ => checksum::copy_parallel(dst, src),
        }
        frame.verified.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Verifies the checksums of these frames not verified yet, on all cores, when there are
    /// several totalling `envelope::PARALLEL_FRAMES` bytes or more (a serializer's frames, viewed
    /// in place: nothing to fuse the hashing with); otherwise leaves them to be verified one by
    /// one on use. Indices out of range are left to the use to report.
    pub fn verify_many(&self, indices: &[u32]) -> Result<()>
    where
        B: Sync,
    {
        if !self.verify || indices.len() < 2 {
            return Ok(());
        }
        let todo: Vec<(u32, &Frame<B>)> = indices
            .iter()
            .filter_map(|&i| Some((i, self.frames.get(i as usize)?)))
            .filter(|(_, f)| !f.verified.load(Ordering::Relaxed))
            .collect();
        let total: usize = todo.iter().map(|(_, f)| f.stored().len()).sum();
        if todo.len() < 2 || total < crate::envelope::PARALLEL_FRAMES {
            return Ok(());
        }
        crate::parallel::run(|| {
            todo.par_iter().try_for_each(|(index, frame)| {
                frame.check(*index as usize)?;
                frame.verified.store(true, Ordering::Relaxed);
                Ok(())
            })
        })
    }

    /// Bytes not yet verified (to decide whether verifying is worth releasing the interpreter).
    pub fn unverified_len(&self) -> usize {
        if !self.verify {
            return 0;
        }
        self.frames
            .iter()
            .filter(|f| !f.verified.load(Ordering::Relaxed))
            .map(|f| f.stored().len())
            .sum()
    }

    /// Verifies these frames (each once), before anything uses them.
    pub fn verify_these(&self, indices: &[u32]) -> Result<()> {
        for &index in indices {
            self.verify_once(index, self.get(index)?)?;
        }
        Ok(())
    }

    /// Verifies the frames no node used, so that a change anywhere in the payload is caught.
    pub fn verify_rest(&self) -> Result<()> {
        for (index, frame) in self.frames.iter().enumerate() {
            self.verify_once(index as u32, frame)?;
        }
        Ok(())
    }
}
