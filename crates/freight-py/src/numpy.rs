//! numpy arrays in Rust, through the buffer protocol: numpy is never imported by freight to
//! encode (an array can only exist if the user imported numpy), and only the dtype description
//! goes through Python (python/freight/serializers/numpy.py).

use std::sync::Arc;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;

use crate::buffer::RawBuffer;
use crate::encode::{FrameSource, Walker};
use crate::errors::{EncodeResult, MissingDependencyError};
use crate::types::freight_module;

/// Bits of an NdArray node's flags byte.
pub const FORTRAN: u8 = 1;
pub const WRITEABLE: u8 = 2;

static HELPER: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// freight.serializers.numpy (imports numpy).
pub fn helper(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    freight_module(py, &HELPER, "freight.serializers.numpy").map_err(|err| {
        if err.is_instance_of::<pyo3::exceptions::PyImportError>(py) {
            let new = MissingDependencyError::new_err(
                "the payload holds numpy arrays but numpy is not installed; install it with: pip install 'freight[numpy]'",
            );
            new.set_cause(py, Some(err));
            new
        } else {
            err
        }
    })
}

/// The wire form of an exact ndarray's dtype, or None for object dtypes (the array then needs
/// pickle).
pub fn array_wire<'py>(
    walker: &mut Walker<'_, 'py>,
    arr: &Bound<'py, PyAny>,
) -> EncodeResult<Option<Bound<'py, PyAny>>> {
    let py = walker.py();
    let helper = helper(py)?;
    let dtype = arr.getattr(pyo3::intern!(py, "dtype"))?;
    let wire = helper
        .getattr(pyo3::intern!(py, "dtype_to_wire"))?
        .call1((dtype,))?;
    Ok(if wire.is_none() { None } else { Some(wire) })
}

/// Writes an NdArray node (its memo marker, if any, is already written).
pub fn write_array<'py>(
    walker: &mut Walker<'_, 'py>,
    arr: &Bound<'py, PyAny>,
    wire: &Bound<'py, PyAny>,
) -> EncodeResult<()> {
    let py = walker.py();
    // PyBUF_STRIDES without PyBUF_FORMAT: numpy exports every non-object dtype this way
    // (datetime64 included, which it refuses when a format string is requested).
    let mut buf = RawBuffer::get(arr, ffi::PyBUF_STRIDES)?;
    let writeable = !buf.readonly();
    let mut fortran = false;
    if !buf.is_contiguous(b'C') {
        if buf.is_contiguous(b'F') {
            fortran = true;
        } else {
            // A strided view (slice, transpose of a non-contiguous array, broadcast): one copy
            // into C order is unavoidable.
            let contiguous = helper(py)?
                .getattr(pyo3::intern!(py, "ascontiguous"))?
                .call1((arr,))?;
            buf = RawBuffer::get(&contiguous, ffi::PyBUF_STRIDES)?;
        }
    }
    let shape = if buf.ndim() == 0 {
        Vec::new()
    } else {
        buf.shape()
    };
    walker.keep(wire.clone());
    walker.writer().ndarray_begin();
    walker.walk(wire, true)?;
    // Numeric items shuffle well before compression (the byte-shuffle filter): say how big.
    let itemsize: u32 = arr
        .getattr(pyo3::intern!(py, "itemsize"))?
        .extract::<u64>()?
        .min(u32::MAX as u64) as u32;
    let frame = walker
        .state
        .add_frame_of_items(FrameSource::Buffer(Arc::new(buf)), itemsize)?;
    let flags = if fortran { FORTRAN } else { 0 } | if writeable { WRITEABLE } else { 0 };
    walker.writer().ndarray_end(flags, &shape, frame);
    Ok(())
}

/// The pieces `decode.rs` needs to rebuild an array: dtype, its item size, shape.
pub struct ArraySpec<'py> {
    pub dtype: Bound<'py, PyAny>,
    pub shape: Bound<'py, PyTuple>,
    pub nbytes: u64,
    pub fortran: bool,
    pub writeable: bool,
}

pub fn array_spec<'py>(
    py: Python<'py>,
    wire: &Bound<'py, PyAny>,
    flags: u8,
    shape: &[u64],
) -> PyResult<ArraySpec<'py>> {
    let helper = helper(py)?;
    let dtype = helper
        .getattr(pyo3::intern!(py, "dtype_from_wire"))?
        .call1((wire,))?;
    let itemsize: u64 = dtype.getattr(pyo3::intern!(py, "itemsize"))?.extract()?;
    // The element count must fit even when the item size is 0 (a zero-size dtype would
    // otherwise hide an absurd shape).
    let mut count: u64 = 1;
    for &dim in shape {
        count = count
            .checked_mul(dim)
            .filter(|&c| c <= isize::MAX as u64)
            .ok_or_else(|| {
                crate::errors::DeserializationError::new_err(format!(
                    "corrupt freight payload: array shape {shape:?} overflows"
                ))
            })?;
    }
    let nbytes = count.checked_mul(itemsize).ok_or_else(|| {
        crate::errors::DeserializationError::new_err(format!(
            "corrupt freight payload: array shape {shape:?} overflows"
        ))
    })?;
    Ok(ArraySpec {
        dtype,
        shape: PyTuple::new(py, shape)?,
        nbytes,
        fortran: flags & FORTRAN != 0,
        writeable: flags & WRITEABLE != 0,
    })
}

/// An array viewing `buffer` (a FrameBuffer), no copy.
pub fn view<'py>(
    py: Python<'py>,
    spec: &ArraySpec<'py>,
    buffer: &Bound<'py, PyAny>,
    writeable: bool,
) -> PyResult<Bound<'py, PyAny>> {
    helper(py)?
        .getattr(pyo3::intern!(py, "from_frame"))?
        .call1((buffer, &spec.dtype, &spec.shape, spec.fortran, writeable))
}

/// A fresh, writable array to copy a frame into.
pub fn empty<'py>(py: Python<'py>, spec: &ArraySpec<'py>) -> PyResult<Bound<'py, PyAny>> {
    helper(py)?
        .getattr(pyo3::intern!(py, "empty"))?
        .call1((&spec.dtype, &spec.shape, spec.fortran))
}
