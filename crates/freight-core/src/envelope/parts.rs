//! The contiguous layout as parts, for writers that stream it (a store writes them from the
//! objects' own memory and never assembles the payload), and the frame checksums such writers
//! set themselves: the same bytes `EnvelopeWriter::write_contiguous` writes in one buffer.

use super::{frame_start, EnvelopeWriter, ALIGN};
use crate::checksum;

/// A part of the contiguous layout (see `EnvelopeWriter::parts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Header,
    /// This many zero bytes (at most `ALIGN`: take them from `ZEROS`).
    Padding(usize),
    Frame(usize),
    Signature,
}

/// Zero bytes for the padding before a frame.
pub static ZEROS: [u8; ALIGN] = [0; ALIGN];

impl EnvelopeWriter<'_> {
    /// The contiguous layout as the sequence of its parts, for writers that stream it (a store
    /// writes the parts from the objects' own memory, never assembling the payload): the header,
    /// each frame after its zero padding (`ZEROS[..n]`), then the signature when signed (over
    /// every part before it: `sign::sign`). The same bytes `write_contiguous` writes.
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
        if self.signed {
            parts.push(Part::Signature);
        }
        parts
    }

    /// Sets every frame's checksum from its stored bytes (`frames`: one per frame), for layouts
    /// that are not written by `write_contiguous` (which checksums in the same pass as its copy).
    pub fn checksum_frames(&mut self, frames: &[&[u8]]) {
        for (i, frame) in frames.iter().enumerate() {
            if self.has_checksum(i) {
                let sum = checksum::frame_checksum(frame, self.block_checksum(i));
                self.set_frame_checksum(i, sum);
            }
        }
    }
}
