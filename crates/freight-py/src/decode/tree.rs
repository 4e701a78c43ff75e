//! The node tree, rebuilt into objects: scalars and containers here; stdlib scalars, arrays,
//! serializer nodes and pickle nodes in the sibling modules (`impl TreeDecoder` blocks).
//!
//! Arrays come back as views of the input when the input allows it (read-only arrays, or a
//! writable input such as a bytearray) and as copies otherwise; `zero_copy` asks for read-only
//! views always. Frame checksums are verified when a frame is first used (fused with the copy
//! when there is one) and, at the end, for any frame no node used.

use std::rc::Rc;

use freight_core::{Reader, Tag};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyFrozenSet, PySet};

use crate::buffer::uninit_bytes;
use crate::decode::input::DecodeCtx;
use crate::decode::keys;
use crate::errors::{Decoding, Error, Result};
use crate::limits::{with_stack, MAX_DEPTH, MAX_HASHABLE_DEPTH};

/// The memo of one decode: slot -> object. Shared by the pickle externals of one payload.
pub type Memo = Vec<Option<Py<PyAny>>>;

/// Decodes one tree (the payload's, or a pickle external's).
pub struct TreeDecoder<'c, 'py> {
    pub(crate) py: Python<'py>,
    /// None for a payload of builtins only (see `decode_builtins`): a node that needs frames,
    /// serializers or pickle is then corrupt.
    ctx: Option<&'c Rc<DecodeCtx>>,
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
    /// The unpickler of the payload's pickle islands (Pickle nodes of flavour 2), from the first.
    pub(crate) pickle_session: Option<Bound<'py, PyAny>>,
}

#[cold]
fn unfilled_slot(index: u64) -> Error {
    Error::corrupt(format!(
        "reference to memo slot {index}, which is not filled"
    ))
}

impl<'c, 'py> TreeDecoder<'c, 'py> {
    pub fn new(py: Python<'py>, ctx: &'c Rc<DecodeCtx>) -> Self {
        Self::with_memo(py, ctx, Memo::new())
    }

    /// A decoder continuing an existing memo (the pickle externals of one payload share one).
    pub fn with_memo(py: Python<'py>, ctx: &'c Rc<DecodeCtx>, memo: Memo) -> Self {
        Self {
            py,
            ctx: Some(ctx),
            memo,
            scratch: Vec::new(),
            pending: 0,
            depth: 0,
            hashable_depth: 0,
            pickle_session: None,
        }
    }

    /// A decoder for a payload whose header declares no frames, serializers, versions or pickle.
    pub fn builtins(py: Python<'py>) -> Self {
        Self {
            py,
            ctx: None,
            memo: Memo::new(),
            scratch: Vec::new(),
            pending: 0,
            depth: 0,
            hashable_depth: 0,
            pickle_session: None,
        }
    }

    /// The payload's context: frames, serializer entries, options.
    #[inline]
    pub(crate) fn ctx(&self) -> Result<&'c Rc<DecodeCtx>> {
        self.ctx.ok_or_else(|| {
            Error::corrupt(
                "a node refers to frames, serializers or pickle, which the header does not declare",
            )
        })
    }

    /// The object in memo slot `index`, if filled.
    pub(crate) fn memo_get(&self, index: usize) -> Option<&Py<PyAny>> {
        self.memo.get(index).and_then(Option::as_ref)
    }

    /// Fills the next memo slot (a node read outside `node`, after its `Memo` marker).
    pub(crate) fn memo_push(&mut self, obj: Py<PyAny>) {
        self.memo.push(Some(obj));
    }

    pub(crate) fn memo_len(&self) -> usize {
        self.memo.len()
    }

    pub fn into_memo(self) -> Memo {
        self.memo
    }

    /// Decodes a whole tree: exactly one root node and nothing after it.
    pub fn root(&mut self, tree: &[u8]) -> Result<Bound<'py, PyAny>> {
        let mut r = Reader::new(tree);
        let obj = self.node(&mut r, None)?;
        r.expect_end("root node")?;
        Ok(obj)
    }

    #[inline]
    pub(crate) fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(freight_core::Error::TooDeep { limit: MAX_DEPTH }.into());
        }
        let out = with_stack(|| f(self));
        self.depth -= 1;
        out
    }

    /// Reads a container's item count and promises `min` bytes per item (see `pending`).
    fn count(&mut self, r: &mut Reader<'_>, min: usize, what: &'static str) -> Result<usize> {
        let n = r.count(min, what)?;
        let need = n * min; // no overflow: count() bounds n * min by the input's length
        if self.pending + need > r.remaining() {
            return Err(Error::corrupt(format!(
                "{what} declares {n} items but the enclosing containers leave only {} bytes for them",
                r.remaining().saturating_sub(self.pending)
            )));
        }
        self.pending += need;
        Ok(n)
    }

    /// Decodes the next item of a container, releasing the byte promised for it.
    #[inline]
    fn item(&mut self, r: &mut Reader<'_>) -> Result<Bound<'py, PyAny>> {
        self.pending = self.pending.saturating_sub(1);
        self.node(r, None)
    }

    /// A dict key: a short ASCII str from the key cache (keys.rs), anything else as any item.
    #[inline]
    fn key(&mut self, r: &mut Reader<'_>) -> Result<Bound<'py, PyAny>> {
        if r.peek() == Some(Tag::Str as u8) {
            let mut ahead = r.clone();
            ahead.tag()?;
            if let Some(key) = ahead
                .byte_string("a str")
                .ok()
                .and_then(|data| keys::cached(self.py, data))
            {
                *r = ahead;
                self.pending = self.pending.saturating_sub(1);
                return Ok(key);
            }
        }
        self.item(r)
    }

    fn fill(&mut self, slot: Option<usize>, obj: &Bound<'py, PyAny>) {
        if let Some(slot) = slot {
            self.memo[slot] = Some(obj.clone().unbind());
        }
    }

    fn enter_hashable(&mut self) -> Result<()> {
        self.hashable_depth += 1;
        if self.hashable_depth > MAX_HASHABLE_DEPTH {
            return Err(Error::corrupt(format!(
                "tuples or frozensets nest deeper than {MAX_HASHABLE_DEPTH} levels"
            )));
        }
        Ok(())
    }

    pub(crate) fn utf8(&self, data: &[u8], errors: &std::ffi::CStr) -> Result<Bound<'py, PyAny>> {
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
        .decoding("a string")
    }

    /// Decodes one node. The scalars that fill containers are handled right here, in a small
    /// function, so that a container's loop pays no big call per item; the rest is `node_slow`.
    #[inline]
    pub fn node(&mut self, r: &mut Reader<'_>, slot: Option<usize>) -> Result<Bound<'py, PyAny>> {
        let py = self.py;
        let tag = r.tag()?;
        // SAFETY (all arms): the C constructors return a new reference or NULL with an error set;
        // Py_None/Py_True/Py_False are borrowed and turned into new references.
        unsafe {
            match tag {
                Tag::None_ => Ok(Bound::from_borrowed_ptr(py, ffi::Py_None())),
                Tag::True => Ok(Bound::from_borrowed_ptr(py, ffi::Py_True())),
                Tag::False => Ok(Bound::from_borrowed_ptr(py, ffi::Py_False())),
                Tag::Int => {
                    let v = r.ivarint("an int")?;
                    Ok(Bound::from_owned_ptr_or_err(
                        py,
                        ffi::PyLong_FromLongLong(v),
                    )?)
                }
                Tag::Float => {
                    let v = r.f64_le("a float")?;
                    Ok(Bound::from_owned_ptr_or_err(
                        py,
                        ffi::PyFloat_FromDouble(v),
                    )?)
                }
                Tag::Ref => {
                    let index = r.uvarint("a memo slot")?;
                    match self.memo.get(index as usize) {
                        Some(Some(obj)) => Ok(obj.bind(py).clone()),
                        _ => Err(unfilled_slot(index)),
                    }
                }
                Tag::Str => {
                    let data = r.byte_string("a str")?;
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
    ) -> Result<Bound<'py, PyAny>> {
        match tag {
            Tag::Memo => {
                let slot = self.memo.len();
                let next = r.clone().tag()?;
                if !next.memoizable() {
                    return Err(Error::corrupt(format!(
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
    fn items(&mut self, r: &mut Reader<'_>, n: usize) -> Result<usize> {
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
    ) -> Result<Bound<'py, PyAny>> {
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
                return Err(Error::decode(
                    "a list changed size while it was being decoded (a registered deserializer modified it)"
                        .to_owned(),
                ));
            }
        }
        Ok(list)
    }

    fn tuple(&mut self, r: &mut Reader<'_>, n: usize) -> Result<Bound<'py, PyAny>> {
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
    ) -> Result<Bound<'py, PyAny>> {
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
            let key = self.key(r)?;
            let value = self.item(r)?;
            // SAFETY: dict, key and value are live; SetItem does not steal references.
            if unsafe { ffi::PyDict_SetItem(dict.as_ptr(), key.as_ptr(), value.as_ptr()) } != 0 {
                return Err(PyErr::fetch(self.py)).decoding("a dict key");
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
    ) -> Result<Bound<'py, PyAny>> {
        let py = self.py;
        let obj = match tag {
            Tag::BigInt => {
                let data = r.byte_string("an int")?;
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
                let re = r.f64_le("a complex")?;
                let im = r.f64_le("a complex")?;
                unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyComplex_FromDoubles(re, im))? }
            }
            Tag::StrSurrogates => {
                let data = r.byte_string("a str")?;
                self.utf8(data, c"surrogatepass")?
            }
            Tag::Bytes => PyBytes::new(py, r.byte_string("bytes")?).into_any(),
            Tag::ByteArray => PyByteArray::new(py, r.byte_string("a bytearray")?).into_any(),
            Tag::FrameBytes => {
                let index = r.index("a frame index")?;
                let ctx = self.ctx()?.clone();
                let src_len = ctx.peek(index)?.raw_len();
                // SAFETY: copy_frame fills all of it; on an error `bytes` is dropped unseen.
                let (bytes, dst) = unsafe { uninit_bytes(py, src_len)? };
                ctx.copy_frame(py, index, dst)?;
                bytes.into_any()
            }
            Tag::FrameByteArray => {
                let index = r.index("a frame index")?;
                let data = self.ctx()?.frame_raw(py, index)?;
                PyByteArray::new(py, &data).into_any()
            }
            Tag::FrameStr => {
                let index = r.index("a frame index")?;
                let ctx = self.ctx()?.clone();
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
                        set.add(item).decoding("a set item")?;
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
                    .decoding("a frozenset item")?;
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
                return Err(Error::corrupt(format!(
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
}

unsafe extern "C" {
    // CPython's presized dict constructor: in its headers (3.8-3.14), not in pyo3-ffi.
    fn _PyDict_NewPresized(minused: ffi::Py_ssize_t) -> *mut ffi::PyObject;
}
