//! `inspect` and `verify`: what a payload holds and whether it is intact, read through
//! freight-core's `Payload::open` (the same checks `loads` makes) and a Python-free walk of its
//! tree, without decoding (and so without running) anything.

use freight_core::bits::{codec, flags};
use freight_core::envelope::Limits;
use freight_core::{OpenOptions, Parts, Payload};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::decode::input::{export_parts, open, Input};
use crate::errors::Result;

/// Opens a buffer or a list of buffers with the default limits, checking no signature.
fn open_any(py: Python<'_>, data: &Bound<'_, PyAny>) -> Result<Payload<Input>> {
    let parts: Parts<Input> = export_parts(data, true)?;
    let opts = OpenOptions {
        keys: &[],
        limits: Limits::default(),
        verify: true,
    };
    open(py, parts, &opts)
}

fn describe<'py>(py: Python<'py>, payload: &Payload<Input>) -> Result<Bound<'py, PyDict>> {
    let header = payload.header();
    let out = PyDict::new(py);
    out.set_item("format_version", header.version)?;
    out.set_item("flags", flags::names(header.flags))?;
    out.set_item("needs_pickle", header.needs_pickle())?;
    out.set_item("signed", header.signed())?;
    out.set_item("header_length", header.len)?;
    out.set_item("total_length", payload.total_len())?;
    out.set_item("tags", PyList::new(py, &header.tags)?)?;
    let versions = PyDict::new(py);
    for (name, version) in &header.versions {
        versions.set_item(name, version)?;
    }
    out.set_item("producer", versions)?;
    let list = PyList::empty(py);
    for (i, frame) in payload.frames().iter().enumerate() {
        let info = frame.info();
        let entry = PyDict::new(py);
        entry.set_item("index", i)?;
        entry.set_item("offset", payload.is_single().then(|| frame.range().start))?;
        entry.set_item("length", info.raw_len)?;
        entry.set_item("stored_length", info.stored_len)?;
        entry.set_item("codec", codec::name(info.codec))?;
        entry.set_item("shuffle", info.shuffle)?;
        let ratio = if info.raw_len == 0 {
            1.0
        } else {
            info.stored_len as f64 / info.raw_len as f64
        };
        entry.set_item("ratio", ratio)?;
        entry.set_item("block_checksum", info.block_checksum)?;
        entry.set_item("checksum", info.checksum.map(|c| format!("{c:016x}")))?;
        entry.set_item("checksum_ok", py.detach(|| frame.checksum_ok()))?;
        list.append(entry)?;
    }
    out.set_item("frames", list)?;
    let tree = PyDict::new(py);
    match payload.walk() {
        Ok(summary) => {
            tree.set_item("ok", true)?;
            tree.set_item("nodes", summary.nodes)?;
            tree.set_item("max_depth", summary.max_depth)?;
            tree.set_item("pickle_nodes", summary.pickle_nodes)?;
            let tags = PyDict::new(py);
            for (name, count) in &summary.tags {
                tags.set_item(name, count)?;
            }
            tree.set_item("node_tags", tags)?;
        }
        Err(err) => {
            tree.set_item("ok", false)?;
            tree.set_item("error", err.to_string())?;
        }
    }
    tree.set_item("length", payload.tree().len())?;
    out.set_item("tree", tree)?;
    Ok(out)
}

/// Describes a payload given as one buffer or as a list of buffers (`dumps_frames` output);
/// with a key, says whether the signature matches (`signature_ok`).
#[pyfunction]
#[pyo3(signature = (data, key=None))]
pub fn inspect<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    key: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let payload = open_any(py, data)?;
    let out = describe(py, &payload)?;
    let signature_ok = match key.filter(|k| !k.is_none()) {
        Some(key) => {
            let keys = crate::options::keys(key)?;
            Some(py.detach(|| payload.check_signature(&keys)).is_ok())
        }
        None => None,
    };
    out.set_item("signature_ok", signature_ok)?;
    Ok(out)
}

/// Checks everything that can be checked without decoding: the signature (given a key), the
/// header, the frame table and lengths, every frame checksum, every compressed frame's block
/// table and the tree's structure. Raises the error `loads` would raise for the first problem.
#[pyfunction]
#[pyo3(signature = (data, key=None))]
pub fn verify(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    key: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let keys = match key {
        Some(key) => crate::options::keys(key)?,
        None => Vec::new(),
    };
    let parts = export_parts(data, true)?;
    let opts = OpenOptions {
        keys: &keys,
        limits: Limits::default(),
        verify: true,
    };
    let payload = open(py, parts, &opts)?;
    py.detach(|| payload.verify())
        .map_err(crate::errors::Error::from)?;
    Ok(())
}
