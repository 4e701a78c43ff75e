//! A payload being decoded: the exported input buffer(s), the checked header, the resolved
//! serializer entries and the frames, with their checksums verified on first use.

use std::borrow::Cow;
use std::cell::Cell;
use std::sync::Arc;

use freight_core::envelope::{self, codec, FrameInfo, Header, Limits};
use freight_core::{checksum, compress, sign};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::buffer::{frame_memoryview, maybe_detach, FrameBuffer, Owner, RawBuffer};
use crate::errors::{decode_error, DeserializationError, UnsafePayloadError};

pub struct Options {
    pub allow_pickle: bool,
    pub zero_copy: bool,
    pub verify: bool,
    /// Keys a signature is checked against (any of them); empty: signatures are not required.
    pub keys: Vec<Vec<u8>>,
    /// Largest raw frame accepted (checked before anything is allocated for it).
    pub max_size: u64,
}

impl Options {
    fn limits(&self) -> Limits {
        Limits {
            max_frame: self.max_size,
            ..Limits::default()
        }
    }

    fn key_refs(&self) -> Vec<&[u8]> {
        self.keys.iter().map(Vec::as_slice).collect()
    }
}

pub(crate) struct FrameSlot {
    owner: Arc<RawBuffer>,
    offset: usize,
    /// Stored bytes.
    len: usize,
    /// Bytes once decompressed (= len for raw frames).
    pub(crate) raw_len: usize,
    codec: u8,
    shuffle: Option<u32>,
    checksum: Option<u64>,
    block_checksum: bool,
    verified: Cell<bool>,
    /// Set by the node that uses the frame: a second use is refused (writers never make one,
    /// and allowing it would let a small payload expand into many copies of one frame).
    used: Cell<bool>,
}

impl FrameSlot {
    fn new(owner: Arc<RawBuffer>, offset: usize, len: usize, info: &FrameInfo) -> Self {
        Self {
            owner,
            offset,
            len,
            raw_len: info.raw_len as usize,
            codec: info.codec,
            shuffle: info.shuffle,
            checksum: info.checksum,
            block_checksum: info.block_checksum,
            verified: Cell::new(false),
            used: Cell::new(false),
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.owner.as_slice()[self.offset..self.offset + self.len]
    }

    /// Whether the frame is compressed (so it can only be copied out, never viewed).
    pub(crate) fn compressed(&self) -> bool {
        self.codec != codec::NONE
    }
}

/// Everything a decode needs, owned, so that the pickle bridge can hold it while pickle runs.
pub struct DecodeCtx {
    pub(crate) frames: Vec<FrameSlot>,
    tree_owner: Arc<RawBuffer>,
    tree_offset: usize,
    tree_len: usize,
    pub(crate) entries: Vec<Py<PyAny>>,
    pub producer: Option<String>,
    pub opts: Options,
}

fn check_allowed(
    py: Python<'_>,
    header: &Header<'_>,
    registry: &Bound<'_, PyAny>,
    opts: &Options,
) -> PyResult<Vec<Py<PyAny>>> {
    if header.needs_pickle() && !opts.allow_pickle {
        // Name the unsafe serializer when that is the reason (lookups that fail are ignored here:
        // the payload is refused either way).
        let unsafe_tag = header.tags.iter().find(|tag| {
            registry
                .call_method1(pyo3::intern!(py, "by_tag"), (**tag,))
                .and_then(|entry| entry.getattr(pyo3::intern!(py, "safe"))?.extract::<bool>())
                .is_ok_and(|safe| !safe)
        });
        return Err(UnsafePayloadError::new_err(match unsafe_tag {
            Some(tag) => format!(
                "the payload uses serializer {tag:?}, which is marked unsafe (its decoding can run arbitrary \
                 code), and allow_pickle=False refuses that; load it with allow_pickle=True only if you trust \
                 its source, or register the serializer with safe=True if its decoding runs no such code"
            ),
            None => "the payload needs pickle to load (it holds objects freight encodes with pickle), and \
                     allow_pickle=False refuses that; load it with allow_pickle=True only if you trust its source"
                .to_owned(),
        }));
    }
    let mut entries = Vec::with_capacity(header.tags.len());
    for tag in &header.tags {
        let entry = registry.call_method1(pyo3::intern!(py, "by_tag"), (*tag,))?;
        if !opts.allow_pickle
            && !entry
                .getattr(pyo3::intern!(py, "safe"))?
                .extract::<bool>()?
        {
            return Err(UnsafePayloadError::new_err(format!(
                "the payload uses serializer {tag:?}, which is marked unsafe (its decoding can run arbitrary code), \
                 and allow_pickle=False refuses that"
            )));
        }
        entries.push(entry.unbind());
    }
    Ok(entries)
}

fn producer(header: &Header<'_>) -> Option<String> {
    if header.versions.is_empty() {
        return None;
    }
    Some(
        header
            .versions
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// Exports the input: `bytes` read-only (cheap), anything else writable when it can be.
pub fn export_input(obj: &Bound<'_, PyAny>) -> PyResult<RawBuffer> {
    let result = if obj.is_exact_instance_of::<PyBytes>() {
        RawBuffer::simple(obj)
    } else {
        RawBuffer::prefer_writable(obj)
    };
    result.map_err(|err| {
        let new =
            DeserializationError::new_err(format!(
            "freight can only load from a buffer (bytes, bytearray, memoryview, mmap, ...), not {}",
            obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ));
        new.set_cause(obj.py(), Some(err));
        new
    })
}

/// IntegrityError naming the frame unless the checksums agree.
fn same_checksum(index: u32, stored: u64, computed: u64) -> PyResult<()> {
    if computed == stored {
        return Ok(());
    }
    Err(decode_error(freight_core::Error::Checksum {
        what: format!("frame {index}"),
        stored,
        computed,
    }))
}

impl DecodeCtx {
    /// A payload in one buffer (`dumps` output).
    pub fn contiguous(
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        registry: &Bound<'_, PyAny>,
        opts: Options,
    ) -> PyResult<Self> {
        let input = Arc::new(export_input(data)?);
        let buf = input.as_slice();
        if !opts.keys.is_empty() {
            // Before reading anything else: a forged payload must not reach the parser.
            let keys = opts.key_refs();
            maybe_detach(py, buf.len(), || envelope::verify_signature(buf, &keys))
                .map_err(decode_error)?;
        }
        let header = envelope::parse_header(buf, &opts.limits()).map_err(decode_error)?;
        let entries = check_allowed(py, &header, registry, &opts)?;
        let ranges = envelope::locate_frames(&header, buf).map_err(decode_error)?;
        let frames = ranges
            .into_iter()
            .zip(&header.frames)
            .map(|(range, info)| FrameSlot::new(input.clone(), range.start, range.len(), info))
            .collect();
        let tree = Self::tree_range(&header, buf);
        let producer = producer(&header);
        // `input` moves in (no clone): each atomic reference-count change shows in small loads.
        Ok(Self::assemble(tree, producer, input, frames, entries, opts))
    }

    /// A payload as a list of buffers (`dumps_frames` output): header first, then each frame.
    pub fn from_frames(
        py: Python<'_>,
        parts: &Bound<'_, PyList>,
        registry: &Bound<'_, PyAny>,
        opts: Options,
    ) -> PyResult<Self> {
        if parts.is_empty() {
            return Err(DeserializationError::new_err(
                "loads_frames needs at least one buffer (the header)",
            ));
        }
        let head = Arc::new(export_input(&parts.get_item(0)?)?);
        let buf = head.as_slice();
        let mut owners = Vec::with_capacity(parts.len() - 1);
        for i in 1..parts.len() {
            owners.push(Arc::new(export_input(&parts.get_item(i)?)?));
        }
        if !opts.keys.is_empty() {
            // The signature is the last buffer, over all the others: check it before parsing.
            let Some((signature, frames)) = owners.split_last() else {
                return Err(decode_error(freight_core::Error::Unsigned));
            };
            let mut covered: Vec<&[u8]> = vec![buf];
            covered.extend(frames.iter().map(|f| f.as_slice()));
            let keys = opts.key_refs();
            let total: usize = covered.iter().map(|p| p.len()).sum();
            let valid = maybe_detach(py, total, || {
                sign::verify(&keys, &covered, signature.as_slice())
            });
            if !valid {
                let signed = buf.get(5).is_some_and(|f| f & envelope::flags::SIGNED != 0);
                return Err(decode_error(if signed {
                    freight_core::Error::BadSignature
                } else {
                    freight_core::Error::Unsigned
                }));
            }
        }
        let header = envelope::parse_header(buf, &opts.limits()).map_err(decode_error)?;
        if header.len != buf.len() {
            return Err(DeserializationError::new_err(format!(
                "the first frame must be exactly the header ({} bytes) but holds {} bytes",
                header.len,
                buf.len()
            )));
        }
        let signed = header.signed() as usize;
        if parts.len() != header.frames.len() + 1 + signed {
            return Err(DeserializationError::new_err(format!(
                "the header lists {} frames{} but {} buffers follow it",
                header.frames.len(),
                if signed == 1 { " and a signature" } else { "" },
                parts.len() - 1
            )));
        }
        if !opts.keys.is_empty() && signed == 0 {
            return Err(decode_error(freight_core::Error::Unsigned));
        }
        let entries = check_allowed(py, &header, registry, &opts)?;
        let mut frames = Vec::with_capacity(header.frames.len());
        for (i, (info, owner)) in header.frames.iter().zip(owners).enumerate() {
            if owner.len() as u64 != info.stored_len {
                return Err(DeserializationError::new_err(format!(
                    "frame {i} holds {} bytes but the header says {}",
                    owner.len(),
                    info.stored_len
                )));
            }
            let len = owner.len();
            frames.push(FrameSlot::new(owner, 0, len, info));
        }
        let tree = Self::tree_range(&header, buf);
        let producer = producer(&header);
        Ok(Self::assemble(tree, producer, head, frames, entries, opts))
    }

    /// Where the tree of a checked header lies in `buf`: (offset, length).
    fn tree_range(header: &Header<'_>, buf: &[u8]) -> (usize, usize) {
        (
            header.tree.as_ptr() as usize - buf.as_ptr() as usize,
            header.tree.len(),
        )
    }

    /// The context of a checked header whose tree lies at `tree` in `owner`.
    fn assemble(
        tree: (usize, usize),
        producer: Option<String>,
        owner: Arc<RawBuffer>,
        frames: Vec<FrameSlot>,
        entries: Vec<Py<PyAny>>,
        opts: Options,
    ) -> Self {
        Self {
            frames,
            tree_offset: tree.0,
            tree_len: tree.1,
            entries,
            producer,
            opts,
            tree_owner: owner,
        }
    }

    pub fn tree(&self) -> &[u8] {
        &self.tree_owner.as_slice()[self.tree_offset..self.tree_offset + self.tree_len]
    }

    /// Marks frame `index` as used by the calling node.
    fn claim(&self, index: u32) -> PyResult<&FrameSlot> {
        let slot = self.peek(index)?;
        if slot.used.replace(true) {
            return Err(DeserializationError::new_err(format!(
                "corrupt freight payload: frame {index} is used by more than one node"
            )));
        }
        Ok(slot)
    }

    /// Frame `index`, to look at (length, writability) before using it.
    pub(crate) fn peek(&self, index: u32) -> PyResult<&FrameSlot> {
        self.frames.get(index as usize).ok_or_else(|| {
            DeserializationError::new_err(format!(
                "corrupt freight payload: a node refers to frame {index} but the payload has {} frames",
                self.frames.len()
            ))
        })
    }

    fn verify_slot(&self, py: Python<'_>, index: u32, slot: &FrameSlot) -> PyResult<()> {
        if self.opts.verify && !slot.verified.get() {
            if let Some(stored) = slot.checksum {
                let data = slot.bytes();
                let block = slot.block_checksum;
                let computed =
                    maybe_detach(py, data.len(), || checksum::frame_checksum(data, block));
                same_checksum(index, stored, computed)?;
            }
        }
        slot.verified.set(true);
        Ok(())
    }

    /// The verified raw bytes of a frame: borrowed from the input, or decompressed.
    pub fn frame_raw(&self, py: Python<'_>, index: u32) -> PyResult<Cow<'_, [u8]>> {
        let slot = self.claim(index)?;
        self.verify_slot(py, index, slot)?;
        if !slot.compressed() {
            return Ok(Cow::Borrowed(slot.bytes()));
        }
        let mut raw = vec![0u8; slot.raw_len];
        self.decompress(py, slot, &mut raw)?;
        Ok(Cow::Owned(raw))
    }

    fn decompress(&self, py: Python<'_>, slot: &FrameSlot, dst: &mut [u8]) -> PyResult<()> {
        let (codec, stored, shuffle) = (slot.codec, slot.bytes(), slot.shuffle.map(|s| s as usize));
        maybe_detach(py, dst.len(), || {
            compress::decompress(codec, stored, shuffle, dst)
        })
        .map_err(decode_error)
    }

    /// Whether a view of this frame may be writable.
    pub(crate) fn writable(&self, slot: &FrameSlot) -> bool {
        !self.opts.zero_copy && !slot.owner.readonly()
    }

    /// A memoryview of a frame (verified), writable when the input is and zero_copy is off. A
    /// compressed frame is decompressed into a new (writable) bytearray.
    pub fn frame_view<'py>(
        &self,
        py: Python<'py>,
        index: u32,
        want_writable: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let slot = self.peek(index)?;
        if slot.compressed() {
            let out = pyo3::types::PyByteArray::new(py, &[]);
            out.resize(slot.raw_len)?;
            // SAFETY: a fresh bytearray nobody else references.
            self.copy_frame(py, index, unsafe { out.as_bytes_mut() })?;
            return crate::buffer::memoryview(out.as_any());
        }
        let slot = self.claim(index)?;
        self.verify_slot(py, index, slot)?;
        let writable = want_writable && self.writable(slot);
        let data = slot.bytes();
        frame_memoryview(
            py,
            FrameBuffer::new(
                Owner::Buffer(slot.owner.clone()),
                data.as_ptr(),
                data.len(),
                !writable,
            ),
        )
    }

    /// Copies (or decompresses) a frame into `dst` (exactly its raw length), verifying its
    /// checksum: in the same pass as the copy, or before decompressing.
    pub(crate) fn copy_frame(&self, py: Python<'_>, index: u32, dst: &mut [u8]) -> PyResult<()> {
        let slot = self.claim(index)?;
        if dst.len() != slot.raw_len {
            return Err(DeserializationError::new_err(
                "internal error: frame copied into a buffer of another size",
            ));
        }
        if slot.compressed() {
            self.verify_slot(py, index, slot)?;
            return self.decompress(py, slot, dst);
        }
        let src = slot.bytes();
        let check = self.opts.verify && !slot.verified.get() && slot.checksum.is_some();
        let block = slot.block_checksum;
        let computed = maybe_detach(py, src.len(), || {
            if check {
                Some(checksum::copy_and_checksum(dst, src, block))
            } else {
                checksum::copy_parallel(dst, src);
                None
            }
        });
        if let (Some(computed), Some(stored)) = (computed, slot.checksum) {
            same_checksum(index, stored, computed)?;
        }
        slot.verified.set(true);
        Ok(())
    }

    /// Verifies the frames no node used, so that a change anywhere in the payload is caught.
    pub fn verify_rest(&self, py: Python<'_>) -> PyResult<()> {
        for (i, slot) in self.frames.iter().enumerate() {
            self.verify_slot(py, i as u32, slot)?;
        }
        Ok(())
    }
}
