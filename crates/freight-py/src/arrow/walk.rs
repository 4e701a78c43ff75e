//! An imported array as a payload node `(length, offset, validity, buffers, children)`, its
//! buffers as frames that view the producer's memory (no copy).

use std::collections::HashMap;

use arrow_array::{Array, BinaryViewArray, StringViewArray};
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_schema::DataType;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::buffer::{FrameBuffer, Owner};
use crate::errors::{Error, Result};

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

    /// The buffers in frame order (a node's indices point into this).
    pub fn into_buffers(self) -> Vec<Buffer> {
        self.buffers
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

/// One array as its payload node: frame indices (into `Frames`) for its validity bitmap (None
/// when it has no nulls) and its buffers, and a node per child.
pub struct Node {
    pub len: usize,
    pub offset: usize,
    pub validity: Option<usize>,
    pub buffers: Vec<usize>,
    pub children: Vec<Node>,
}

impl Node {
    pub fn of(data: &ArrayData, frames: &mut Frames) -> Result<Node> {
        let compacted = compact_views(data);
        let data = compacted.as_ref().unwrap_or(data);
        let validity = match data.nulls() {
            Some(nulls) if nulls.null_count() > 0 => {
                if nulls.offset() != data.offset() {
                    return Err(Error::encode(
                        "an Arrow validity bitmap offset apart from its array",
                    ));
                }
                Some(frames.index(nulls.buffer()))
            }
            _ => None,
        };
        Ok(Node {
            len: data.len(),
            offset: data.offset(),
            validity,
            buffers: data.buffers().iter().map(|b| frames.index(b)).collect(),
            children: data
                .child_data()
                .iter()
                .map(|child| Node::of(child, frames))
                .collect::<Result<_>>()?,
        })
    }

    /// The node as the Python tuple `arrow_dumps` returns (the walker writes the same tree
    /// without it: see `encode::arrow`).
    pub fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let children = self
            .children
            .iter()
            .map(|child| child.to_py(py))
            .collect::<PyResult<Vec<_>>>()?;
        (
            self.len,
            self.offset,
            self.validity,
            PyTuple::new(py, &self.buffers)?,
            PyTuple::new(py, children)?,
        )
            .into_pyobject(py)
    }
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
