//! Buffers in and out: `RawBuffer` (an exported Py_buffer, released on drop), `FrameBuffer`
//! (a Python object exposing a slice of memory that something else owns, so arrays and
//! memoryviews can view it without a copy), and uninitialised output `bytes`.

use std::ffi::c_int;
use std::sync::Arc;

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// An exported buffer. Holding it keeps the exporter alive and its memory fixed (a bytearray
/// cannot resize while exported). Released, with the GIL, on drop.
pub struct RawBuffer {
    view: View,
}

enum View {
    /// A buffer-protocol export. Boxed: an export may point into itself (a bytes-like
    /// exporter's `shape` is `&view.len`), so it must not move.
    Exported(Box<ffi::Py_buffer>),
    /// An exact `bytes` object, held by a strong reference: immutable and never moved, so its
    /// memory needs no export (saves an allocation and two calls on every small `loads`).
    Bytes {
        obj: *mut ffi::PyObject,
        ptr: *const u8,
        len: usize,
    },
}

// SAFETY: the exported memory stays valid until PyBuffer_Release, which Drop calls while attached
// to the interpreter; the struct itself holds no thread-bound state.
unsafe impl Send for RawBuffer {}
unsafe impl Sync for RawBuffer {}

impl RawBuffer {
    /// Exports `obj`'s buffer with the given PyBUF_* flags.
    pub fn get(obj: &Bound<'_, PyAny>, flags: c_int) -> PyResult<Self> {
        let mut view: Box<std::mem::MaybeUninit<ffi::Py_buffer>> = Box::new_uninit();
        // SAFETY: PyObject_GetBuffer initialises the view on success (returns 0).
        let rc = unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), view.as_mut_ptr(), flags) };
        if rc != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(Self {
            view: View::Exported(unsafe { view.assume_init() }),
        })
    }

    /// A C-contiguous byte view of any buffer-protocol object, writable when its exporter says so
    /// (`readonly`; `bytes` never is).
    pub fn simple(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(bytes) = obj.cast_exact::<PyBytes>() {
            let data = bytes.as_bytes();
            let (ptr, len) = (data.as_ptr(), data.len());
            return Ok(Self {
                view: View::Bytes {
                    obj: bytes.clone().into_ptr(),
                    ptr,
                    len,
                },
            });
        }
        Self::get(obj, ffi::PyBUF_SIMPLE)
    }

    fn exported(&self) -> Option<&ffi::Py_buffer> {
        match &self.view {
            View::Exported(view) => Some(view),
            View::Bytes { .. } => None,
        }
    }

    #[inline]
    pub fn ptr(&self) -> *const u8 {
        match &self.view {
            View::Exported(view) => view.buf as *const u8,
            View::Bytes { ptr, .. } => *ptr,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        match &self.view {
            View::Exported(view) => view.len as usize,
            View::Bytes { len, .. } => *len,
        }
    }

    #[inline]
    pub fn readonly(&self) -> bool {
        self.exported().is_none_or(|view| view.readonly != 0)
    }

    pub fn ndim(&self) -> usize {
        self.exported().map_or(1, |view| view.ndim as usize)
    }

    /// Shape of an export made with PyBUF_ND or more.
    pub fn shape(&self) -> Vec<u64> {
        match self.exported() {
            Some(view) if !view.shape.is_null() => {
                // SAFETY: an export with PyBUF_ND fills `ndim` entries of `shape`.
                unsafe { std::slice::from_raw_parts(view.shape, self.ndim()) }
                    .iter()
                    .map(|&d| d as u64)
                    .collect()
            }
            _ => vec![self.len() as u64],
        }
    }

    pub fn is_contiguous(&self, order: u8) -> bool {
        match self.exported() {
            // SAFETY: the view is a valid export.
            Some(view) => unsafe {
                ffi::PyBuffer_IsContiguous(view, order as std::ffi::c_char) != 0
            },
            None => true,
        }
    }

    /// The bytes. Valid while `self` lives; the exporter may be mutated by other Python code
    /// (then the bytes change), but never freed or moved.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        if self.len() == 0 {
            return &[];
        }
        // SAFETY: a successful export guarantees `len` readable bytes at `buf`.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len()) }
    }

    /// Mutable bytes of a writable export.
    ///
    /// # Safety
    /// The caller must have exported with PyBUF_WRITABLE and hold no other reference to the bytes.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self) -> &mut [u8] {
        if self.len() == 0 {
            return &mut [];
        }
        unsafe { std::slice::from_raw_parts_mut(self.ptr() as *mut u8, self.len()) }
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        // Almost always dropped while attached (inside a call from Python, or a pyclass dealloc):
        // release directly, and attach only in the rare other case.
        // SAFETY: the view is a valid export (or a strong reference), released exactly once,
        // while attached.
        let release = |view: &mut View| unsafe {
            match view {
                View::Exported(view) => ffi::PyBuffer_Release(&mut **view),
                View::Bytes { obj, .. } => ffi::Py_DECREF(*obj),
            }
        };
        if unsafe { ffi::PyGILState_Check() } == 1 {
            release(&mut self.view);
        } else {
            Python::attach(|_| release(&mut self.view));
        }
    }
}

/// Who owns the memory a `FrameBuffer` exposes.
pub enum Owner {
    /// An exported buffer (an input payload, an array, a serializer's frame).
    Buffer(Arc<RawBuffer>),
    /// An immutable Python object whose memory does not move (bytes, str's cached UTF-8).
    Object(Py<PyAny>),
    /// An Arrow buffer (imported through the C Data Interface: it keeps its producer's
    /// memory alive until the frame is released).
    Arrow(arrow_buffer::Buffer),
}

/// A Python object exposing `len` bytes at `ptr`, owned by `owner`. This is what the frames of
/// `dumps_frames` and the zero-copy arrays of `loads` view.
#[pyclass(module = "freight._freight", frozen)]
pub struct FrameBuffer {
    owner: Owner,
    ptr: usize,
    len: usize,
    readonly: bool,
}

impl FrameBuffer {
    pub fn new(owner: Owner, ptr: *const u8, len: usize, readonly: bool) -> Self {
        Self {
            owner,
            ptr: ptr as usize,
            len,
            readonly,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the owner keeps `len` bytes at `ptr` valid for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }

    pub fn owner(&self) -> &Owner {
        &self.owner
    }
}

#[pymethods]
impl FrameBuffer {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let this = slf.get();
        // SAFETY: the owner keeps the bytes alive as long as `slf`, which the view references.
        unsafe {
            fill_buffer(
                slf.as_any(),
                view,
                flags,
                this.as_slice(),
                this.readonly,
                "this freight frame is read-only",
            )
        }
    }

    fn __len__(&self) -> usize {
        self.len
    }

    fn __repr__(&self) -> String {
        format!(
            "<freight frame of {} bytes{}>",
            self.len,
            if self.readonly { ", read-only" } else { "" }
        )
    }
}

/// Fills a buffer-protocol view of `data` exported by `exporter` (contiguous bytes), refusing a
/// writable request on read-only memory with `readonly_msg`.
///
/// # Safety
/// `data` must stay valid and unmoved for as long as `exporter` lives (the view holds a
/// reference to it), and must not be written through when `readonly`.
pub unsafe fn fill_buffer(
    exporter: &Bound<'_, PyAny>,
    view: *mut ffi::Py_buffer,
    flags: c_int,
    data: &[u8],
    readonly: bool,
    readonly_msg: &'static str,
) -> PyResult<()> {
    if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE && readonly {
        return Err(PyBufferError::new_err(readonly_msg));
    }
    // SAFETY: PyBuffer_FillInfo fills `view` for a contiguous byte buffer and takes a new
    // reference to `exporter`, which keeps the memory alive (the caller's contract).
    let rc = unsafe {
        ffi::PyBuffer_FillInfo(
            view,
            exporter.as_ptr(),
            data.as_ptr() as *mut std::ffi::c_void,
            data.len() as ffi::Py_ssize_t,
            readonly as c_int,
            flags,
        )
    };
    if rc != 0 {
        return Err(PyErr::fetch(exporter.py()));
    }
    Ok(())
}

/// `memoryview(obj)`.
pub fn memoryview<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: PyMemoryView_FromObject returns a new reference or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(obj.py(), ffi::PyMemoryView_FromObject(obj.as_ptr())) }
}

/// A memoryview over a new FrameBuffer.
pub fn frame_memoryview<'py>(py: Python<'py>, frame: FrameBuffer) -> PyResult<Bound<'py, PyAny>> {
    let obj = Bound::new(py, frame)?;
    // SAFETY: PyMemoryView_FromObject returns a new reference or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyMemoryView_FromObject(obj.as_ptr())) }
}

/// A new `bytes` of `len` bytes whose contents the caller must fully write. Large ones are
/// readied for the writes before anything touches them ([`ready_for_writes`]).
///
/// # Safety
/// The slice is valid only while the returned `bytes` is alive, and must be fully written
/// before the `bytes` is shown to any Python code (which assumes bytes are immutable).
pub unsafe fn uninit_bytes(
    py: Python<'_>,
    len: usize,
) -> PyResult<(Bound<'_, PyBytes>, &mut [u8])> {
    // SAFETY: a NULL source gives an uninitialised bytes object of `len` bytes, which we own
    // exclusively until it is returned to Python; the caller writes every byte.
    unsafe {
        let ptr = ffi::PyBytes_FromStringAndSize(std::ptr::null(), len as ffi::Py_ssize_t);
        let bytes = Bound::from_owned_ptr_or_err(py, ptr)?.cast_into_unchecked::<PyBytes>();
        let data = std::slice::from_raw_parts_mut(ffi::PyBytes_AsString(ptr) as *mut u8, len);
        ready_for_writes(
            py,
            ptr as *const u8,
            data,
            freight_core::memory::prepare_output,
        );
        Ok((bytes, data))
    }
}

/// Readies `data`, a buffer about to be filled, with `prepare` (freight_core::memory's
/// `prepare_output` or `prepare_decoded`: huge pages, pages faulted in at once) when it is fresh
/// memory; the check is cheap and made under the GIL, the preparation costs about a copy and
/// runs with the GIL released when large. `alloc` is the pointer malloc returned for the object
/// `data` lies in.
pub fn ready_for_writes(py: Python<'_>, alloc: *const u8, data: &mut [u8], prepare: fn(&mut [u8])) {
    if freight_core::memory::fresh(alloc, data) {
        maybe_detach(py, data.len(), || prepare(data));
    }
}

/// Sizes above which copies and checksums run with the GIL released.
pub const DETACH_THRESHOLD: usize = 1 << 20;

/// Runs `f` with the GIL released when `bytes` is large enough to be worth it.
pub fn maybe_detach<T: Send, F: FnOnce() -> T + Send>(py: Python<'_>, bytes: usize, f: F) -> T {
    if bytes >= DETACH_THRESHOLD {
        py.detach(f)
    } else {
        f()
    }
}

/// `(address, nbytes)` of a C-contiguous buffer: where a frame lies, for the shared-memory
/// integrations (is it inside a received segment? inside a writable array?). numpy's
/// `__array_interface__` answers the same in about 4 µs a call, this in well under one.
#[pyfunction]
pub fn buffer_span(obj: &Bound<'_, PyAny>) -> PyResult<(usize, usize)> {
    let view = RawBuffer::simple(obj)?;
    Ok((view.ptr() as usize, view.len()))
}
