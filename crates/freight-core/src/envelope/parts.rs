//! The contiguous layout as parts, for writers that stream it (a store writes them from the
//! objects' own memory and never assembles the payload), and the frame checksums such writers
//! set themselves: the same bytes `EnvelopeWriter::write_contiguous` writes in one buffer.

use rayon::prelude::*;

use super::{frame_start, EnvelopeWriter, Sealed, ALIGN, PARALLEL_FRAMES};

/// A part of the contiguous layout (see `EnvelopeWriter::parts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Header,
    /// This many zero bytes (at most `ALIGN`: take them from `ZEROS`).
    Padding(usize),
    Frame(usize),
}

/// Zero bytes for the padding before a frame.
pub static ZEROS: [u8; ALIGN] = [0; ALIGN];

impl EnvelopeWriter<'_> {
    /// The contiguous layout as the sequence of its parts, for writers that stream it (a store
    /// writes the parts from the objects' own memory, never assembling the payload): the header,
    /// then each frame after its zero padding (`ZEROS[..n]`). The same bytes `write_contiguous`
    /// writes.
    pub fn parts(&self) -> Vec<Part> {
        let mut parts = Vec::with_capacity(2 * self.frame_lens.len() + 2);
        parts.push(Part::Header);
        let mut end = self.header_len();
        for (i, &len) in self.frame_lens.iter().enumerate() {
            let start = frame_start(end, len, true);
            if start > end {
                parts.push(Part::Padding(start - end));
            }
            parts.push(Part::Frame(i));
            end = start + len as usize;
        }
        parts
    }

    /// Seals every frame (checksum or block digests) from its stored bytes (`frames`: one per
    /// frame), for layouts that are not written by `write_contiguous` (which hashes in the same
    /// pass as its copy); several frames totalling `PARALLEL_FRAMES` bytes hash side by side.
    pub fn seal_frames(&mut self, frames: &[&[u8]]) {
        assert_eq!(frames.len(), self.seals.len(), "one source per frame");
        let seals = &self.seals;
        let total: usize = frames.iter().map(|f| f.len()).sum();
        let sealed: Vec<Sealed> = if frames.len() > 1 && total >= PARALLEL_FRAMES {
            crate::parallel::run(|| {
                seals
                    .par_iter()
                    .zip(frames.par_iter())
                    .map(|(seal, frame)| seal.compute(frame))
                    .collect()
            })
        } else {
            seals
                .iter()
                .zip(frames)
                .map(|(seal, frame)| seal.compute(frame))
                .collect()
        };
        for (i, sealed) in sealed.into_iter().enumerate() {
            self.seals[i].fill(&mut self.prefix, sealed);
        }
    }
}
