//! Arrays rebuilt from payload nodes over the payload's frames (no copy, unless a frame is
//! misaligned for its type) and validated in full by arrow-rs: offsets, indices, UTF-8, union
//! type ids, null counts (recounted, never read from the payload). Consumers build on the
//! result without checking it, so nothing unvalidated leaves this module.

use std::panic::{catch_unwind, AssertUnwindSafe, RefUnwindSafe};
use std::ptr::NonNull;
use std::sync::Arc;

use arrow_buffer::Buffer;
use arrow_data::{ArrayData, ArrayDataBuilder};
use arrow_schema::{ArrowError, DataType};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::buffer::RawBuffer;
use crate::errors::{Error, Result};

/// A payload whose Arrow metadata does not describe arrays (`what` it holds instead).
pub fn malformed(what: &str) -> Error {
    Error::corrupt(format!("an Arrow payload's metadata holds {what}"))
}

/// Deeper node trees than any Arrow type a schema can declare are refused before recursing.
const MAX_DEPTH: usize = 128;

/// One node read from the payload, its frames exported (needs the GIL); `array` builds it.
pub struct Plan {
    len: usize,
    offset: usize,
    validity: Option<Buffer>,
    buffers: Vec<Buffer>,
    children: Vec<Plan>,
}

impl Plan {
    /// The bytes its buffers span (whether validation is worth releasing the GIL for).
    pub fn bytes(&self) -> usize {
        let own: usize = self
            .buffers
            .iter()
            .chain(&self.validity)
            .map(Buffer::len)
            .sum();
        own + self.children.iter().map(Plan::bytes).sum::<usize>()
    }
}

/// A frame's memory, held by the arrays built over it.
struct Held(#[allow(dead_code)] RawBuffer);
// SAFETY: the export is never observed mid-update: it is read-only memory to Arrow.
impl RefUnwindSafe for Held {}

/// The frames of one payload, each exported once however many buffers use it.
pub struct FrameSource<'a, 'py> {
    frames: &'a Bound<'py, PyAny>,
    /// By frame index, sized to the frame count on first use (a handful of frames: a vector
    /// beats hashing the index, which took a third of a 10-row table's build).
    exported: Vec<Option<Buffer>>,
}

impl<'a, 'py> FrameSource<'a, 'py> {
    pub fn new(frames: &'a Bound<'py, PyAny>) -> Self {
        Self {
            frames,
            exported: Vec::new(),
        }
    }

    fn buffer(&mut self, index: usize) -> Result<Buffer> {
        if let Some(Some(buffer)) = self.exported.get(index) {
            return Ok(buffer.clone());
        }
        if self.exported.is_empty() {
            self.exported.resize(self.frames.len()?, None);
        }
        let count = self.exported.len();
        if index >= count {
            return Err(malformed(&format!(
                "a buffer that refers to frame {index} of {count}"
            )));
        }
        let raw = RawBuffer::simple(&self.frames.get_item(index)?)?;
        if !raw.readonly() {
            // Writable memory (a bytearray the caller may reuse for the next message): arrays
            // over it would change, past their validation, when it does. Copied; read-only
            // frames (bytes, zero-copy loads) are viewed in place.
            let buffer = Buffer::from_slice_ref(raw.as_slice());
            self.exported[index] = Some(buffer.clone());
            return Ok(buffer);
        }
        let (ptr, len) = (raw.ptr(), raw.len());
        let buffer = match NonNull::new(ptr as *mut u8) {
            // SAFETY: the export keeps `len` bytes at `ptr` valid and unmoved until dropped,
            // which the Buffer does when its last user is gone.
            Some(ptr) if len > 0 => unsafe {
                Buffer::from_custom_allocation(ptr, len, Arc::new(Held(raw)))
            },
            _ => Buffer::from_vec(Vec::<u8>::new()),
        };
        self.exported[index] = Some(buffer.clone());
        Ok(buffer)
    }
}

/// Reads a node `(length, offset, validity, buffers, children)`.
pub fn plan(
    node: &Bound<'_, PyAny>,
    frames: &mut FrameSource<'_, '_>,
    depth: usize,
) -> Result<Plan> {
    if depth > MAX_DEPTH {
        return Err(malformed("arrays nested too deep"));
    }
    let (len, offset, validity, buffers, children): (
        usize,
        usize,
        Option<usize>,
        Bound<'_, PyTuple>,
        Bound<'_, PyTuple>,
    ) = node.extract().map_err(|_| {
        malformed("a node that is not (length, offset, validity, buffers, children)")
    })?;
    Ok(Plan {
        len,
        offset,
        validity: validity.map(|i| frames.buffer(i)).transpose()?,
        buffers: buffers
            .iter()
            .map(|i| {
                let index = i
                    .extract()
                    .map_err(|_| malformed("a buffer index that is not a frame number"))?;
                frames.buffer(index)
            })
            .collect::<Result<_>>()?,
        children: children
            .iter()
            .map(|child| plan(&child, frames, depth + 1))
            .collect::<Result<_>>()?,
    })
}

/// A node `(length, offset, validity, buffers, children)` read straight from a payload's tree
/// (`decode::arrow_meta`), with no Python objects made; `plan_raw` exports its frames.
#[derive(Debug, Default)]
pub struct RawNode {
    pub len: usize,
    pub offset: usize,
    pub validity: Option<usize>,
    pub buffers: Vec<usize>,
    pub children: Vec<RawNode>,
}

/// `plan` of a node read straight from the tree: the same frame lookups and depth limit.
pub fn plan_raw(node: &RawNode, frames: &mut FrameSource<'_, '_>, depth: usize) -> Result<Plan> {
    if depth > MAX_DEPTH {
        return Err(malformed("arrays nested too deep"));
    }
    Ok(Plan {
        len: node.len,
        offset: node.offset,
        validity: node.validity.map(|i| frames.buffer(i)).transpose()?,
        buffers: node
            .buffers
            .iter()
            .map(|&i| frames.buffer(i))
            .collect::<Result<_>>()?,
        children: node
            .children
            .iter()
            .map(|child| plan_raw(child, frames, depth + 1))
            .collect::<Result<_>>()?,
    })
}

/// The most values an array may claim over `bytes` bytes of buffers: one bit each (a validity
/// bitmap, booleans), or 2**31 for types that need no memory per value (null, zero-width
/// binaries and lists, empty structs, run-end encoded), so that a payload of a few bytes cannot
/// claim 2**62 values for its reader to walk.
pub fn max_values(bytes: usize) -> usize {
    bytes.saturating_mul(8).saturating_add(64).max(1 << 31)
}

/// The array `plan` describes, of type `data_type`, validated in full (no GIL needed); no
/// array claims more than `limit` values (see `max_values`).
pub fn array(plan: Plan, data_type: &DataType, limit: usize) -> Result<ArrayData> {
    if plan.len.checked_add(plan.offset).is_none_or(|n| n > limit) {
        return Err(Error::corrupt(format!(
            "an Arrow array of type {data_type} claims {} values from offset {}, more than its buffers can hold",
            plan.len, plan.offset
        )));
    }
    let child_types = child_types(data_type);
    if plan.children.len() != child_types.len() {
        return Err(Error::corrupt(format!(
            "an Arrow array of type {data_type} has {} children, not {}",
            plan.children.len(),
            child_types.len()
        )));
    }
    let children = plan
        .children
        .into_iter()
        .zip(child_types)
        .map(|(child, t)| array(child, &t, limit))
        .collect::<Result<Vec<_>>>()?;
    let builder = ArrayDataBuilder::new(data_type.clone())
        .len(plan.len)
        // An empty array needs no offset; one written over a buffer imported empty would make
        // pyarrow's concatenation read past that buffer (an empty slice taken at the end of an
        // array keeps its offset: payloads of earlier versions hold such arrays).
        .offset(if plan.len == 0 { 0 } else { plan.offset })
        .null_bit_buffer(plan.validity)
        .buffers(plan.buffers)
        .child_data(children)
        .align_buffers(true);
    let invalid = |e: String| {
        Error::corrupt(format!(
            "an Arrow array of type {data_type} is malformed{e}"
        ))
    };
    // arrow-rs validates without panicking on what it checks; a panic on what it does not is
    // a malformed payload too, never a crash.
    catch_unwind(AssertUnwindSafe(|| match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => strings(builder, data_type),
        _ => builder.build(),
    }))
    .map_err(|_| invalid(String::new()))?
    .map_err(|e| invalid(format!(": {e}")))
}

/// A top-level struct (a record batch, a table's chunk) with its columns cut to its own rows:
/// arrow-rs accepts children longer than their struct (a sliced struct keeps them whole), but
/// pyarrow imports a batch's columns as they are, and a batch shorter than its columns crashes
/// it later (Table.filter reads past the batch's rows).
pub fn batch_columns(data: ArrayData) -> Result<ArrayData> {
    if !matches!(data.data_type(), DataType::Struct(_))
        || (data.offset() == 0 && data.child_data().iter().all(|c| c.len() == data.len()))
    {
        return Ok(data);
    }
    catch_unwind(AssertUnwindSafe(|| {
        ArrayData::from(arrow_array::StructArray::from(data))
    }))
    .map_err(|_| Error::corrupt("an Arrow struct array's columns do not match it"))
}

/// A string array checked as arrow-rs' full validation does (layout and buffer sizes, null
/// count; offsets in bounds and non-decreasing, or views within their buffers with their
/// prefixes; UTF-8 values), its values by freight's own checks: the same checks, 7 to 20 times
/// faster on ASCII text (freight_core::utf8).
fn strings(
    builder: ArrayDataBuilder,
    data_type: &DataType,
) -> std::result::Result<ArrayData, ArrowError> {
    // SAFETY: nothing reads the data before the checks below pass: layout, buffer sizes and
    // nulls by arrow-rs, the values by freight_core::utf8.
    let data = unsafe { builder.skip_validation(true) }.build()?;
    data.validate()?;
    data.validate_nulls()?;
    let (start, len, buffers) = (data.offset(), data.len(), data.buffers());
    // Null slots of offset-based strings may hold any bytes between offsets in order (Arrow's
    // spec): only values are checked there. Views are all checked (see string_views_valid).
    let is_valid = |i: usize| data.nulls().is_none_or(|n| n.is_valid(i));
    let valid = len == 0
        || match (data_type, buffers) {
            (DataType::Utf8View, [views, rest @ ..]) => {
                let rest: Vec<&[u8]> = rest.iter().map(|b| b.as_slice()).collect();
                freight_core::utf8::string_views_valid(views, &rest, start, len)
            }
            (_, [offsets, values]) => {
                let wide = matches!(data_type, DataType::LargeUtf8);
                match data.nulls() {
                    None => {
                        freight_core::utf8::string_array_valid(offsets, values, wide, start, len)
                    }
                    Some(_) => freight_core::utf8::string_array_valid_masked(
                        offsets, values, wide, start, len, is_valid,
                    ),
                }
            }
            _ => false,
        };
    if !valid {
        return Err(ArrowError::InvalidArgumentError(
            "offsets or views out of order or out of bounds, or invalid UTF-8".into(),
        ));
    }
    Ok(data)
}

/// The types of an array's children, as arrow-rs lays them out (a dictionary's values are
/// its one child).
pub fn child_types(t: &DataType) -> Vec<DataType> {
    match t {
        DataType::Struct(fields) => fields.iter().map(|f| f.data_type().clone()).collect(),
        DataType::Union(fields, _) => fields.iter().map(|(_, f)| f.data_type().clone()).collect(),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => vec![f.data_type().clone()],
        DataType::Dictionary(_, values) => vec![values.as_ref().clone()],
        DataType::RunEndEncoded(ends, values) => {
            vec![ends.data_type().clone(), values.data_type().clone()]
        }
        _ => vec![],
    }
}
