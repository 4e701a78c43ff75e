//! The decoder: checks the envelope, resolves tags, refuses what it must refuse before running
//! anything, then rebuilds the object graph from the node tree.
//!
//! Arrays come back as views of the input when the input allows it (read-only arrays, or a
//! writable input such as a bytearray) and as copies otherwise; `zero_copy` asks for read-only
//! views always. Frame checksums are verified when a frame is first used (fused with the copy
//! when there is one) and, at the end, for any frame no node used.

use std::rc::Rc;

use freight_core::{PickleDataRef, Reader, Tag};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyFrozenSet, PyList, PySet};

use crate::buffer::{uninit_bytes, RawBuffer};
use crate::errors::{decode_error, wrap_decode, DeserializationError, UnsafePayloadError};
pub use crate::payload::{export_input, DecodeCtx, Options};
use crate::pickle_bridge::PickleSource;

use crate::limits::{MAX_DEPTH, MAX_HASHABLE_DEPTH, RED_ZONE, STACK_SEGMENT};

/// The memo of one decode: slot -> object. Shared by the pickle externals of one payload.
pub type Memo = Vec<Option<Py<PyAny>>>;

/// Decodes one tree (the payload's, or a pickle external's).
pub struct TreeDecoder<'c, 'py> {
    pub(crate) py: Python<'py>,
    ctx: &'c Rc<DecodeCtx>,
    memo: Memo,
    /// Items decoded for lists and tuples under construction: a container is built only once
    /// all its items exist, so no half-built one is ever visible to Python code.
    scratch: Vec<Bound<'py, PyAny>>,
    /// Bytes promised to the items of the containers being decoded: each new count is checked
    /// against what remains after those promises, so nested counts cannot add up to more
    /// preallocation than the input justifies.
    pending: usize,
    depth: usize,
    hashable_depth: usize,
}

#[cold]
fn unfilled_slot(index: u64) -> PyErr {
    corrupt(format!(
        "reference to memo slot {index}, which is not filled"
    ))
}

pub(crate) fn corrupt(msg: impl Into<String>) -> PyErr {
    DeserializationError::new_err(format!("corrupt freight payload: {}", msg.into()))
}

impl<'c, 'py> TreeDecoder<'c, 'py> {
    pub fn new(py: Python<'py>, ctx: &'c Rc<DecodeCtx>) -> Self {
        Self::with_memo(py, ctx, Memo::new())
    }

    /// A decoder continuing an existing memo (the pickle externals of one payload share one).
    pub fn with_memo(py: Python<'py>, ctx: &'c Rc<DecodeCtx>, memo: Memo) -> Self {
        Self {
            py,
            ctx,
            memo,
            scratch: Vec::new(),
            pending: 0,
            depth: 0,
            hashable_depth: 0,
        }
    }

    pub fn into_memo(self) -> Memo {
        self.memo
    }

    /// Decodes a whole tree: exactly one root node and nothing after it.
    pub fn root(&mut self, tree: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        let mut r = Reader::new(tree);
        let obj = self.node(&mut r, None)?;
        r.expect_end("root node").map_err(decode_error)?;
        Ok(obj)
    }

    #[inline]
    pub(crate) fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PyResult<T>) -> PyResult<T> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(decode_error(freight_core::Error::TooDeep {
                limit: MAX_DEPTH,
            }));
        }
        let out = stacker::maybe_grow(RED_ZONE, STACK_SEGMENT, || f(self));
        self.depth -= 1;
        out
    }

    /// Reads a container's item count and promises `min` bytes per item (see `pending`).
    fn count(&mut self, r: &mut Reader<'_>, min: usize, what: &'static str) -> PyResult<usize> {
        let n = r.count(min, what).map_err(decode_error)?;
        let need = n * min; // no overflow: count() bounds n * min by the input's length
        if self.pending + need > r.remaining() {
            return Err(corrupt(format!(
                "{what} declares {n} items but the enclosing containers leave only {} bytes for them",
                r.remaining().saturating_sub(self.pending)
            )));
        }
        self.pending += need;
        Ok(n)
    }

    /// Decodes the next item of a container, releasing the byte promised for it.
    #[inline]
    fn item(&mut self, r: &mut Reader<'_>) -> PyResult<Bound<'py, PyAny>> {
        self.pending = self.pending.saturating_sub(1);
        self.node(r, None)
    }

    fn fill(&mut self, slot: Option<usize>, obj: &Bound<'py, PyAny>) {
        if let Some(slot) = slot {
            self.memo[slot] = Some(obj.clone().unbind());
        }
    }

    fn enter_hashable(&mut self) -> PyResult<()> {
        self.hashable_depth += 1;
        if self.hashable_depth > MAX_HASHABLE_DEPTH {
            return Err(corrupt(format!(
                "tuples or frozensets nest deeper than {MAX_HASHABLE_DEPTH} levels"
            )));
        }
        Ok(())
    }

    pub(crate) fn utf8(&self, data: &[u8], errors: &std::ffi::CStr) -> PyResult<Bound<'py, PyAny>> {
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

    /// Decodes one node. The scalars that fill containers are handled right here, in a small
    /// function, so that a container's loop pays no big call per item; the rest is `node_slow`.
    #[inline]
    pub fn node(&mut self, r: &mut Reader<'_>, slot: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let tag = r.tag().map_err(decode_error)?;
        // SAFETY (all arms): the C constructors return a new reference or NULL with an error set;
        // Py_None/Py_True/Py_False are borrowed and turned into new references.
        unsafe {
            match tag {
                Tag::None_ => Ok(Bound::from_borrowed_ptr(py, ffi::Py_None())),
                Tag::True => Ok(Bound::from_borrowed_ptr(py, ffi::Py_True())),
                Tag::False => Ok(Bound::from_borrowed_ptr(py, ffi::Py_False())),
                Tag::Int => {
                    let v = r.ivarint("an int").map_err(decode_error)?;
                    Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromLongLong(v))
                }
                Tag::Float => {
                    let v = r.f64_le("a float").map_err(decode_error)?;
                    Bound::from_owned_ptr_or_err(py, ffi::PyFloat_FromDouble(v))
                }
                Tag::Ref => {
                    let index = r.uvarint("a memo slot").map_err(decode_error)?;
                    match self.memo.get(index as usize) {
                        Some(Some(obj)) => Ok(obj.bind(py).clone()),
                        _ => Err(unfilled_slot(index)),
                    }
                }
                Tag::Str => {
                    let data = r.byte_string("a str").map_err(decode_error)?;
                    self.utf8(data, c"strict")
                }
                _ => self.node_slow(r, tag, slot),
            }
        }
    }

    #[inline(never)]
    fn node_slow(
        &mut self,
        r: &mut Reader<'_>,
        tag: Tag,
        slot: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match tag {
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
                self.memo[slot] = Some(obj.clone().unbind());
                Ok(obj)
            }
            Tag::List => {
                let n = self.count(r, 1, "a list")?;
                self.nested(|this| this.list(r, n, slot))
            }
            Tag::Dict => {
                let n = self.count(r, 2, "a dict")?;
                self.nested(|this| this.dict(r, n, slot))
            }
            Tag::Tuple => {
                let n = self.count(r, 1, "a tuple")?;
                self.enter_hashable()?;
                let tuple = self.nested(|this| this.tuple(r, n));
                self.hashable_depth -= 1;
                tuple
            }
            _ => self.node_other(r, tag, slot),
        }
    }

    /// Decodes `n` items onto the scratch stack.
    fn items(&mut self, r: &mut Reader<'_>, n: usize) -> PyResult<usize> {
        let base = self.scratch.len();
        for _ in 0..n {
            let item = self.item(r)?;
            self.scratch.push(item);
        }
        Ok(base)
    }

    fn list(
        &mut self,
        r: &mut Reader<'_>,
        n: usize,
        slot: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        if slot.is_none() {
            // Nobody can refer to this list: decode its items first, then build it with no
            // Python code running in between (a half-built list would hold NULL slots).
            let base = self.items(r, n)?;
            // SAFETY: PyList_New(n) has n NULL slots and each is set exactly once, right away.
            let list =
                unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(n as ffi::Py_ssize_t))? };
            for (i, item) in self.scratch.drain(base..).enumerate() {
                unsafe {
                    ffi::PyList_SET_ITEM(list.as_ptr(), i as ffi::Py_ssize_t, item.into_ptr())
                };
            }
            return Ok(list);
        }
        // Memoized: children may refer to it, and a registered deserializer may look at it (or
        // change it), so it must be a valid list at every moment: n Nones, then replaced.
        // SAFETY: every slot holds a reference to None before the list is visible.
        let list = unsafe {
            let ptr = ffi::PyList_New(n as ffi::Py_ssize_t);
            if !ptr.is_null() {
                for i in 0..n {
                    ffi::PyList_SET_ITEM(ptr, i as ffi::Py_ssize_t, ffi::Py_NewRef(ffi::Py_None()));
                }
            }
            Bound::from_owned_ptr_or_err(py, ptr)?
        };
        self.fill(slot, &list);
        for i in 0..n {
            let item = self.item(r)?;
            // SAFETY: PyList_SetItem checks the index against the list's current size (user
            // code may have shrunk it), steals `item` and drops what it replaces.
            if unsafe { ffi::PyList_GET_SIZE(list.as_ptr()) } as usize != n
                || unsafe {
                    ffi::PyList_SetItem(list.as_ptr(), i as ffi::Py_ssize_t, item.into_ptr())
                } != 0
            {
                return Err(DeserializationError::new_err(
                    "a list changed size while it was being decoded (a registered deserializer modified it)",
                ));
            }
        }
        Ok(list)
    }

    fn tuple(&mut self, r: &mut Reader<'_>, n: usize) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let base = self.items(r, n)?;
        // SAFETY: as for lists; the tuple is filled right after it is created.
        let tuple =
            unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyTuple_New(n as ffi::Py_ssize_t))? };
        for (i, item) in self.scratch.drain(base..).enumerate() {
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
        // Larger dicts sized for their items up front: no resize while filling (a 10-key dict
        // would grow once). Up to 5 items fit a new dict's first table anyway; the size asked for
        // is capped, so that a payload's count cannot make a large table in advance.
        let dict = if n > 5 {
            let presize = n.min(1 << 16) as ffi::Py_ssize_t;
            // SAFETY: returns a new reference or NULL with an exception set.
            unsafe { Bound::from_owned_ptr_or_err(self.py, _PyDict_NewPresized(presize))? }
        } else {
            PyDict::new(self.py).into_any()
        };
        self.fill(slot, dict.as_any());
        for _ in 0..n {
            let key = self.item(r)?;
            let value = self.item(r)?;
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
                unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyComplex_FromDoubles(re, im))? }
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
                let src_len = ctx.peek(index)?.raw_len;
                // SAFETY: copy_frame fills all of it; on an error `bytes` is dropped unseen.
                let (bytes, dst) = unsafe { uninit_bytes(py, src_len)? };
                ctx.copy_frame(py, index, dst)?;
                bytes.into_any()
            }
            Tag::FrameByteArray => {
                let index = r.index("a frame index").map_err(e)?;
                let data = self.ctx.frame_raw(py, index)?;
                PyByteArray::new(py, &data).into_any()
            }
            Tag::FrameStr => {
                let index = r.index("a frame index").map_err(e)?;
                let ctx = self.ctx.clone();
                let data = ctx.frame_raw(py, index)?;
                self.utf8(&data, c"surrogatepass")?
            }
            Tag::Set => {
                let n = self.count(r, 1, "a set")?;
                let set = PySet::empty(py)?;
                self.fill(slot, set.as_any());
                self.nested(|this| {
                    for _ in 0..n {
                        let item = this.item(r)?;
                        set.add(item)
                            .map_err(|err| wrap_decode(py, err, "a set item"))?;
                    }
                    Ok(())
                })?;
                set.into_any()
            }
            Tag::FrozenSet => {
                let n = self.count(r, 1, "a frozenset")?;
                self.enter_hashable()?;
                let base = self.nested(|this| this.items(r, n));
                self.hashable_depth -= 1;
                let base = base?;
                let set = PyFrozenSet::new(py, self.scratch[base..].iter())
                    .map_err(|err| wrap_decode(py, err, "a frozenset item"))?;
                self.scratch.truncate(base);
                set.into_any()
            }
            Tag::DateTime
            | Tag::Date
            | Tag::Time
            | Tag::TimeDelta
            | Tag::Decimal
            | Tag::Uuid
            | Tag::Path => self.stdlib_node(r, tag)?,
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
            | Tag::Tuple => unreachable!("handled in node() and node_slow()"),
        };
        Ok(obj)
    }

    fn ndarray(&mut self, r: &mut Reader<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let wire = self.node(r, None)?;
        let (flags, shape, frame) = r.ndarray_tail().map_err(decode_error)?;
        let spec = crate::numpy::array_spec(py, &wire, flags, &shape)
            .map_err(|err| wrap_decode(py, err, "a numpy dtype"))?;
        let ctx = self.ctx.clone();
        let slot = ctx.peek(frame)?;
        if spec.nbytes != slot.raw_len as u64 {
            return Err(corrupt(format!(
                "an array of shape {shape:?} needs {} bytes but its frame {frame} holds {}",
                spec.nbytes, slot.raw_len
            )));
        }
        // A compressed frame can only be decompressed into a fresh array.
        let view_ok =
            !slot.compressed() && (ctx.opts.zero_copy || !spec.writeable || ctx.writable(slot));
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
        let externals: Vec<(usize, usize)> = externals;
        let module = crate::types::pickle_bridge(py)?;
        let load = module.getattr(pyo3::intern!(py, "load"))?;
        if externals.is_empty() {
            // Nothing to hand back to freight: plain pickle.loads, no source to set up.
            return load.call1((data, buffers, py.None(), ctx.producer.as_deref()));
        }
        let source = Bound::new(py, PickleSource::new(ctx.clone(), externals))?;
        let out = load.call1((data, buffers, &source, ctx.producer.as_deref()));
        source.borrow().close();
        out
    }
}

/// Decodes a pickle external (called back from pickle), continuing the externals' shared memo;
/// returns the memo for the next external whatever happened.
pub fn decode_external<'py>(
    py: Python<'py>,
    ctx: &Rc<DecodeCtx>,
    offset: usize,
    len: usize,
    memo: Memo,
) -> (PyResult<Bound<'py, PyAny>>, Memo) {
    let tree = ctx.tree();
    let Some(data) = tree.get(offset..offset + len) else {
        return (
            Err(corrupt("a pickle external lies outside the tree")),
            memo,
        );
    };
    let mut decoder = TreeDecoder::with_memo(py, ctx, memo);
    let obj = decoder.root(data);
    (obj, decoder.into_memo())
}

unsafe extern "C" {
    // CPython's presized dict constructor: in its headers (3.8-3.14), not in pyo3-ffi.
    fn _PyDict_NewPresized(minused: ffi::Py_ssize_t) -> *mut ffi::PyObject;
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
