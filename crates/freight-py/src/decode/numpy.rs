//! NdArray nodes back into numpy arrays: a view of the frame when that loses nothing, a copy
//! (checksummed in the same pass) into a fresh array otherwise. Only the dtype goes through
//! Python (python/freight/serializers/numpy.py), and each dtype wire text once per process.

use freight_core::bits::array_flags;
use freight_core::Reader;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use crate::buffer::RawBuffer;
use crate::decode::tree::TreeDecoder;
use crate::errors::{Decoding, Error, Result};
use crate::python_types::numpy_helper;

/// The pieces needed to rebuild an array: dtype, shape, size in bytes, order, writeability.
struct ArraySpec<'py> {
    dtype: Bound<'py, PyAny>,
    shape: Bound<'py, PyTuple>,
    nbytes: u64,
    fortran: bool,
    writeable: bool,
}

/// dtypes by wire text ("<f8"): a DataFrame of many columns pays one Python call per distinct
/// dtype, not one per array. Bounded: a payload cannot grow it past this many texts.
static DTYPES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
const DTYPES_MAX: usize = 1024;
/// Longer texts are not dtypes freight writes as one string; they are not cached.
const DTYPE_TEXT_MAX: usize = 64;

/// (dtype, itemsize) of a wire form: from the cache for short texts, else through Python.
fn dtype_of<'py>(py: Python<'py>, wire: &Bound<'py, PyAny>) -> Result<(Bound<'py, PyAny>, u64)> {
    let cache = DTYPES.get_or_init(py, || PyDict::new(py).unbind()).bind(py);
    let cacheable = wire.is_exact_instance_of::<pyo3::types::PyString>()
        && wire.len().is_ok_and(|n| n <= DTYPE_TEXT_MAX);
    if cacheable {
        if let Some(hit) = cache.get_item(wire)? {
            let (dtype, itemsize): (Bound<'py, PyAny>, u64) = hit.extract()?;
            return Ok((dtype, itemsize));
        }
    }
    let dtype = numpy_helper(py)?
        .getattr(pyo3::intern!(py, "dtype_from_wire"))?
        .call1((wire,))
        .decoding("a numpy dtype")?;
    let itemsize: u64 = dtype.getattr(pyo3::intern!(py, "itemsize"))?.extract()?;
    if cacheable && cache.len() < DTYPES_MAX {
        cache.set_item(wire, (&dtype, itemsize))?;
    }
    Ok((dtype, itemsize))
}

fn array_spec<'py>(
    py: Python<'py>,
    wire: &Bound<'py, PyAny>,
    flags: u8,
    shape: &[u64],
) -> Result<ArraySpec<'py>> {
    let (dtype, itemsize) = dtype_of(py, wire)?;
    // The element count must fit even when the item size is 0 (a zero-size dtype would
    // otherwise hide an absurd shape).
    let overflow = || Error::corrupt(format!("array shape {shape:?} overflows"));
    let mut count: u64 = 1;
    for &dim in shape {
        count = count
            .checked_mul(dim)
            .filter(|&c| c <= isize::MAX as u64)
            .ok_or_else(overflow)?;
    }
    let nbytes = count.checked_mul(itemsize).ok_or_else(overflow)?;
    Ok(ArraySpec {
        dtype,
        shape: PyTuple::new(py, shape)?,
        nbytes,
        fortran: flags & array_flags::FORTRAN != 0,
        writeable: flags & array_flags::WRITEABLE != 0,
    })
}

impl<'py> TreeDecoder<'_, 'py> {
    /// An NdArray node (after its tag).
    pub(crate) fn ndarray(&mut self, r: &mut Reader<'_>) -> Result<Bound<'py, PyAny>> {
        let py = self.py;
        // The dtype's wire form is a node of its own (a text, or a structure for records).
        let wire = self.node(r, None)?;
        let (flags, shape, index) = r.ndarray_tail()?;
        let spec = array_spec(py, &wire, flags, &shape)?;
        let ctx = self.ctx()?.clone();
        let frame = ctx.peek(index)?;
        if spec.nbytes != frame.raw_len() as u64 {
            return Err(Error::corrupt(format!(
                "an array of shape {shape:?} needs {} bytes but its frame {index} holds {}",
                spec.nbytes,
                frame.raw_len()
            )));
        }
        let helper = numpy_helper(py)?;
        // A compressed frame can only be decompressed into a fresh array.
        let view_ok = !frame.compressed()
            && !ctx.opts.copy
            && (ctx.opts.zero_copy || !spec.writeable || ctx.writable(frame));
        if view_ok {
            let writeable = spec.writeable && ctx.writable(frame);
            let buffer = ctx.frame_view(py, index, writeable)?;
            return helper
                .getattr(pyo3::intern!(py, "from_frame"))?
                .call1((buffer, &spec.dtype, &spec.shape, spec.fortran, writeable))
                .decoding("a numpy array");
        }
        let arr = helper
            .getattr(pyo3::intern!(py, "empty"))?
            .call1((&spec.dtype, &spec.shape, spec.fortran))
            .decoding("a numpy array")?;
        let dst = RawBuffer::get(&arr, ffi::PyBUF_WRITABLE | ffi::PyBUF_ANY_CONTIGUOUS)?;
        // SAFETY: a fresh array nobody else references; the export is writable and contiguous.
        let out = unsafe { dst.as_mut_slice() };
        freight_core::memory::advise_decoded(out);
        ctx.copy_frame(py, index, out)?;
        drop(dst);
        Ok(arr)
    }
}
