//! `_freight._envelope` (built with the `testing` feature only): wraps a raw node tree and
//! frames in a valid envelope (checksums included), for tests and fuzzers that need payloads
//! the encoder would never write, to check that the decoder refuses them cleanly.

use freight_core::envelope::{EnvelopeSpec, EnvelopeWriter};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffer::RawBuffer;

#[pyfunction]
#[pyo3(signature = (tree, frames=Vec::new(), tags=Vec::new(), needs_pickle=false, versions=Vec::new()))]
pub fn _envelope<'py>(
    py: Python<'py>,
    tree: &[u8],
    frames: Vec<Bound<'py, PyAny>>,
    tags: Vec<String>,
    needs_pickle: bool,
    versions: Vec<(String, String)>,
) -> PyResult<Bound<'py, PyBytes>> {
    let buffers = frames
        .iter()
        .map(RawBuffer::simple)
        .collect::<PyResult<Vec<_>>>()?;
    let slices: Vec<&[u8]> = buffers.iter().map(RawBuffer::as_slice).collect();
    let spec = EnvelopeSpec {
        needs_pickle,
        tags: tags.iter().map(String::as_str).collect(),
        versions: versions
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect(),
        frames: slices
            .iter()
            .map(|f| freight_core::FrameLayout::raw(f.len() as u64))
            .collect(),
        checksums: true,
        signed: false,
        tree,
    };
    let mut writer = EnvelopeWriter::new(&spec);
    let mut out = vec![0u8; writer.total_len()];
    writer.write_contiguous(&mut out, &slices, None);
    Ok(PyBytes::new(py, &out))
}

/// `_freight._huge_pages_ready(len)`: whether a decode copying `len` bytes would keep huge pages
/// now (freight_core::memory), for the test that reads the kernel's account of the mapping.
#[pyfunction]
pub fn _huge_pages_ready(len: usize) -> bool {
    freight_core::memory::huge_pages_ready(len)
}
