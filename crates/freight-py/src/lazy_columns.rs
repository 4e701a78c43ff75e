//! The schema side of a lazy read of some columns of a stored table: the stored Arrow schema
//! (one struct field whose children are the columns) cut down to the asked-for columns, in
//! Rust. In Python (pyarrow's `read_schema`, new fields, a new schema, `serialize`) it was a
//! third of the fixed cost of reading one column of a local table, which the whole load (a
//! mapped, zero-copy load) does not pay.

use arrow_schema::{DataType, Field, Fields};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::arrow::schema::{from_ipc, to_ipc};
use crate::errors::Error;

/// (the columns' names, the IPC schema bytes of columns `names` in that order, or None when one
/// of them is not a column) of a stored table's IPC schema bytes.
#[pyfunction]
pub fn arrow_project<'py>(
    py: Python<'py>,
    schema: &[u8],
    names: Vec<String>,
) -> PyResult<(Vec<String>, Option<Bound<'py, PyBytes>>)> {
    let field = from_ipc(schema)?;
    let DataType::Struct(columns) = field.data_type() else {
        return Err(Error::corrupt(format!(
            "a stored table's Arrow schema is a {}, not a struct of columns",
            field.data_type()
        ))
        .into());
    };
    let have: Vec<String> = columns.iter().map(|c| c.name().clone()).collect();
    let mut picked = Vec::with_capacity(names.len());
    for name in &names {
        match columns.iter().find(|c| c.name() == name) {
            Some(column) => picked.push(column.clone()),
            None => return Ok((have, None)),
        }
    }
    let projected = Field::new(
        field.name(),
        DataType::Struct(Fields::from(picked)),
        field.is_nullable(),
    )
    .with_metadata(field.metadata().clone());
    let bytes = to_ipc(&std::sync::Arc::new(projected));
    Ok((have, Some(PyBytes::new(py, &bytes))))
}
