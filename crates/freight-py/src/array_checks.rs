//! Checks freight's library serializers run on arrays read from a payload before handing them
//! to a library that trusts its inputs (see freight-core's `utf8`).

use pyo3::prelude::*;

use crate::buffer::{maybe_detach, RawBuffer};

/// Whether an Arrow string array's buffers hold `length` valid values from value `start`:
/// offsets (i32, or i64 when `wide`) in bounds and non-decreasing, every value valid UTF-8.
#[pyfunction]
#[pyo3(signature = (offsets, data, wide, start, length))]
pub fn string_array_valid(
    py: Python<'_>,
    offsets: &Bound<'_, PyAny>,
    data: Option<&Bound<'_, PyAny>>,
    wide: bool,
    start: usize,
    length: usize,
) -> PyResult<bool> {
    let offsets = RawBuffer::simple(offsets)?;
    let data = data.map(RawBuffer::simple).transpose()?;
    let (o, d) = (
        offsets.as_slice(),
        data.as_ref().map_or(&[][..], |b| b.as_slice()),
    );
    Ok(maybe_detach(py, o.len() + d.len(), || {
        freight_core::utf8::string_array_valid(o, d, wide, start, length)
    }))
}

/// None when `indptr`/`indices` (native i32, or i64 when `wide`) form a compressed sparse
/// structure every kernel can trust for `major` rows (or columns, or block rows) and `minor`
/// columns (or ...); else why not.
#[pyfunction]
#[pyo3(signature = (indptr, indices, wide, major, minor))]
pub fn compressed_indices_error(
    py: Python<'_>,
    indptr: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    wide: bool,
    major: u64,
    minor: u64,
) -> PyResult<Option<String>> {
    let indptr = RawBuffer::simple(indptr)?;
    let indices = RawBuffer::simple(indices)?;
    let (p, i) = (indptr.as_slice(), indices.as_slice());
    Ok(maybe_detach(py, p.len() + i.len(), || {
        freight_core::sparse::check_compressed(p, i, wide, major, minor).err()
    }))
}
