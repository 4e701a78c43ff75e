//! `PayloadParts`: an object encoded once, in the `dumps` layout, as parts over the objects' own
//! memory (header with its signature when signed, zero padding, frames or their compressed bytes), for a writer that
//! streams them (`NativeStore.put_parts`). Which part goes where is freight-core's
//! (`EnvelopeWriter::parts`); nothing here computes an offset or reads a flag.

use freight_core::envelope::{Part, ZEROS};
use pyo3::prelude::*;

use crate::encode::compression::StoredFrame;
use crate::encode::Encoded;

/// Sendable (it may be freed by the garbage collector on any thread, e.g. when an exception of a
/// save in a worker thread keeps it alive): the buffer exports it holds are released with the
/// interpreter attached, whatever the thread (`RawBuffer`'s Drop).
#[pyclass(module = "freight._freight", frozen)]
pub struct PayloadParts {
    pub(crate) encoded: Encoded,
    pub(crate) stored: Vec<StoredFrame>,
    pub(crate) header: Vec<u8>,
    pub(crate) parts: Vec<Part>,
}

impl PayloadParts {
    /// The payload's bytes, in order, as slices of the memory that holds them.
    pub fn slices(&self) -> Vec<&[u8]> {
        let sources = self.encoded.frame_slices();
        self.parts
            .iter()
            .map(|part| match *part {
                Part::Header => self.header.as_slice(),
                Part::Padding(n) => &ZEROS[..n],
                Part::Frame(i) => self.stored[i].data.as_deref().unwrap_or(sources[i]),
            })
            .collect()
    }
}

#[pymethods]
impl PayloadParts {
    /// The payload's length in bytes (what `dumps` of the same object with the same options
    /// returns has this length).
    #[getter]
    fn nbytes(&self) -> usize {
        self.slices().iter().map(|s| s.len()).sum()
    }
}
