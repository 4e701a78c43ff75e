//! The encode half of the pickle bridge (the Python half is python/freight/_pickle.py).
//!
//! `PickleSink` is the pickler's `reducer_override` (or `persistent_id`) and `buffer_callback`:
//! arrays, registered types and large bytes found anywhere in the graph become freight nodes
//! ("externals") and frames. The decode half is decode/pickle_source.rs.

use std::cell::RefCell;
use std::sync::Arc;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};

use crate::buffer::RawBuffer;
use crate::encode::dispatch::{is_pickle_atomic_type, DispatchRefs};
use crate::encode::state::{EncodeState, FrameSource};
use crate::encode::walker::{MemoState, Walker, FRAME_MIN};
use crate::errors::Result;
use crate::python_types::{function_type, ndarray_type};
use freight_core::ptrmap::PtrMap;
use freight_core::TreeWriter;

struct SinkInner {
    state: EncodeState,
    /// What the pickler wrote (as its file), when it is the island pickler.
    chunks: Vec<Py<PyBytes>>,
    /// The object an island pickles (its address): the walker already looked it up.
    root: usize,
    /// The externals' trees, one memo scope: finished together by `take`.
    externals: Vec<TreeWriter>,
    buffers: Vec<u32>,
    seen: PtrMap<(u32, Py<PyAny>)>,
    memo: MemoState,
    cloud: bool,
}

#[pyclass(module = "freight._freight", unsendable)]
pub struct PickleSink {
    dispatch: DispatchRefs,
    inner: RefCell<SinkInner>,
}

static NEEDS_CLOUDPICKLE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn needs_cloudpickle(py: Python<'_>, what: String) -> PyErr {
    match NEEDS_CLOUDPICKLE.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        Ok(crate::python_types::pickle_bridge(py)?
            .getattr("NeedsCloudpickle")?
            .cast_into::<PyType>()?
            .unbind())
    }) {
        Ok(cls) => PyErr::from_type(cls.bind(py).clone(), what),
        Err(err) => err,
    }
}

impl PickleSink {
    /// `ext_cache`: serializer results of the native attempt, reused rather than recomputed.
    pub fn new(
        dispatch: DispatchRefs,
        ext_cache: PtrMap<(Py<PyAny>, Py<PyAny>)>,
        cloud: bool,
    ) -> Self {
        Self {
            dispatch,
            inner: RefCell::new(SinkInner {
                state: EncodeState {
                    ext_cache,
                    ..Default::default()
                },
                chunks: Vec::new(),
                root: 0,
                externals: Vec::new(),
                buffers: Vec::new(),
                seen: PtrMap::default(),
                memo: MemoState::default(),
                cloud,
            }),
        }
    }

    /// What the pickling produced besides the pickle stream.
    pub fn take(&self) -> (EncodeState, Vec<Vec<u8>>, Vec<u32>, bool) {
        let mut inner = self.inner.borrow_mut();
        inner.seen.clear();
        (
            std::mem::take(&mut inner.state),
            freight_core::compact_memo(std::mem::take(&mut inner.externals)),
            std::mem::take(&mut inner.buffers),
            inner.cloud,
        )
    }
}

impl PickleSink {
    /// Whether this sink (an idle island pickler's, see islands.rs) can serve a payload encoded
    /// with `dispatch`: the same registry, and still no need of `persistent_id`.
    pub fn serves(&self, py: Python<'_>, dispatch: &DispatchRefs) -> PyResult<bool> {
        Ok(
            self.dispatch.registry(py).is(dispatch.registry(py))
                && !self.needs_persistent_id(py)?,
        )
    }
}

/// One island's pickling (see islands.rs): the payload's state back, with the island's parts.
pub struct IslandOut {
    pub state: EncodeState,
    pub chunks: Vec<Py<PyBytes>>,
    pub externals: Vec<Vec<u8>>,
    pub buffers: Vec<u32>,
    /// The objects inside the island's externals that the walker memoized (their roots aside:
    /// the pickler's memo holds those).
    pub external_keys: Vec<usize>,
}

impl PickleSink {
    /// Before an island is pickled: the payload's state, which the island's frames and tags
    /// join; externals and their memo start afresh (one memo scope per Pickle node).
    pub fn begin_island(&self, state: EncodeState, root: &Bound<'_, PyAny>) {
        let mut inner = self.inner.borrow_mut();
        inner.state = state;
        inner.root = root.as_ptr() as usize;
        inner.chunks.clear();
        inner.externals.clear();
        inner.buffers.clear();
        inner.seen.clear();
        inner.memo = MemoState::default();
    }

    pub fn end_island(&self) -> IslandOut {
        let mut inner = self.inner.borrow_mut();
        inner.root = 0;
        let roots = std::mem::take(&mut inner.seen);
        let memo = std::mem::take(&mut inner.memo);
        IslandOut {
            state: std::mem::take(&mut inner.state),
            chunks: std::mem::take(&mut inner.chunks),
            externals: freight_core::compact_memo(std::mem::take(&mut inner.externals)),
            buffers: std::mem::take(&mut inner.buffers),
            external_keys: memo
                .keys()
                .filter(|&key| !roots.contains_key(&key) && !is_str_or_bytes(key))
                .collect(),
        }
    }
}

/// Whether the object at `key` (an object memoized in an external's walk, kept alive by the
/// external or the walk's keep_alive) is a str or bytes: equal ones may be one object or two,
/// nothing depends on it, so `Walker::islands_alias` need not look for them (a dtype's name
/// inside an array's external would otherwise cost a scan of the pickler's memo).
fn is_str_or_bytes(key: usize) -> bool {
    // SAFETY: reading the type of a live object.
    let ty = unsafe { ffi::Py_TYPE(key as *mut ffi::PyObject) };
    ty == &raw mut ffi::PyUnicode_Type || ty == &raw mut ffi::PyBytes_Type
}

/// bytes or bytearray large enough to travel as a frame.
fn is_big_bytes(ptr: *mut ffi::PyObject) -> bool {
    // SAFETY: ptr is a live object; the size calls match its exact type.
    unsafe {
        let ty = ffi::Py_TYPE(ptr);
        (ty == &raw mut ffi::PyBytes_Type && ffi::PyBytes_Size(ptr) as usize >= FRAME_MIN)
            || (ty == &raw mut ffi::PyByteArray_Type
                && ffi::PyByteArray_Size(ptr) as usize >= FRAME_MIN)
    }
}

/// Plain pickle stores functions and classes by reference; that reference does not resolve on
/// the other side for lambdas, locals and anything defined in `__main__`.
pub fn by_reference_fails(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
) -> PyResult<Option<&'static str>> {
    let is_type = unsafe { ffi::PyType_Check(obj.as_ptr()) } != 0;
    if !is_type && !obj.get_type().is(function_type(py)) {
        return Ok(None);
    }
    let module = obj.getattr_opt(pyo3::intern!(py, "__module__"))?;
    if let Some(module) = module {
        if let Ok(module) = module.cast::<PyString>() {
            if module.to_str()? == "__main__" {
                return Ok(Some("it is defined in __main__"));
            }
        }
    }
    if let Some(qualname) = obj.getattr_opt(pyo3::intern!(py, "__qualname__"))? {
        if let Ok(qualname) = qualname.cast::<PyString>() {
            let q = qualname.to_str()?;
            if q.contains("<lambda>") || q.contains("<locals>") {
                return Ok(Some("it is a lambda or a local"));
            }
        }
    }
    Ok(None)
}

#[pymethods]
impl PickleSink {
    /// Called before each pickling attempt (plain pickle, then cloudpickle): starts afresh.
    fn begin(&self, cloud: bool) {
        let mut inner = self.inner.borrow_mut();
        let ext_cache = std::mem::take(&mut inner.state.ext_cache);
        inner.state = EncodeState {
            ext_cache,
            ..Default::default()
        };
        inner.externals.clear();
        inner.buffers.clear();
        inner.seen.clear();
        inner.memo = MemoState::default();
        inner.cloud = cloud;
    }

    /// Whether the pickler must use `persistent_id` (called for every object) rather than
    /// `reducer_override` (never called for ints, strs, lists, dicts, ...): only when a serializer
    /// is registered for one of those built-in types.
    #[getter]
    pub(crate) fn needs_persistent_id(&self, py: Python<'_>) -> PyResult<bool> {
        for ty in self.dispatch.bind(py).types.keys() {
            if is_pickle_atomic_type(py, &ty) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// pickle's `persistent_id` hook: the external's id, or None.
    fn persistent_id(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<u32>> {
        Ok(self.external(py, obj)?)
    }

    /// pickle's `reducer_override` hook: `(freight._pickle._external, (id,))` for objects freight
    /// encodes itself, NotImplemented for the rest.
    fn reduce<'py>(&self, py: Python<'py>, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.reduce_or(py, obj, None)?)
    }

    /// The island pickler's file: keeps what pickle writes (one bytes object per dump, unless
    /// the stream is large).
    fn write(&self, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let chunk = match data.cast::<PyBytes>() {
            Ok(bytes) if data.get_type().is(data.py().get_type::<PyBytes>()) => bytes.clone(),
            _ => PyBytes::new(data.py(), RawBuffer::simple(data)?.as_slice()),
        };
        let n = chunk.as_bytes().len();
        self.inner.borrow_mut().chunks.push(chunk.unbind());
        Ok(n)
    }

    /// Protocol-5 out-of-band buffers become frames. Returning False keeps them out of band.
    fn buffer_callback(&self, buffer: &Bound<'_, PyAny>) -> PyResult<bool> {
        let raw = RawBuffer::get(buffer, ffi::PyBUF_SIMPLE).or_else(|_| {
            // A non-contiguous PickleBuffer: take a contiguous copy.
            let copy = pyo3::types::PyBytes::new(
                buffer.py(),
                &buffer
                    .call_method0("raw")?
                    .call_method0("tobytes")?
                    .extract::<Vec<u8>>()?,
            );
            RawBuffer::simple(copy.as_any())
        })?;
        let mut inner = self.inner.borrow_mut();
        let index = inner.state.add_frame(FrameSource::Buffer(Arc::new(raw)))?;
        inner.buffers.push(index);
        Ok(false)
    }

    /// `reduce`, falling back to `fallback(obj)` (cloudpickle's own reducer_override) instead of
    /// NotImplemented: one native call per object instead of a Python method wrapping two.
    /// `reducers`: reducers by exact type, asked after the sink and cloudpickle's hook.
    fn chain(slf: Py<Self>, fallback: Py<PyAny>, reducers: Py<PyDict>) -> ChainedReduce {
        ChainedReduce {
            sink: slf,
            fallback: RefCell::new(Some(fallback)),
            reducers,
        }
    }
}

#[pyclass(module = "freight._freight", unsendable)]
pub struct ChainedReduce {
    sink: Py<PickleSink>,
    /// A bound method of the pickler that holds this hook: a reference cycle the garbage
    /// collector cannot see through, so `close` breaks it when the pickling ends.
    fallback: RefCell<Option<Py<PyAny>>>,
    /// cloudpickle's reducers by type (code objects, cells, modules, ...) and the refusal of
    /// open files (see `_pickle._cloud_pickler_class`).
    reducers: Py<PyDict>,
}

#[pymethods]
impl ChainedReduce {
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let fallback = self.fallback.borrow().as_ref().map(|f| f.bind(py).clone());
        let fallback = fallback.as_ref().map(|f| (f, self.reducers.bind(py)));
        Ok(self.sink.borrow(py).reduce_or(py, obj, fallback)?)
    }

    fn close(&self) {
        self.fallback.borrow_mut().take();
    }
}

impl PickleSink {
    fn reduce_or<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
        fallback: Option<(&Bound<'py, PyAny>, &Bound<'py, PyDict>)>,
    ) -> Result<Bound<'py, PyAny>> {
        match self.external(py, obj)? {
            Some(pid) => {
                let loader = EXTERNAL_LOADER.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
                    Ok(crate::python_types::pickle_bridge(py)?
                        .getattr("_external")?
                        .unbind())
                })?;
                Ok(PyTuple::new(
                    py,
                    [loader.bind(py).clone(), PyTuple::new(py, [pid])?.into_any()],
                )?
                .into_any())
            }
            None => {
                if let Some(reduced) = exception_reduction(py, obj)? {
                    return Ok(reduced);
                }
                let Some((fallback, reducers)) = fallback else {
                    return Ok(py.NotImplemented().into_bound(py));
                };
                // cloudpickle's reducer_override handles classes and functions and returns
                // NotImplemented for everything else: those are not worth a Python call.
                if cloud_reduces(obj) {
                    return Ok(fallback.call1((obj,))?);
                }
                match reducers.get_item(obj.get_type())? {
                    Some(reducer) => Ok(reducer.call1((obj,))?),
                    None => Ok(py.NotImplemented().into_bound(py)),
                }
            }
        }
    }
}

/// What cloudpickle's `reducer_override` acts on: instances of `type` or of a metaclass
/// (`issubclass(type(obj), type)`), and functions (`isinstance(obj, types.FunctionType)`).
fn cloud_reduces(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: type checks of a live object.
    unsafe { ffi::PyType_Check(obj.as_ptr()) != 0 || ffi::PyFunction_Check(obj.as_ptr()) != 0 }
}

static BASE_EXCEPTION_REDUCE: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

/// Exceptions whose class keeps BaseException's reduction: pickle rebuilds them as
/// `cls(*args)`, which fails for a class whose `__init__` takes other arguments (a keyword-only
/// one, say). freight reduces them to `_pickle._exception(cls, args, __dict__)`, which calls
/// `cls(*args)` when that works and otherwise builds the instance without `__init__`.
fn exception_reduction<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
) -> Result<Option<Bound<'py, PyAny>>> {
    // SAFETY: a type check of a live object.
    if unsafe { ffi::PyExceptionInstance_Check(obj.as_ptr()) } == 0 {
        return Ok(None);
    }
    let (reduce, reduce_ex) = BASE_EXCEPTION_REDUCE.get_or_try_init(py, || -> PyResult<_> {
        let base = py.get_type::<pyo3::exceptions::PyBaseException>();
        Ok((
            base.getattr("__reduce__")?.unbind(),
            base.getattr("__reduce_ex__")?.unbind(),
        ))
    })?;
    let ty = obj.get_type();
    if !ty
        .getattr(pyo3::intern!(py, "__reduce__"))?
        .is(reduce.bind(py))
        || !ty
            .getattr(pyo3::intern!(py, "__reduce_ex__"))?
            .is(reduce_ex.bind(py))
    {
        return Ok(None);
    }
    let rebuild =
        crate::python_types::pickle_bridge(py)?.getattr(pyo3::intern!(py, "_exception"))?;
    let args = obj.getattr(pyo3::intern!(py, "args"))?;
    let state = obj
        .getattr_opt(pyo3::intern!(py, "__dict__"))?
        .unwrap_or_else(|| py.None().into_bound(py));
    Ok(Some(
        PyTuple::new(
            py,
            [
                rebuild,
                PyTuple::new(py, [ty.into_any(), args, state])?.into_any(),
            ],
        )?
        .into_any(),
    ))
}

static EXTERNAL_LOADER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

impl PickleSink {
    fn external(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> Result<Option<u32>> {
        // The common case, first and cheap: nothing registered, not an array, and (with
        // cloudpickle) no by-reference check to make.
        let ptr = obj.as_ptr();
        let dispatch = self.dispatch.bind(py);
        if dispatch.nothing_for(&obj.get_type())
            && self.inner.borrow().cloud
            && !ndarray_type(py).is_some_and(|t| obj.get_type().is(t))
            && !is_big_bytes(ptr)
        {
            return Ok(None);
        }
        if ptr as usize == self.inner.borrow().root {
            return Ok(None); // an island's own object: the walker found no serializer for it
        }
        let ty = unsafe { ffi::Py_TYPE(ptr) };
        let types = dispatch.types.clone();
        let plain = unsafe {
            ty == &raw mut ffi::PyLong_Type
                || ty == &raw mut ffi::PyFloat_Type
                || ty == &raw mut ffi::PyUnicode_Type
                || ty == &raw mut ffi::PyTuple_Type
                || ty == &raw mut ffi::PyList_Type
                || ty == &raw mut ffi::PyDict_Type
                || ty == &raw mut ffi::PyBool_Type
                || ptr == ffi::Py_None()
        };
        if plain && types.is_empty() {
            return Ok(None);
        }
        if let Some(&(pid, _)) = self.inner.borrow().seen.get(&(ptr as usize)) {
            return Ok(Some(pid));
        }
        let is_big_bytes = is_big_bytes(ptr);

        let entry = if is_big_bytes || plain && types.is_empty() {
            None
        } else {
            dispatch.exact(&obj.get_type())?
        };
        let is_array =
            entry.is_none() && !plain && ndarray_type(py).is_some_and(|t| obj.get_type().is(t));
        let entry = match entry {
            Some(entry) => Some(entry),
            None if !is_big_bytes && !is_array && !plain => {
                if !self.inner.borrow().cloud {
                    if let Some(why) = by_reference_fails(py, obj)? {
                        return Err(needs_cloudpickle(py, why.to_owned()).into());
                    }
                }
                dispatch.slow(obj)?
            }
            None => None,
        };
        if entry.is_none() && !is_big_bytes && !is_array {
            return Ok(None);
        }

        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        // All externals of a payload share one memo scope (the decoder rebuilds them in the same
        // order), so an object inside one external's metadata that is also found elsewhere in the
        // pickled graph stays one object.
        let memo = std::mem::take(&mut inner.memo);
        let mut walker = Walker::with_memo(py, &dispatch, &mut inner.state, true, memo);
        let handled = match &entry {
            Some(entry) => walker.ext(obj, entry, true).map(|()| true),
            None if is_array => match walker.array_wire(obj) {
                Ok(Some(wire)) => walker.array(obj, &wire, true).map(|()| true),
                Ok(None) => {
                    // Pickled (object or StringDType arrays): still numpy's, so its version is
                    // recorded for a reader of another numpy.
                    walker.state.arrays = true;
                    Ok(false)
                }
                Err(err) => Err(err),
            },
            None => walker.walk(obj, true).map(|()| true),
        };
        let (tree, memo) = walker.into_parts();
        inner.memo = memo;
        // Walks inside the pickler report errors, never Unsupported (see Walker::in_metadata).
        if !handled? {
            return Ok(None); // an object-dtype array: pickle takes it
        }
        let pid = inner.externals.len() as u32;
        inner.externals.push(tree);
        inner.seen.insert(ptr as usize, (pid, obj.clone().unbind()));
        Ok(Some(pid))
    }
}
