//! `inspect` and `verify`: what a payload holds and whether it is intact, read through
//! freight-core's `Payload::open` (the same checks `loads` makes) and a Python-free walk of its
//! tree, without decoding (and so without running) anything. `describe` is the one description
//! of a payload's header: `inspect` and `NativeStore.info` (which reads only a stored value's
//! header) both build theirs with it, so the same keys mean the same things.

use freight_core::bits::{codec, flags};
use freight_core::envelope::{self, Limits};
use freight_core::walk::walk_tree;
use freight_core::{FrameInfo, Header, OpenOptions, Parts, Payload};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::buffer::RawBuffer;
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

/// What is known of one frame beyond its table entry: where it starts in the payload (None
/// for a `dumps_frames` list, or when only the header was read) and whether its bytes match
/// its checksum (None without a checksum, or when the frame was not read).
#[derive(Clone, Copy, Default)]
pub struct FrameFacts {
    pub offset: Option<usize>,
    pub checksum_ok: Option<bool>,
}

fn frame_entry<'py>(
    py: Python<'py>,
    index: usize,
    info: &FrameInfo,
    facts: FrameFacts,
) -> Result<Bound<'py, PyDict>> {
    let entry = PyDict::new(py);
    entry.set_item("index", index)?;
    entry.set_item("offset", facts.offset)?;
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
    entry.set_item("checksum_ok", facts.checksum_ok)?;
    // Block digests (format 1.2): their kind and block size, for lazy reads of a part.
    let digests = info.digests.map(|d| {
        let kind = match d.scheme.kind {
            freight_core::digest::kind::SHA256 => "sha256",
            _ => "xxh3",
        };
        (kind, d.scheme.block())
    });
    entry.set_item("digests", digests)?;
    Ok(entry)
}

fn tree_entry<'py>(py: Python<'py>, header: &Header, tree: &[u8]) -> Result<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    match walk_tree(tree, header.frames.len() as u32, header.tags.len() as u32) {
        Ok(summary) => {
            out.set_item("ok", true)?;
            out.set_item("nodes", summary.nodes)?;
            out.set_item("max_depth", summary.max_depth)?;
            out.set_item("pickle_nodes", summary.pickle_nodes)?;
            let tags = PyDict::new(py);
            for (name, count) in &summary.tags {
                tags.set_item(name, count)?;
            }
            out.set_item("node_tags", tags)?;
        }
        Err(err) => {
            out.set_item("ok", false)?;
            out.set_item("error", err.to_string())?;
        }
    }
    out.set_item("length", tree.len())?;
    Ok(out)
}

/// The description of a payload from its header and tree (`PayloadInfo` in the stubs, less
/// `signature_ok`): `facts` holds, per frame, what the caller learnt from the frames' bytes.
pub fn describe<'py>(
    py: Python<'py>,
    header: &Header,
    tree: &[u8],
    total_length: u64,
    facts: &[FrameFacts],
) -> Result<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("format_version", header.version)?;
    out.set_item("flags", flags::names(header.flags))?;
    out.set_item("needs_pickle", header.needs_pickle())?;
    out.set_item("signed", header.signed())?;
    out.set_item("header_length", header.len)?;
    out.set_item("total_length", total_length)?;
    out.set_item("tags", PyList::new(py, &header.tags)?)?;
    let versions = PyDict::new(py);
    for (name, version) in &header.versions {
        versions.set_item(name, version)?;
    }
    out.set_item("producer", versions)?;
    let list = PyList::empty(py);
    for (i, info) in header.frames.iter().enumerate() {
        let known = facts.get(i).copied().unwrap_or_default();
        list.append(frame_entry(py, i, info, known)?)?;
    }
    out.set_item("frames", list)?;
    out.set_item("tree", tree_entry(py, header, tree)?)?;
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
    let facts: Vec<FrameFacts> = payload
        .frames()
        .iter()
        .map(|frame| FrameFacts {
            offset: payload.is_single().then(|| frame.range().start),
            checksum_ok: py.detach(|| frame.checksum_ok()),
        })
        .collect();
    let out = describe(
        py,
        payload.header(),
        payload.tree(),
        payload.total_len() as u64,
        &facts,
    )?;
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

/// How many frames of a contiguous payload are compressed, read from its header alone (no frame
/// is read and no frame checksum computed, so a mapped file stays unread): None when the header
/// cannot be read (not a payload, truncated: `loads` says why). `freight.load(mmap=True)` and
/// `Store.load(mmap=True)` warn with it that compressed frames cannot be mapped.
#[pyfunction]
pub fn compressed_frames(data: &Bound<'_, PyAny>) -> Option<usize> {
    let buf = RawBuffer::simple(data).ok()?;
    let header = envelope::parse_header(buf.as_slice(), &Limits::default()).ok()?;
    Some(
        header
            .frames
            .iter()
            .filter(|frame| frame.codec != codec::NONE)
            .count(),
    )
}
