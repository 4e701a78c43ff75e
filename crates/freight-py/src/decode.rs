//! The decoder: checks the envelope, resolves tags, refuses what it must refuse before running
//! anything, then rebuilds the object graph from the node tree.
//!
//! Arrays come back as views of the input when the input allows it (read-only arrays, or a
//! writable input such as a bytearray) and as copies otherwise; `zero_copy` asks for read-only
//! views always. Frame checksums are verified when a frame is first used (fused with the copy
//! when there is one) and, at the end, for any frame no node used.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use freight_core::envelope::{self, Header, Limits};
use freight_core::{checksum, PickleDataRef, Reader, Tag};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyFrozenSet, PyList, PySet, PyString, PyTuple};

use crate::buffer::{frame_memoryview, maybe_detach, uninit_bytes, FrameBuffer, Owner, RawBuffer};
use crate::errors::{decode_error, wrap_decode, DeserializationError, UnsafePayloadError};
use crate::pickle_bridge::PickleSource;
use crate::types::std_types;

/// Deepest nesting the decoder follows (its stack grows on the heap as needed up to this).
pub const MAX_DEPTH: usize = 200_000;

pub struct Options {
    pub allow_pickle: bool,
    pub zero_copy: bool,
    pub verify: bool,
}

struct FrameSlot {
    owner: Arc<RawBuffer>,
    offset: usize,
    len: usize,
    checksum: Option<u64>,
    verified: Cell<bool>,
}

impl FrameSlot {
    fn bytes(&self) -> &[u8] {
        &self.owner.as_slice()[self.offset..self.offset + self.len]
    }
}

/// Everything a decode needs, owned, so that the pickle bridge can hold it while pickle runs.
pub struct DecodeCtx {
    frames: Vec<FrameSlot>,
    tree_owner: Arc<RawBuffer>,
    tree_offset: usize,
    tree_len: usize,
    entries: Vec<Py<PyAny>>,
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
        return Err(UnsafePayloadError::new_err(
            "the payload needs pickle to load (it holds objects freight encodes with pickle, or a serializer \
             marked unsafe), and allow_pickle=False refuses that; load it with allow_pickle=True only if you \
             trust its source",
        ));
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
        let header = envelope::parse_header(buf, &Limits::default()).map_err(decode_error)?;
        let entries = check_allowed(py, &header, registry, &opts)?;
        let ranges = envelope::locate_frames(&header, buf).map_err(decode_error)?;
        let frames = ranges
            .into_iter()
            .zip(&header.frames)
            .map(|(range, info)| FrameSlot {
                owner: input.clone(),
                offset: range.start,
                len: range.len(),
                checksum: info.checksum,
                verified: Cell::new(false),
            })
            .collect();
        let tree_offset = header.tree.as_ptr() as usize - buf.as_ptr() as usize;
        Ok(Self {
            frames,
            tree_offset,
            tree_len: header.tree.len(),
            entries,
            producer: producer(&header),
            opts,
            tree_owner: input,
        })
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
        let header = envelope::parse_header(buf, &Limits::default()).map_err(decode_error)?;
        if header.len != buf.len() {
            return Err(DeserializationError::new_err(format!(
                "the first frame must be exactly the header ({} bytes) but holds {} bytes",
                header.len,
                buf.len()
            )));
        }
        if parts.len() != header.frames.len() + 1 {
            return Err(DeserializationError::new_err(format!(
                "the header lists {} frames but {} buffers follow it",
                header.frames.len(),
                parts.len() - 1
            )));
        }
        let entries = check_allowed(py, &header, registry, &opts)?;
        let mut frames = Vec::with_capacity(header.frames.len());
        for (i, info) in header.frames.iter().enumerate() {
            let owner = Arc::new(export_input(&parts.get_item(i + 1)?)?);
            if owner.len() as u64 != info.stored_len {
                return Err(DeserializationError::new_err(format!(
                    "frame {i} holds {} bytes but the header says {}",
                    owner.len(),
                    info.stored_len
                )));
            }
            let len = owner.len();
            frames.push(FrameSlot {
                owner,
                offset: 0,
                len,
                checksum: info.checksum,
                verified: Cell::new(false),
            });
        }
        let tree_offset = header.tree.as_ptr() as usize - buf.as_ptr() as usize;
        Ok(Self {
            frames,
            tree_offset,
            tree_len: header.tree.len(),
            entries,
            producer: producer(&header),
            opts,
            tree_owner: head,
        })
    }

    pub fn tree(&self) -> &[u8] {
        &self.tree_owner.as_slice()[self.tree_offset..self.tree_offset + self.tree_len]
    }

    fn slot(&self, index: u32) -> PyResult<&FrameSlot> {
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
                let computed = maybe_detach(py, data.len(), || checksum::hash(data));
                if computed != stored {
                    return Err(decode_error(freight_core::Error::Checksum {
                        what: format!("frame {index}"),
                        stored,
                        computed,
                    }));
                }
            }
        }
        slot.verified.set(true);
        Ok(())
    }

    /// The verified bytes of a frame.
    pub fn frame_bytes(&self, py: Python<'_>, index: u32) -> PyResult<&[u8]> {
        let slot = self.slot(index)?;
        self.verify_slot(py, index, slot)?;
        Ok(slot.bytes())
    }

    /// Whether a view of this frame may be writable.
    fn writable(&self, slot: &FrameSlot) -> bool {
        !self.opts.zero_copy && !slot.owner.readonly()
    }

    /// A memoryview of a frame (verified), writable when the input is and zero_copy is off.
    pub fn frame_view<'py>(
        &self,
        py: Python<'py>,
        index: u32,
        want_writable: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let slot = self.slot(index)?;
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

    /// Copies a frame into `dst`, verifying its checksum on the way (one pass over the bytes).
    fn copy_frame(&self, py: Python<'_>, index: u32, dst: &mut [u8]) -> PyResult<()> {
        let slot = self.slot(index)?;
        let src = slot.bytes();
        let check = self.opts.verify && !slot.verified.get() && slot.checksum.is_some();
        let computed = maybe_detach(py, src.len(), || {
            if check {
                Some(checksum::copy_and_hash(dst, src))
            } else {
                checksum::copy_parallel(dst, src);
                None
            }
        });
        if let (Some(computed), Some(stored)) = (computed, slot.checksum) {
            if computed != stored {
                return Err(decode_error(freight_core::Error::Checksum {
                    what: format!("frame {index}"),
                    stored,
                    computed,
                }));
            }
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

/// Decodes one tree (the payload's, or a pickle external's) with its own memo.
pub struct TreeDecoder<'c, 'py> {
    py: Python<'py>,
    ctx: &'c Rc<DecodeCtx>,
    memo: Vec<Option<Bound<'py, PyAny>>>,
    depth: usize,
}

fn corrupt(msg: impl Into<String>) -> PyErr {
    DeserializationError::new_err(format!("corrupt freight payload: {}", msg.into()))
}

impl<'c, 'py> TreeDecoder<'c, 'py> {
    pub fn new(py: Python<'py>, ctx: &'c Rc<DecodeCtx>) -> Self {
        Self {
            py,
            ctx,
            memo: Vec::new(),
            depth: 0,
        }
    }

    /// Decodes a whole tree: exactly one root node and nothing after it.
    pub fn root(&mut self, tree: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        let mut r = Reader::new(tree);
        let obj = self.node(&mut r, None)?;
        r.expect_end("root node").map_err(decode_error)?;
        Ok(obj)
    }

    #[inline]
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PyResult<T>) -> PyResult<T> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(decode_error(freight_core::Error::TooDeep {
                limit: MAX_DEPTH,
            }));
        }
        let out = stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || f(self));
        self.depth -= 1;
        out
    }

    fn fill(&mut self, slot: Option<usize>, obj: &Bound<'py, PyAny>) {
        if let Some(slot) = slot {
            self.memo[slot] = Some(obj.clone());
        }
    }

    fn utf8(&self, data: &[u8], errors: &std::ffi::CStr) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: PyUnicode_DecodeUTF8 validates the bytes and returns a new reference or NULL.
        unsafe {
            Bound::from_owned_ptr_or_err(
                self.py,
                ffi::PyUnicode_DecodeUTF8(
                    data.as_ptr().cast(),
                    data.len() as ffi::Py_ssize_t,
                    errors.as_ptr(),
                ),
            )
        }
        .map_err(|e| wrap_decode(self.py, e, "a string"))
    }

    pub fn node(&mut self, r: &mut Reader<'_>, slot: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let tag = r.tag().map_err(decode_error)?;
        let obj: Bound<'py, PyAny> = match tag {
            Tag::None_ => py.None().into_bound(py),
            Tag::True => pyo3::types::PyBool::new(py, true).to_owned().into_any(),
            Tag::False => pyo3::types::PyBool::new(py, false).to_owned().into_any(),
            Tag::Int => {
                let v = r.ivarint("an int").map_err(decode_error)?;
                // SAFETY: returns a new reference.
                unsafe { Bound::from_owned_ptr(py, ffi::PyLong_FromLongLong(v)) }
            }
            Tag::Float => {
                let v = r.f64_le("a float").map_err(decode_error)?;
                unsafe { Bound::from_owned_ptr(py, ffi::PyFloat_FromDouble(v)) }
            }
            Tag::Str => {
                let data = r.byte_string("a str").map_err(decode_error)?;
                self.utf8(data, c"strict")?
            }
            Tag::Memo => {
                let slot = self.memo.len();
                let next = r.clone().tag().map_err(decode_error)?;
                if !next.memoizable() {
                    return Err(corrupt(format!(
                        "memo marker before a {} node",
                        next.name()
                    )));
                }
                self.memo.push(None);
                let obj = self.node(r, Some(slot))?;
                self.memo[slot] = Some(obj.clone());
                return Ok(obj);
            }
            Tag::Ref => {
                let index = r.uvarint("a memo slot").map_err(decode_error)? as usize;
                match self.memo.get(index) {
                    Some(Some(obj)) => obj.clone(),
                    _ => {
                        return Err(corrupt(format!(
                            "reference to memo slot {index}, which is not filled"
                        )))
                    }
                }
            }
            Tag::List => {
                let n = r.count(1, "a list").map_err(decode_error)?;
                self.nested(|this| this.list(r, n, slot))?
            }
            Tag::Dict => {
                let n = r.count(2, "a dict").map_err(decode_error)?;
                self.nested(|this| this.dict(r, n, slot))?
            }
            Tag::Tuple => {
                let n = r.count(1, "a tuple").map_err(decode_error)?;
                self.nested(|this| this.tuple(r, n))?
            }
            _ => return self.node_other(r, tag, slot),
        };
        Ok(obj)
    }

    fn list(
        &mut self,
        r: &mut Reader<'_>,
        n: usize,
        slot: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        if slot.is_none() {
            // Nobody can see this list before it is complete: fill it in place.
            // SAFETY: PyList_New(n) has n NULL slots; each is set exactly once below, and on an
            // early error the list is dropped (list dealloc tolerates NULL slots).
            let list =
                unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(n as ffi::Py_ssize_t))? };
            for i in 0..n {
                let item = self.node(r, None)?;
                unsafe {
                    ffi::PyList_SET_ITEM(list.as_ptr(), i as ffi::Py_ssize_t, item.into_ptr())
                };
            }
            return Ok(list);
        }
        // Memoized: children may refer to it, so it must be a valid list at every moment.
        let list = PyList::empty(py);
        self.fill(slot, list.as_any());
        for _ in 0..n {
            let item = self.node(r, None)?;
            list.append(item)?;
        }
        Ok(list.into_any())
    }

    fn tuple(&mut self, r: &mut Reader<'_>, n: usize) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        // SAFETY: as for lists; a tuple is only visible once complete.
        let tuple =
            unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyTuple_New(n as ffi::Py_ssize_t))? };
        for i in 0..n {
            let item = self.node(r, None)?;
            unsafe { ffi::PyTuple_SET_ITEM(tuple.as_ptr(), i as ffi::Py_ssize_t, item.into_ptr()) };
        }
        Ok(tuple)
    }

    fn dict(
        &mut self,
        r: &mut Reader<'_>,
        n: usize,
        slot: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let dict = PyDict::new(self.py);
        self.fill(slot, dict.as_any());
        for _ in 0..n {
            let key = self.node(r, None)?;
            let value = self.node(r, None)?;
            // SAFETY: dict, key and value are live; SetItem does not steal references.
            if unsafe { ffi::PyDict_SetItem(dict.as_ptr(), key.as_ptr(), value.as_ptr()) } != 0 {
                return Err(wrap_decode(self.py, PyErr::fetch(self.py), "a dict key"));
            }
        }
        Ok(dict.into_any())
    }

    #[inline(never)]
    fn node_other(
        &mut self,
        r: &mut Reader<'_>,
        tag: Tag,
        slot: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let e = decode_error;
        let obj = match tag {
            Tag::BigInt => {
                let data = r.byte_string("an int").map_err(e)?;
                let int_type = py.get_type::<pyo3::types::PyInt>();
                let kwargs = PyDict::new(py);
                kwargs.set_item("signed", true)?;
                int_type.call_method(
                    "from_bytes",
                    (PyBytes::new(py, data), "little"),
                    Some(&kwargs),
                )?
            }
            Tag::Complex => {
                let re = r.f64_le("a complex").map_err(e)?;
                let im = r.f64_le("a complex").map_err(e)?;
                unsafe { Bound::from_owned_ptr(py, ffi::PyComplex_FromDoubles(re, im)) }
            }
            Tag::StrSurrogates => {
                let data = r.byte_string("a str").map_err(e)?;
                self.utf8(data, c"surrogatepass")?
            }
            Tag::Bytes => PyBytes::new(py, r.byte_string("bytes").map_err(e)?).into_any(),
            Tag::ByteArray => {
                PyByteArray::new(py, r.byte_string("a bytearray").map_err(e)?).into_any()
            }
            Tag::FrameBytes => {
                let index = r.index("a frame index").map_err(e)?;
                let ctx = self.ctx.clone();
                let src_len = ctx.slot(index)?.len;
                let (bytes, dst) = uninit_bytes(py, src_len)?;
                ctx.copy_frame(py, index, dst)?;
                bytes.into_any()
            }
            Tag::FrameByteArray => {
                let index = r.index("a frame index").map_err(e)?;
                let data = self.ctx.frame_bytes(py, index)?;
                PyByteArray::new(py, data).into_any()
            }
            Tag::FrameStr => {
                let index = r.index("a frame index").map_err(e)?;
                let ctx = self.ctx.clone();
                let data = ctx.frame_bytes(py, index)?;
                self.utf8(data, c"surrogatepass")?
            }
            Tag::Set => {
                let n = r.count(1, "a set").map_err(e)?;
                let set = PySet::empty(py)?;
                self.fill(slot, set.as_any());
                self.nested(|this| {
                    for _ in 0..n {
                        let item = this.node(r, None)?;
                        set.add(item)
                            .map_err(|err| wrap_decode(py, err, "a set item"))?;
                    }
                    Ok(())
                })?;
                set.into_any()
            }
            Tag::FrozenSet => {
                let n = r.count(1, "a frozenset").map_err(e)?;
                let items = self.nested(|this| {
                    (0..n)
                        .map(|_| this.node(r, None))
                        .collect::<PyResult<Vec<_>>>()
                })?;
                PyFrozenSet::new(py, items.iter())
                    .map_err(|err| wrap_decode(py, err, "a frozenset item"))?
                    .into_any()
            }
            Tag::DateTime => {
                let f = r.datetime().map_err(e)?;
                let tz = self.tz(r)?;
                let std = std_types(py)?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("tzinfo", tz)?;
                kwargs.set_item("fold", f.fold)?;
                std.datetime
                    .bind(py)
                    .call(
                        (
                            f.year,
                            f.month,
                            f.day,
                            f.hour,
                            f.minute,
                            f.second,
                            f.microsecond,
                        ),
                        Some(&kwargs),
                    )
                    .map_err(|err| wrap_decode(py, err, "a datetime"))?
            }
            Tag::Date => {
                let f = r.date().map_err(e)?;
                std_types(py)?
                    .date
                    .bind(py)
                    .call1((f.year, f.month, f.day))
                    .map_err(|err| wrap_decode(py, err, "a date"))?
            }
            Tag::Time => {
                let f = r.time().map_err(e)?;
                let tz = self.tz(r)?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("tzinfo", tz)?;
                kwargs.set_item("fold", f.fold)?;
                std_types(py)?
                    .time
                    .bind(py)
                    .call((f.hour, f.minute, f.second, f.microsecond), Some(&kwargs))
                    .map_err(|err| wrap_decode(py, err, "a time"))?
            }
            Tag::TimeDelta => {
                let (days, seconds, micros) = r.timedelta().map_err(e)?;
                std_types(py)?
                    .timedelta
                    .bind(py)
                    .call1((days, seconds, micros))
                    .map_err(|err| wrap_decode(py, err, "a timedelta"))?
            }
            Tag::Decimal => {
                let text = r.byte_string("a Decimal").map_err(e)?;
                let text =
                    std::str::from_utf8(text).map_err(|_| corrupt("a Decimal is not ASCII"))?;
                std_types(py)?
                    .decimal
                    .bind(py)
                    .call1((text,))
                    .map_err(|err| wrap_decode(py, err, "a Decimal"))?
            }
            Tag::Uuid => {
                let (bytes, safe) = r.uuid().map_err(e)?;
                let std = std_types(py)?;
                let safe = std
                    .safe_uuid
                    .bind(py)
                    .call1((if safe == 1 { None } else { Some(safe) },))
                    .map_err(|err| wrap_decode(py, err, "a UUID"))?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("bytes", PyBytes::new(py, &bytes))?;
                kwargs.set_item("is_safe", safe)?;
                std.uuid.bind(py).call((), Some(&kwargs))?
            }
            Tag::Path => {
                let (flavour, text) = r.path().map_err(e)?;
                let text = self.utf8(text, c"surrogatepass")?;
                std_types(py)?.paths[flavour as usize]
                    .bind(py)
                    .call1((text,))
                    .map_err(|err| wrap_decode(py, err, "a path"))?
            }
            Tag::NdArray => self.nested(|this| this.ndarray(r))?,
            Tag::Ext => self.nested(|this| this.ext(r))?,
            Tag::Pickle => self.nested(|this| this.pickle(r))?,
            Tag::TzNone | Tag::TzUtc | Tag::TzFixed | Tag::TzZoneInfo => {
                return Err(corrupt(format!(
                    "a {} node outside a datetime or time",
                    tag.name()
                )))
            }
            Tag::None_
            | Tag::True
            | Tag::False
            | Tag::Int
            | Tag::Float
            | Tag::Str
            | Tag::Memo
            | Tag::Ref
            | Tag::List
            | Tag::Dict
            | Tag::Tuple => {
                unreachable!("handled in node()")
            }
        };
        Ok(obj)
    }

    fn tz(&mut self, r: &mut Reader<'_>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = self.py;
        let std = std_types(py)?;
        let tag = r.tag().map_err(decode_error)?;
        Ok(match tag {
            Tag::TzNone => None,
            Tag::TzUtc => Some(std.utc.bind(py).clone()),
            Tag::TzFixed => {
                let (offset_us, name) = r.tz_fixed().map_err(decode_error)?;
                let delta = std
                    .timedelta
                    .bind(py)
                    .call1((0, 0, offset_us))
                    .map_err(|err| wrap_decode(py, err, "a tz offset"))?;
                let tz = match name {
                    Some(name) => std
                        .timezone
                        .bind(py)
                        .call1((delta, self.utf8(name, c"surrogatepass")?)),
                    None => std.timezone.bind(py).call1((delta,)),
                };
                Some(tz.map_err(|err| wrap_decode(py, err, "a timezone"))?)
            }
            Tag::TzZoneInfo => {
                let key = r.byte_string("a zoneinfo key").map_err(decode_error)?;
                let key =
                    std::str::from_utf8(key).map_err(|_| corrupt("a zoneinfo key is not UTF-8"))?;
                let zoneinfo = std.zoneinfo.as_ref().ok_or_else(|| {
                    crate::errors::MissingDependencyError::new_err(
                        "the payload holds a zoneinfo timezone but zoneinfo is unavailable",
                    )
                })?;
                Some(
                    zoneinfo
                        .bind(py)
                        .call1((key,))
                        .map_err(|err| wrap_decode(py, err, "a zoneinfo timezone"))?,
                )
            }
            other => {
                return Err(corrupt(format!(
                    "a {} node where a tzinfo belongs",
                    other.name()
                )))
            }
        })
    }

    fn ndarray(&mut self, r: &mut Reader<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let wire = self.node(r, None)?;
        let (flags, shape, frame) = r.ndarray_tail().map_err(decode_error)?;
        let spec = crate::numpy::array_spec(py, &wire, flags, &shape)
            .map_err(|err| wrap_decode(py, err, "a numpy dtype"))?;
        let ctx = self.ctx.clone();
        let slot = ctx.slot(frame)?;
        if spec.nbytes != slot.len as u64 {
            return Err(corrupt(format!(
                "an array of shape {shape:?} needs {} bytes but its frame {frame} holds {}",
                spec.nbytes, slot.len
            )));
        }
        let view_ok = ctx.opts.zero_copy || !spec.writeable || ctx.writable(slot);
        if view_ok {
            let writeable = spec.writeable && ctx.writable(slot);
            let buffer = ctx.frame_view(py, frame, writeable)?;
            return crate::numpy::view(py, &spec, &buffer, writeable)
                .map_err(|err| wrap_decode(py, err, "a numpy array"));
        }
        let arr =
            crate::numpy::empty(py, &spec).map_err(|err| wrap_decode(py, err, "a numpy array"))?;
        let dst = RawBuffer::get(&arr, ffi::PyBUF_WRITABLE | ffi::PyBUF_ANY_CONTIGUOUS)?;
        // SAFETY: a fresh array nobody else references; the export is writable and contiguous.
        ctx.copy_frame(py, frame, unsafe { dst.as_mut_slice() })?;
        drop(dst);
        Ok(arr)
    }

    fn ext(&mut self, r: &mut Reader<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let tag_index = r.index("a tag index").map_err(decode_error)? as usize;
        let ctx = self.ctx.clone();
        let entry = ctx
            .entries
            .get(tag_index)
            .ok_or_else(|| {
                corrupt(format!(
                    "a node uses tag {tag_index} but the payload lists {}",
                    ctx.entries.len()
                ))
            })?
            .bind(py)
            .clone();
        let meta = self.node(r, None)?;
        let frames = r.frame_list().map_err(decode_error)?;
        let views = PyList::empty(py);
        for index in frames {
            views.append(ctx.frame_view(py, index, true)?)?;
        }
        entry
            .call_method1(pyo3::intern!(py, "decode"), (meta, views))
            .map_err(|err| {
                let tag = entry
                    .getattr("tag")
                    .map(|t| t.to_string())
                    .unwrap_or_default();
                wrap_decode(py, err, &format!("an object with serializer {tag:?}"))
            })
    }

    fn pickle(&mut self, r: &mut Reader<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let ctx = self.ctx.clone();
        if !ctx.opts.allow_pickle {
            return Err(UnsafePayloadError::new_err(
                "the payload holds a pickle node, and allow_pickle=False refuses to run pickle; load it with \
                 allow_pickle=True only if you trust its source",
            ));
        }
        let node = r.pickle().map_err(decode_error)?;
        let data = match node.data {
            PickleDataRef::Inline(bytes) => PyBytes::new(py, bytes).into_any(),
            PickleDataRef::Frame(index) => ctx.frame_view(py, index, false)?,
        };
        let buffers = PyList::empty(py);
        for index in &node.buffers {
            let view = ctx.frame_view(py, *index, true)?;
            let writable_wanted = !ctx.opts.zero_copy;
            let readonly: bool = view.getattr(pyo3::intern!(py, "readonly"))?.extract()?;
            if writable_wanted && readonly {
                // Out-of-band buffers become the memory of the objects pickle rebuilds (arrays of
                // ndarray subclasses, ...): give them writable memory, as pickle would.
                buffers.append(PyByteArray::from(&view)?)?;
            } else {
                buffers.append(view)?;
            }
        }
        let tree = ctx.tree();
        let base = tree.as_ptr() as usize;
        let externals = node
            .externals
            .iter()
            .map(|ext| (ext.as_ptr() as usize - base, ext.len()))
            .collect();
        let source = Bound::new(py, PickleSource::new(ctx.clone(), externals))?;
        let module = crate::types::pickle_bridge(py)?;
        let out = module.getattr(pyo3::intern!(py, "load"))?.call1((
            data,
            buffers,
            &source,
            ctx.producer.as_deref(),
        ));
        source.borrow().close();
        out
    }
}

/// Decodes a pickle external: a subtree with its own memo (called back from pickle).
pub fn decode_external<'py>(
    py: Python<'py>,
    ctx: &Rc<DecodeCtx>,
    offset: usize,
    len: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let tree = ctx.tree();
    let data = tree
        .get(offset..offset + len)
        .ok_or_else(|| corrupt("a pickle external lies outside the tree"))?;
    let mut decoder = TreeDecoder::new(py, ctx);
    decoder.root(data)
}

/// Decodes a payload.
pub fn decode<'py>(py: Python<'py>, ctx: DecodeCtx) -> PyResult<Bound<'py, PyAny>> {
    let ctx = Rc::new(ctx);
    let obj = {
        let mut decoder = TreeDecoder::new(py, &ctx);
        decoder.root(ctx.tree())?
    };
    ctx.verify_rest(py)?;
    Ok(obj)
}

#[allow(dead_code)]
fn _assert_types(_: &PyString, _: &PyTuple, _: &RefCell<()>) {}
