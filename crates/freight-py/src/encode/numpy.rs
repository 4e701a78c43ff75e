//! Exact numpy arrays into NdArray nodes, through the buffer protocol: numpy is never imported
//! by freight to encode (an array can only exist if the user imported numpy), and only the
//! dtype description goes through Python (python/freight/serializers/numpy.py), once per dtype
//! object per process.

use std::sync::{Arc, Mutex};

use freight_core::bits::array_flags;
use freight_core::ptrmap::PtrMap;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::buffer::RawBuffer;
use crate::encode::state::FrameSource;
use crate::encode::walker::Walker;
use crate::errors::Result;
use crate::python_types::numpy_helper;

/// A dtype's wire form (None for object dtypes) and item size.
struct DtypeWire {
    /// Holds the dtype, so that its address (the key) is not reused while cached.
    _dtype: Py<PyAny>,
    wire: Option<Py<PyAny>>,
    itemsize: u32,
}

/// Wire forms by dtype object: numpy shares dtype objects between arrays of the same dtype
/// (`float64` is one object), so a DataFrame's columns pay one Python call per distinct dtype,
/// not one per array. Bounded: cleared when full.
static WIRES: PyOnceLock<Mutex<PtrMap<DtypeWire>>> = PyOnceLock::new();
const WIRES_MAX: usize = 1024;

/// (wire form or None, item size) of an array's dtype: cached by dtype object.
fn dtype_wire<'py>(
    py: Python<'py>,
    arr: &Bound<'py, PyAny>,
) -> Result<(Option<Bound<'py, PyAny>>, u32)> {
    let dtype = arr.getattr(pyo3::intern!(py, "dtype"))?;
    let key = dtype.as_ptr() as usize;
    let cache = WIRES.get_or_init(py, Default::default);
    if let Some(hit) = cache.lock().ok().and_then(|map| {
        map.get(&key)
            .map(|w| (w.wire.as_ref().map(|o| o.bind(py).clone()), w.itemsize))
    }) {
        return Ok(hit);
    }
    let wire = numpy_helper(py)?
        .getattr(pyo3::intern!(py, "dtype_to_wire"))?
        .call1((&dtype,))?;
    let wire = (!wire.is_none()).then_some(wire);
    let itemsize = dtype
        .getattr(pyo3::intern!(py, "itemsize"))?
        .extract::<u64>()?
        .min(u32::MAX as u64) as u32;
    if let Ok(mut map) = cache.lock() {
        if map.len() >= WIRES_MAX {
            map.clear();
        }
        map.insert(
            key,
            DtypeWire {
                _dtype: dtype.unbind(),
                wire: wire.as_ref().map(|w| w.clone().unbind()),
                itemsize,
            },
        );
    }
    Ok((wire, itemsize))
}

impl<'py> Walker<'_, 'py> {
    /// The wire form of an exact ndarray's dtype, or None for object dtypes (the array then
    /// needs pickle).
    pub(crate) fn array_wire(
        &mut self,
        arr: &Bound<'py, PyAny>,
    ) -> Result<Option<Bound<'py, PyAny>>> {
        Ok(dtype_wire(self.py, arr)?.0)
    }

    /// Writes an NdArray node (its memo marker, if any, is already written).
    pub(crate) fn write_array(
        &mut self,
        arr: &Bound<'py, PyAny>,
        wire: &Bound<'py, PyAny>,
    ) -> Result<()> {
        let walker = self;
        let py = walker.py();
        walker.state.arrays = true;
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
                let contiguous = numpy_helper(py)?
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
        let itemsize = dtype_wire(py, arr)?.1;
        let frame = walker
            .state
            .add_frame_of_items(FrameSource::Buffer(Arc::new(buf)), itemsize)?;
        let flags = if fortran { array_flags::FORTRAN } else { 0 }
            | if writeable { array_flags::WRITEABLE } else { 0 };
        walker.writer().ndarray_end(flags, &shape, frame);
        Ok(())
    }
}
