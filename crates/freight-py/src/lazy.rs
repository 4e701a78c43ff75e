//! The Rust half of lazy reads (`freight.lazy`): `LazyHeader` parses a stored payload's header
//! from its first bytes alone (the signature first, when keys are given), says where each frame
//! lies in the stored object, lists a container's entries with the frames and memo slots each
//! needs (freight-core's `walk::container_at`), and checks a part of a frame against its block
//! digests. Decoding an entry goes through the codec (`Codec._loads_node`), over a buffer that
//! holds the header and the entry's frames where they lie.

use freight_core::envelope::{self, frame_start, packed, Header, Limits};
use freight_core::walk::{self, NodeSpan};
use freight_core::{sign, Error as CoreError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::buffer::{frame_memoryview, maybe_detach, FrameBuffer, Owner};
use crate::errors::Result;
use crate::options;

/// Bytes the header of the payload starting with `prefix` takes (preamble, header, checksum and
/// signature when head-signed); None when `prefix` is too short to tell.
#[pyfunction]
pub fn header_length(prefix: &[u8]) -> PyResult<Option<usize>> {
    Ok(header_length_of(prefix)?)
}

fn header_length_of(prefix: &[u8]) -> Result<Option<usize>> {
    envelope::check_preamble(prefix)?;
    let Some(&flag_bits) = prefix.get(envelope::MAGIC.len() + 1) else {
        return Ok(None);
    };
    let mut r = freight_core::Reader::new(prefix);
    r.take(envelope::MAGIC.len() + 2, "the preamble")?;
    let Ok(body_len) = r.uvarint("the header length") else {
        return Ok(None);
    };
    let signature = if flag_bits & freight_core::bits::flags::HEAD_SIGNED != 0 {
        sign::SIGNATURE_LEN
    } else {
        0
    };
    Ok(Some(
        r.position() + body_len as usize + envelope::HEADER_CHECKSUM_LEN + signature,
    ))
}

/// A stored payload's header, read alone.
#[pyclass(module = "freight._freight", frozen)]
pub struct LazyHeader {
    head: Vec<u8>,
    header: Header,
    /// Where each frame's stored bytes lie in the stored object.
    frames: Vec<(u64, u64)>,
}

#[pymethods]
impl LazyHeader {
    /// `head`: the object's first `header_length` bytes (or more); `size`: the object's length;
    /// `keys`: the keys a signed payload is checked against before anything else is read.
    #[new]
    #[pyo3(signature = (head, size, keys=None))]
    fn new(head: &[u8], size: u64, keys: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let keys = match keys {
            Some(k) if !k.is_none() => options::keys(k)?,
            _ => Vec::new(),
        };
        Ok(Self::open(head, size, &keys)?)
    }

    /// (start, stop) of each frame's stored bytes in the object.
    #[getter]
    fn frames(&self) -> Vec<(u64, u64)> {
        self.frames.clone()
    }

    /// Length of the header (where the first frame's padding starts).
    #[getter]
    fn length(&self) -> usize {
        self.header.len
    }

    /// The header's bytes (the start of a buffer that decodes entries).
    #[getter]
    fn head<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.head[..self.header.len])
    }

    /// Length of the node tree (the root node's span is `0..tree_length`).
    #[getter]
    fn tree_length(&self) -> usize {
        self.header.tree.len()
    }

    #[getter]
    fn signed(&self) -> bool {
        self.header.signed()
    }

    #[getter]
    fn needs_pickle(&self) -> bool {
        self.header.needs_pickle()
    }

    /// The serializer tags the payload uses (Ext nodes refer to them by index).
    #[getter]
    fn tags(&self) -> Vec<String> {
        self.header.tags.clone()
    }

    /// Frame `index`'s table entry: codec, lengths, shuffle, digest block size (None without
    /// block digests).
    fn frame<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyDict>> {
        let info = self.header.frames.get(index).ok_or_else(|| {
            crate::errors::Error::from(CoreError::NoSuchFrame {
                index: index as u32,
                count: self.header.frames.len(),
            })
        })?;
        let d = PyDict::new(py);
        d.set_item("codec", info.codec)?;
        d.set_item("raw_length", info.raw_len)?;
        d.set_item("stored_length", info.stored_len)?;
        d.set_item("shuffle", info.shuffle)?;
        d.set_item("digest_block", info.digests.map(|x| x.scheme.block()))?;
        d.set_item("checksum", info.checksum.is_some())?;
        d.set_item("start", self.frames[index].0)?;
        Ok(d)
    }

    /// The tree offset and tag name of the root node (past any memo marker).
    fn root(&self) -> (usize, &'static str) {
        let tree = &self.head[self.header.tree.clone()];
        let at = walk::node_start(tree, 0);
        (at, tag_name(tree, at))
    }

    /// The entries of the dict, list or tuple at tree offset `at`: (tag name, [(key span or
    /// None, value span)], slot spans), each span (start, end, memo_base, frames, outside
    /// slots, node offset, node tag name, whether it holds pickler-session islands); None when the node there is another kind.
    fn container<'py>(&self, py: Python<'py>, at: usize) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let tree = &self.head[self.header.tree.clone()];
        let Some(found) = walk::container_at(
            tree,
            at,
            self.header.frames.len() as u32,
            self.header.tags.len() as u32,
        )
        .map_err(crate::errors::Error::from)?
        else {
            return Ok(None);
        };
        let entries = PyList::empty(py);
        for (key, value) in &found.entries {
            let key = match key {
                Some(k) => span(py, tree, k)?.into_any(),
                None => py.None().into_bound(py),
            };
            entries.append((key, span(py, tree, value)?))?;
        }
        let slots: Vec<(usize, usize)> = found.slots.iter().map(|r| (r.start, r.end)).collect();
        Ok(Some((found.tag.name(), entries, slots).into_pyobject(py)?))
    }

    /// The span of the node at `start..end` whose memo slots start at `memo_base` (a memo slot's
    /// node, from `container`'s slot spans), as `container` gives entries.
    fn span<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        end: usize,
        memo_base: u64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let tree = &self.head[self.header.tree.clone()];
        let s = walk::span_of(
            tree,
            start..end,
            memo_base,
            self.header.frames.len() as u32,
            self.header.tags.len() as u32,
        )
        .map_err(crate::errors::Error::from)?;
        span(py, tree, &s)
    }

    /// The NdArray node at tree offset `at` (memo slots before its dtype node: `memo_base`):
    /// (dtype node span, flags, shape, frame index).
    fn array<'py>(
        &self,
        py: Python<'py>,
        at: usize,
        memo_base: u64,
    ) -> PyResult<(Bound<'py, PyTuple>, u8, Vec<u64>, u32)> {
        let tree = &self.head[self.header.tree.clone()];
        let (dtype, flags, shape, frame) = walk::ndarray_at(
            tree,
            at,
            memo_base,
            self.header.frames.len() as u32,
            self.header.tags.len() as u32,
        )
        .map_err(crate::errors::Error::from)?;
        Ok((span(py, tree, &dtype)?, flags, shape, frame))
    }

    /// The Ext node (a registered serializer's value) at tree offset `at` (memo slots before
    /// its meta node: `memo_base`): (tag, meta node span, frame indices).
    fn ext<'py>(
        &self,
        py: Python<'py>,
        at: usize,
        memo_base: u64,
    ) -> PyResult<(String, Bound<'py, PyTuple>, Vec<u32>)> {
        let tree = &self.head[self.header.tree.clone()];
        let (tag, meta, frames) = walk::ext_at(
            tree,
            at,
            memo_base,
            self.header.frames.len() as u32,
            self.header.tags.len() as u32,
        )
        .map_err(crate::errors::Error::from)?;
        let tag = self
            .header
            .tags
            .get(tag as usize)
            .cloned()
            .unwrap_or_default();
        Ok((tag, span(py, tree, &meta)?, frames))
    }

    /// Checks `data`, frame `index`'s stored bytes from block `first` on, against its block
    /// digests (raises `IntegrityError` naming the block).
    fn check_blocks(&self, index: usize, first: usize, data: &[u8]) -> PyResult<()> {
        let info = self.header.frames.get(index).copied();
        let Some((info, range)) = info.and_then(|i| Some((i, i.digest_range()?))) else {
            return Err(crate::errors::Error::from(CoreError::corrupt(format!(
                "frame {index} has no block digests to check a part of it against"
            )))
            .into());
        };
        let scheme = info.digests.expect("a digest range has a scheme").scheme;
        scheme
            .check(data, first, &self.head[range])
            .map_err(|block| {
                crate::errors::Error::from(CoreError::Digest {
                    what: format!("block {block} of frame {index}"),
                    signed: scheme.kind == freight_core::digest::kind::SHA256,
                })
            })?;
        Ok(())
    }
}

impl LazyHeader {
    fn open(head: &[u8], size: u64, keys: &[Vec<u8>]) -> Result<Self> {
        let Some(len) = header_length_of(head)? else {
            return Err(CoreError::Truncated {
                what: "the header",
                offset: head.len(),
                needed: 1,
            }
            .into());
        };
        if head.len() < len {
            return Err(CoreError::Truncated {
                what: "the header",
                offset: head.len(),
                needed: len - head.len(),
            }
            .into());
        }
        let head = &head[..len];
        if !keys.is_empty() {
            if envelope::head_signature(head).is_none() {
                // Unsigned, or signed by a writer before format 1.2 (one signature over the
                // whole payload: no part of it can be checked alone).
                return Err(match head[envelope::MAGIC.len() + 1] & 0x08 {
                    0 => CoreError::Unsigned,
                    _ => CoreError::corrupt(
                        "this payload was signed before format 1.2: its signature covers the \
                         whole payload, so no part of it can be authenticated alone; load it \
                         whole (freight.load / Store.load), or save it again to read it lazily",
                    ),
                }
                .into());
            }
            freight_core::payload::check_head_signature(head, keys)?;
        }
        let header = envelope::parse_header(head, &Limits::default())?;
        let mut frames = Vec::with_capacity(header.frames.len());
        let mut end = header.len as u64;
        for info in &header.frames {
            let start = frame_start(end as usize, info.stored_len, packed(header.flags)) as u64;
            end = start + info.stored_len;
            frames.push((start, end));
        }
        let trailer = if header.has_trailer() {
            sign::SIGNATURE_LEN as u64
        } else {
            0
        };
        if end + trailer != size {
            return Err(CoreError::corrupt(format!(
                "the header describes {} bytes but the stored object holds {size}: it is \
                 truncated or not one freight payload",
                end + trailer
            ))
            .into());
        }
        Ok(Self {
            head: head.to_vec(),
            header,
            frames,
        })
    }
}

fn tag_name(tree: &[u8], at: usize) -> &'static str {
    tree.get(at)
        .and_then(|&b| freight_core::tags::Tag::from_u8(b))
        .map_or("unknown", |t| t.name())
}

fn span<'py>(py: Python<'py>, tree: &[u8], s: &NodeSpan) -> PyResult<Bound<'py, PyTuple>> {
    let at = walk::node_start(tree, s.range.start);
    (
        s.range.start,
        s.range.end,
        s.memo_base,
        s.frames.clone(),
        s.outside.clone(),
        at,
        tag_name(tree, at),
        s.session,
    )
        .into_pyobject(py)
}

/// Decompresses `stored`, a compressed frame's layout (block size, block count, block lengths,
/// blocks) holding some of a frame's blocks, into `raw_len` bytes: a lazy read's slice of a
/// compressed frame decompresses only its blocks. Every size is checked as in a whole load.
#[pyfunction]
#[pyo3(signature = (codec, stored, raw_len, shuffle=None))]
pub fn decompress_blocks<'py>(
    py: Python<'py>,
    codec: u8,
    stored: &[u8],
    raw_len: usize,
    shuffle: Option<usize>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut raw = vec![0u8; raw_len];
    freight_core::compress::decompress(codec, stored, shuffle, &mut raw)
        .map_err(crate::errors::Error::from)?;
    Ok(PyBytes::new(py, &raw))
}

/// The raw bytes of frames `indices` of the payload in `data` (its bytes where they lie: at
/// least the header and those frames), each checked against its checksum or digests (always
/// when `keys` are given and the payload is head-signed; the header's signature is checked
/// first): a read-only view of `data` for an uncompressed frame (a mapped file is not copied),
/// new memory for a compressed one. The payload is opened once for all of them, and the
/// checks run on all cores: several frames side by side, or the 1 MiB blocks of one large
/// frame (a lazy read of one column of a table reads one frame of megabytes, which a whole
/// load would have verified beside the others on all cores).
#[pyfunction]
#[pyo3(signature = (data, indices, keys=None, verify=true))]
pub fn frames_raw<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    indices: Vec<u32>,
    keys: Option<&Bound<'py, PyAny>>,
    verify: bool,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let keys = match keys {
        Some(k) if !k.is_none() => options::keys(k)?,
        _ => Vec::new(),
    };
    let input = crate::decode::input::export_input(data)?;
    let open = |verify: bool| {
        let opts = freight_core::OpenOptions {
            keys: &keys,
            limits: Limits::default(),
            verify,
        };
        crate::decode::input::open(py, freight_core::Parts::Single(input.clone()), &opts)
    };
    // Unsigned frames are checked here, on all cores, then viewed from a payload opened
    // unverified (a signed payload's frames, and any other kind, go through the payload's own
    // verify-once rules).
    let mut payload = open(verify && !keys.is_empty())?;
    if verify && keys.is_empty() {
        let frames = payload.frames();
        let mut wanted = Vec::with_capacity(indices.len());
        for &index in &indices {
            wanted.push((
                index,
                frames.get(index).map_err(crate::errors::Error::from)?,
            ));
        }
        let total: usize = wanted.iter().map(|(_, f)| f.stored().len()).sum();
        let checked = maybe_detach(py, total, || crate::lazy_verify::check_frames(&wanted))
            .map_err(crate::errors::Error::from)?;
        if !checked {
            payload = open(true)?;
        }
    }
    let frames = payload.frames();
    let total: usize = indices
        .iter()
        .filter_map(|&i| frames.get(i).ok())
        .map(|f| f.stored().len())
        .sum();
    maybe_detach(py, total, || frames.verify_many(&indices)).map_err(crate::errors::Error::from)?;
    let mut out = Vec::with_capacity(indices.len());
    for &index in &indices {
        let frame = frames.get(index).map_err(crate::errors::Error::from)?;
        if frame.compressed() {
            let raw = maybe_detach(py, frame.raw_len(), || {
                frames.raw(index).map(|r| r.into_owned())
            })
            .map_err(crate::errors::Error::from)?;
            out.push(PyBytes::new(py, &raw).into_any());
            continue;
        }
        let frame = maybe_detach(py, frame.stored().len(), || frames.view(index))
            .map_err(crate::errors::Error::from)?;
        let stored = frame.stored();
        out.push(frame_memoryview(
            py,
            FrameBuffer::new(
                Owner::Buffer(frame.owner().0.clone()),
                stored.as_ptr(),
                stored.len(),
                true,
            ),
        )?);
    }
    Ok(out)
}
