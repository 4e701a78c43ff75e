//! An imported array as a payload node `(length, offset, validity, buffers, children)`, its
//! buffers as frames that view the producer's memory (no copy).

use std::collections::HashMap;

use arrow_array::{Array, BinaryViewArray, StringViewArray};
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_schema::DataType;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::buffer::{FrameBuffer, Owner};

/// The frames of one payload's Arrow data; a buffer shared by several arrays (a dictionary
/// repeated in every chunk) is one frame.
#[derive(Default)]
pub struct Frames {
    buffers: Vec<Buffer>,
    seen: HashMap<(usize, usize), usize>,
}

impl Frames {
    fn index(&mut self, buffer: &Buffer) -> usize {
        let key = (buffer.as_ptr() as usize, buffer.len());
        *self.seen.entry(key).or_insert_with(|| {
            self.buffers.push(buffer.clone());
            self.buffers.len() - 1
        })
    }

    pub fn into_list(self, py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
        let frames = self
            .buffers
            .into_iter()
            .map(|b| {
                let (ptr, len) = (b.as_ptr(), b.len());
                Bound::new(py, FrameBuffer::new(Owner::Arrow(b), ptr, len, true))
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, frames)
    }
}

pub fn node<'py>(
    py: Python<'py>,
    data: &ArrayData,
    frames: &mut Frames,
) -> PyResult<Bound<'py, PyTuple>> {
    let compacted = compact_views(data);
    let data = compacted.as_ref().unwrap_or(data);
    let validity = match data.nulls() {
        Some(nulls) if nulls.null_count() > 0 => {
            if nulls.offset() != data.offset() {
                return Err(PyValueError::new_err(
                    "an Arrow validity bitmap offset apart from its array",
                ));
            }
            Some(frames.index(nulls.buffer()))
        }
        _ => None,
    };
    let buffers: Vec<usize> = data.buffers().iter().map(|b| frames.index(b)).collect();
    let children = data
        .child_data()
        .iter()
        .map(|child| node(py, child, frames))
        .collect::<PyResult<Vec<_>>>()?;
    (
        data.len(),
        data.offset(),
        validity,
        PyTuple::new(py, buffers)?,
        PyTuple::new(py, children)?,
    )
        .into_pyobject(py)
}

/// View arrays (string_view, binary_view) may point into data buffers far larger than what
/// they use (polars shares them between slices and chunks): those are compacted first, so a
/// payload carries what the array holds.
fn compact_views(data: &ArrayData) -> Option<ArrayData> {
    let (held, used) = match data.data_type() {
        DataType::Utf8View => {
            let a = StringViewArray::from(data.clone());
            (
                a.data_buffers().iter().map(|b| b.len()).sum::<usize>(),
                a.total_buffer_bytes_used(),
            )
        }
        DataType::BinaryView => {
            let a = BinaryViewArray::from(data.clone());
            (
                a.data_buffers().iter().map(|b| b.len()).sum::<usize>(),
                a.total_buffer_bytes_used(),
            )
        }
        _ => return None,
    };
    if held <= 2 * used + (64 << 10) {
        return None;
    }
    Some(match data.data_type() {
        DataType::Utf8View => StringViewArray::from(data.clone()).gc().to_data(),
        _ => BinaryViewArray::from(data.clone()).gc().to_data(),
    })
}
