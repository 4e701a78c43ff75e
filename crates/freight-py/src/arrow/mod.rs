//! Arrow data in and out of payloads, in Rust. Any library that speaks the Arrow PyCapsule
//! interface (pyarrow, polars, ...) hands its data over as a C stream or array; arrow-rs reads
//! it, and its buffers become frames with no copy. On load, arrays are rebuilt over the
//! payload's frames, validated in full by arrow-rs (with the GIL released when large), and
//! handed back as a capsule the library imports. The schema travels once per payload, as Arrow
//! IPC schema bytes.
//!
//! The metadata a payload holds is `(schema, batches)`: `schema` the IPC bytes of the stream's
//! field (a table's columns are the fields of a schema, its metadata the schema's), `batches`
//! one node per array of the stream, each `(length, offset, validity, buffers, children)`
//! with frame indices for validity (or None) and buffers (see `walk` and `build`).

mod build;
mod capsule;
mod schema;
mod walk;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::buffer::maybe_detach;

/// `(meta, frames)` of an object exporting `__arrow_c_stream__` or `__arrow_c_array__`.
/// Raises ValueError for data it cannot carry (the caller falls back to another form).
#[pyfunction]
pub fn arrow_dumps<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyList>)> {
    let (field, arrays) = capsule::import(obj)?;
    let schema = schema::to_ipc(&field)?;
    let mut frames = walk::Frames::default();
    let batches = arrays
        .iter()
        .map(|data| walk::node(py, data, &mut frames))
        .collect::<PyResult<Vec<_>>>()?;
    let meta = PyTuple::new(
        py,
        [
            PyBytes::new(py, &schema).into_any(),
            PyList::new(py, batches)?.into_any(),
        ],
    )?;
    Ok((meta, frames.into_list(py)?))
}

/// The arrays of `meta` rebuilt over `frames` and validated, as a capsule: an
/// `arrow_array_stream` (`form="stream"`), or `(arrow_schema, arrow_array)` capsules of its
/// one array (`form="array"`). Raises ValueError on anything malformed.
#[pyfunction]
pub fn arrow_loads<'py>(
    py: Python<'py>,
    meta: &Bound<'py, PyAny>,
    frames: &Bound<'py, PyAny>,
    form: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let (schema_bytes, batches): (Bound<'py, PyAny>, Bound<'py, PyAny>) = meta.extract()?;
    let field = schema::from_ipc(schema_bytes.cast::<PyBytes>()?.as_bytes())?;
    let mut source = build::FrameSource::new(frames);
    let plans = batches
        .try_iter()?
        .map(|node| build::plan(&node?, &mut source, 0))
        .collect::<PyResult<Vec<_>>>()?;
    drop(source);
    let bytes = plans.iter().map(build::Plan::bytes).sum();
    let limit = build::max_values(bytes);
    let arrays = maybe_detach(py, bytes, || {
        plans
            .into_iter()
            .map(|plan| build::array(plan, field.data_type(), limit).and_then(build::batch_columns))
            .collect::<Result<Vec<_>, String>>()
    })
    .map_err(pyo3::exceptions::PyValueError::new_err)?;
    match form {
        "stream" => capsule::stream(py, field, arrays),
        "array" => {
            let [data]: [_; 1] = arrays.try_into().map_err(|a: Vec<_>| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "an Arrow array payload holds {} arrays, not 1",
                    a.len()
                ))
            })?;
            capsule::array(py, &field, data)
        }
        _ => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "unknown Arrow form {form:?}"
        ))),
    }
}
