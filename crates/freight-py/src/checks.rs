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
