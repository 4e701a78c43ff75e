//! `inspect`: what a payload holds, read from its header and a Python-free walk of its tree,
//! without decoding (and so without running) anything.

use freight_core::envelope::{self, Header, Limits};
use freight_core::{checksum, walk};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::buffer::RawBuffer;
use crate::errors::decode_error;

fn describe<'py>(
    py: Python<'py>,
    header: &Header<'_>,
    frames: &[&[u8]],
    offsets: &[usize],
    total: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("format_version", header.version)?;
    out.set_item("needs_pickle", header.needs_pickle())?;
    out.set_item("signed", header.signed())?;
    out.set_item("header_length", header.len)?;
    out.set_item("total_length", total)?;
    out.set_item("tags", PyList::new(py, &header.tags)?)?;
    let versions = PyDict::new(py);
    for (name, version) in &header.versions {
        versions.set_item(name, version)?;
    }
    out.set_item("producer", versions)?;
    let list = PyList::empty(py);
    for (i, (info, data)) in header.frames.iter().zip(frames).enumerate() {
        let frame = PyDict::new(py);
        frame.set_item("index", i)?;
        frame.set_item("offset", offsets.get(i).copied())?;
        frame.set_item("length", info.raw_len)?;
        frame.set_item("stored_length", info.stored_len)?;
        frame.set_item("codec", freight_core::compress::Codec::name_of(info.codec))?;
        frame.set_item("shuffle", info.shuffle)?;
        frame.set_item(
            "ratio",
            if info.raw_len == 0 {
                1.0
            } else {
                info.stored_len as f64 / info.raw_len as f64
            },
        )?;
        frame.set_item("block_checksum", info.block_checksum)?;
        match info.checksum {
            Some(stored) => {
                let block = info.block_checksum;
                let ok = py.detach(|| checksum::frame_checksum(data, block)) == stored;
                frame.set_item("checksum", format!("{stored:016x}"))?;
                frame.set_item("checksum_ok", ok)?;
            }
            None => {
                frame.set_item("checksum", py.None())?;
                frame.set_item("checksum_ok", py.None())?;
            }
        }
        list.append(frame)?;
    }
    out.set_item("frames", list)?;
    let tree = PyDict::new(py);
    match walk::walk_tree(
        header.tree,
        header.frames.len() as u32,
        header.tags.len() as u32,
    ) {
        Ok(summary) => {
            tree.set_item("nodes", summary.nodes)?;
            tree.set_item("max_depth", summary.max_depth)?;
            tree.set_item("pickle_nodes", summary.pickle_nodes)?;
            let tags = PyDict::new(py);
            for (name, count) in &summary.tags {
                tags.set_item(name, count)?;
            }
            tree.set_item("node_tags", tags)?;
            tree.set_item("ok", true)?;
        }
        Err(err) => {
            tree.set_item("ok", false)?;
            tree.set_item("error", err.to_string())?;
        }
    }
    tree.set_item("length", header.tree.len())?;
    out.set_item("tree", tree)?;
    Ok(out)
}

/// Describes a payload given as one buffer.
#[pyfunction]
#[pyo3(signature = (data, key=None))]
pub fn inspect<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    key: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let input = crate::decode::export_input(data)?;
    let buf = input.as_slice();
    let header = envelope::parse_header(buf, &Limits::default()).map_err(decode_error)?;
    let ranges = envelope::locate_frames(&header, buf).map_err(decode_error)?;
    let frames: Vec<&[u8]> = ranges.iter().map(|r| &buf[r.clone()]).collect();
    let offsets: Vec<usize> = ranges.iter().map(|r| r.start).collect();
    let out = describe(py, &header, &frames, &offsets, buf.len())?;
    signature_status(py, &out, key, || {
        let keys = crate::options::keys(key.expect("checked"))?;
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        Ok(envelope::verify_signature(buf, &refs).is_ok())
    })?;
    Ok(out)
}

/// Adds "signature_ok" (None without a key) to an inspect result.
fn signature_status(
    py: Python<'_>,
    out: &Bound<'_, PyDict>,
    key: Option<&Bound<'_, PyAny>>,
    check: impl FnOnce() -> PyResult<bool>,
) -> PyResult<()> {
    match key {
        Some(_) => out.set_item("signature_ok", check()?),
        None => out.set_item("signature_ok", py.None()),
    }
}

/// Describes a payload given as a list of buffers (`dumps_frames` output).
#[pyfunction]
#[pyo3(signature = (parts, key=None))]
pub fn inspect_frames<'py>(
    py: Python<'py>,
    parts: &Bound<'py, PyList>,
    key: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    if parts.is_empty() {
        return Err(crate::errors::DeserializationError::new_err(
            "inspect needs at least the header buffer",
        ));
    }
    let head = crate::decode::export_input(&parts.get_item(0)?)?;
    let header =
        envelope::parse_header(head.as_slice(), &Limits::default()).map_err(decode_error)?;
    let mut owned: Vec<RawBuffer> = Vec::new();
    for i in 1..parts.len() {
        owned.push(crate::decode::export_input(&parts.get_item(i)?)?);
    }
    let signature = if header.signed() { owned.pop() } else { None };
    if owned.len() != header.frames.len() {
        return Err(crate::errors::DeserializationError::new_err(format!(
            "the header lists {} frames but {} buffers follow it",
            header.frames.len(),
            owned.len()
        )));
    }
    let frames: Vec<&[u8]> = owned.iter().map(RawBuffer::as_slice).collect();
    let total = head.len() + frames.iter().map(|f| f.len()).sum::<usize>();
    let out = describe(py, &header, &frames, &[], total)?;
    signature_status(py, &out, key, || {
        let keys = crate::options::keys(key.expect("checked"))?;
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let mut covered: Vec<&[u8]> = vec![head.as_slice()];
        covered.extend(&frames);
        Ok(signature
            .as_ref()
            .is_some_and(|s| freight_core::sign::verify(&refs, &covered, s.as_slice())))
    })?;
    Ok(out)
}
