//! The Arrow PyCapsule interface: importing what a library exports
//! (`__arrow_c_stream__`, `__arrow_c_array__`) and exporting rebuilt arrays as capsules it
//! imports. A capsule not consumed releases its contents when Python frees it.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::Arc;

use arrow_array::ffi::{from_ffi_and_data_type, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_data::ArrayData;
use arrow_schema::{DataType, Field, FieldRef};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

use crate::errors::{Error, Result};

const STREAM: &std::ffi::CStr = c"arrow_array_stream";
const SCHEMA: &std::ffi::CStr = c"arrow_schema";
const ARRAY: &std::ffi::CStr = c"arrow_array";

/// What arrow-rs refuses in an export: data freight cannot carry this way.
fn cannot_carry(e: arrow_schema::ArrowError) -> Error {
    Error::encode(format!("cannot carry this Arrow data: {e}"))
}

/// The field and arrays `obj` exports: a stream when it has `__arrow_c_stream__` (tables,
/// chunked arrays, data frames, series), else its one array.
pub fn import(obj: &Bound<'_, PyAny>) -> Result<(FieldRef, Vec<ArrayData>)> {
    let py = obj.py();
    if let Ok(method) = obj.getattr(pyo3::intern!(py, "__arrow_c_stream__")) {
        let capsule = method.call0()?;
        let capsule = capsule.cast::<PyCapsule>()?;
        let ptr = capsule.pointer_checked(Some(STREAM))?;
        // SAFETY: a capsule named arrow_array_stream holds an FFI_ArrowArrayStream; from_raw
        // moves it out and marks the capsule's copy released.
        let stream = unsafe { FFI_ArrowArrayStream::from_raw(ptr.as_ptr().cast()) };
        return read_stream(stream);
    }
    let Ok(method) = obj.getattr(pyo3::intern!(py, "__arrow_c_array__")) else {
        return Err(Error::encode(format!(
            "a {} exports neither __arrow_c_stream__ nor __arrow_c_array__",
            obj.get_type().name()?
        )));
    };
    let pair = method.call0()?;
    let (schema, array): (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>) = pair.extract()?;
    let schema_ptr = schema.pointer_checked(Some(SCHEMA))?;
    let array_ptr = array.pointer_checked(Some(ARRAY))?;
    // SAFETY: capsules of these names hold an FFI_ArrowSchema and an FFI_ArrowArray; the
    // array is moved out (its capsule's copy marked released), the schema only borrowed.
    unsafe {
        let schema = &*(schema_ptr.as_ptr() as *const FFI_ArrowSchema);
        let mut array = FFI_ArrowArray::from_raw(array_ptr.as_ptr().cast());
        let field = Arc::new(Field::try_from(schema).map_err(cannot_carry)?);
        super::refused::check(schema, &field)?;
        accept_null_buffers(
            &mut array as *mut FFI_ArrowArray as *mut RawArray,
            field.data_type(),
        );
        let data =
            from_ffi_and_data_type(array, field.data_type().clone()).map_err(cannot_carry)?;
        Ok((field, vec![data]))
    }
}

/// Every array of a C stream, of any type (arrow-rs' readers take record batches, or give
/// arrays only after importing them, too late for `accept_null_buffers`).
fn read_stream(mut stream: FFI_ArrowArrayStream) -> Result<(FieldRef, Vec<ArrayData>)> {
    let (Some(get_schema), Some(get_next)) = (stream.get_schema(), stream.get_next()) else {
        return Err(Error::encode("the Arrow stream is already released"));
    };
    let failed = |stream: &mut FFI_ArrowArrayStream, rc: c_int| {
        // SAFETY: get_last_error is called on the stream whose call failed, before any other.
        let message = stream
            .get_last_error()
            .map(|f| unsafe { f(stream) })
            .filter(|p| !p.is_null())
            .map(|p| {
                unsafe { std::ffi::CStr::from_ptr(p) }
                    .to_string_lossy()
                    .into_owned()
            });
        Error::encode(format!(
            "the Arrow stream failed (error {rc}): {}",
            message.unwrap_or_default()
        ))
    };
    let mut schema = FFI_ArrowSchema::empty();
    // SAFETY: the C stream interface's contract, on a stream that is not released.
    let rc = unsafe { get_schema(&mut stream, &mut schema) };
    if rc != 0 {
        return Err(failed(&mut stream, rc));
    }
    let field = Arc::new(Field::try_from(&schema).map_err(cannot_carry)?);
    super::refused::check(&schema, &field)?;
    let mut arrays = Vec::new();
    loop {
        let mut array = FFI_ArrowArray::empty();
        let rc = unsafe { get_next(&mut stream, &mut array) };
        if rc != 0 {
            return Err(failed(&mut stream, rc));
        }
        if array.is_released() {
            return Ok((field, arrays)); // the end of the stream
        }
        // SAFETY: `array` is a valid, unreleased FFI array of `field`'s type.
        unsafe {
            accept_null_buffers(
                &mut array as *mut FFI_ArrowArray as *mut RawArray,
                field.data_type(),
            )
        };
        let data = unsafe { from_ffi_and_data_type(array, field.data_type().clone()) }
            .map_err(cannot_carry)?;
        arrays.push(data);
    }
}

/// The C Data Interface's ArrowArray, field by field (arrow-rs keeps its fields private).
#[repr(C)]
struct RawArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut RawArray,
    dictionary: *mut RawArray,
    release: Option<unsafe extern "C" fn(*mut RawArray)>,
    private_data: *mut c_void,
}

/// polars exports arrays of the null type with one (validity) buffer where the spec has none,
/// which arrow-rs refuses: such arrays are read as having none (the producer's release
/// callback frees its buffers whatever `n_buffers` says).
///
/// # Safety
/// `array` points to a valid, unreleased C array of type `data_type`.
unsafe fn accept_null_buffers(array: *mut RawArray, data_type: &DataType) {
    unsafe {
        let a = &mut *array;
        match data_type {
            DataType::Null => a.n_buffers = 0,
            DataType::Dictionary(_, values) if !a.dictionary.is_null() => {
                accept_null_buffers(a.dictionary, values)
            }
            _ => {
                let types = super::build::child_types(data_type);
                if a.children.is_null() || a.n_children != types.len() as i64 {
                    return; // arrow-rs reports the mismatch
                }
                for (i, t) in types.iter().enumerate() {
                    let child = *a.children.add(i);
                    if !child.is_null() {
                        accept_null_buffers(child, t);
                    }
                }
            }
        }
    }
}

/// A type read from a payload's schema that the C Data Interface cannot express.
fn cannot_hand_over(e: arrow_schema::ArrowError) -> Error {
    Error::corrupt(format!(
        "the Arrow schema holds a type that cannot be handed over: {e}"
    ))
}

/// `(arrow_schema, arrow_array)` capsules of one array.
pub fn array<'py>(py: Python<'py>, field: &Field, data: ArrayData) -> Result<Bound<'py, PyAny>> {
    let schema = FFI_ArrowSchema::try_from(field).map_err(cannot_hand_over)?;
    let array = FFI_ArrowArray::new(&data);
    let schema = PyCapsule::new_with_value(py, schema, SCHEMA)?;
    let array = PyCapsule::new_with_value(py, array, ARRAY)?;
    Ok(PyTuple::new(py, [schema, array])?.into_any())
}

/// The rebuilt arrays as C arrays with no schema, for an importer that already holds the
/// schema (pyarrow's `_import_from_c(address, schema)`): importing a schema is most of what a
/// small table's import costs, and a process loading many tables of one schema imports it once
/// (python/freight/serializers/arrow.py keeps what it imported, keyed by the schema bytes).
/// Each array is boxed, so its address holds until this object goes; the importer moves an
/// array out (marking it released), and any array left is released when this object is freed.
#[pyclass(frozen, module = "freight._freight")]
pub struct CArrays {
    /// From `Box::into_raw`: the importer writes through these addresses (it moves the array
    /// out), which a `Box` held here would not allow; `Drop` takes each back.
    arrays: Vec<*mut FFI_ArrowArray>,
}

// SAFETY: the pointers are owned (boxes) and only read or freed by whoever holds the GIL;
// FFI_ArrowArray itself is Send and Sync.
unsafe impl Send for CArrays {}
unsafe impl Sync for CArrays {}

impl CArrays {
    pub fn new(arrays: Vec<ArrayData>) -> Self {
        Self {
            arrays: arrays
                .iter()
                .map(|data| Box::into_raw(Box::new(FFI_ArrowArray::new(data))))
                .collect(),
        }
    }
}

impl Drop for CArrays {
    fn drop(&mut self) {
        for &array in &self.arrays {
            // SAFETY: made by Box::into_raw in `new`, freed once here; an array the importer
            // moved out is marked released, and dropping it releases nothing.
            drop(unsafe { Box::from_raw(array) });
        }
    }
}

#[pymethods]
impl CArrays {
    /// The address of each C array, in the stream's order (valid while this object lives).
    fn addresses(&self) -> Vec<usize> {
        self.arrays.iter().map(|&a| a as usize).collect()
    }

    fn __len__(&self) -> usize {
        self.arrays.len()
    }
}

/// An `arrow_array_stream` capsule yielding `arrays`, each of `field`'s type (arrow-rs' own
/// stream export takes record batches only: a chunked array's stream is of any type).
pub fn stream(py: Python<'_>, field: FieldRef, arrays: Vec<ArrayData>) -> Result<Bound<'_, PyAny>> {
    let private = Box::new(Private {
        field,
        arrays: arrays.into(),
        error: None,
    });
    // SAFETY: the callbacks below implement the C stream interface over `Private`, which
    // `release` frees exactly once.
    let stream = unsafe {
        FFI_ArrowArrayStream::new_unchecked(
            Some(get_schema),
            Some(get_next),
            Some(get_last_error),
            Some(release),
            Box::into_raw(private).cast(),
        )
    };
    Ok(PyCapsule::new_with_value(py, stream, STREAM)?.into_any())
}

struct Private {
    field: FieldRef,
    arrays: VecDeque<ArrayData>,
    error: Option<CString>,
}

unsafe fn private<'a>(stream: *mut FFI_ArrowArrayStream) -> &'a mut Private {
    // SAFETY: only called on streams made by `stream`, before release.
    unsafe { &mut *((*stream).private_data() as *mut Private) }
}

unsafe extern "C" fn get_schema(
    stream: *mut FFI_ArrowArrayStream,
    out: *mut FFI_ArrowSchema,
) -> c_int {
    let private = unsafe { private(stream) };
    match FFI_ArrowSchema::try_from(private.field.as_ref()) {
        Ok(schema) => {
            unsafe { std::ptr::write(out, schema) };
            0
        }
        Err(e) => {
            private.error = CString::new(e.to_string()).ok();
            libc::EINVAL
        }
    }
}

unsafe extern "C" fn get_next(
    stream: *mut FFI_ArrowArrayStream,
    out: *mut FFI_ArrowArray,
) -> c_int {
    let private = unsafe { private(stream) };
    let array = match private.arrays.pop_front() {
        Some(data) => FFI_ArrowArray::new(&data),
        None => FFI_ArrowArray::empty(), // released: the end of the stream
    };
    unsafe { std::ptr::write(out, array) };
    0
}

unsafe extern "C" fn get_last_error(stream: *mut FFI_ArrowArrayStream) -> *const c_char {
    let private = unsafe { private(stream) };
    private
        .error
        .as_ref()
        .map_or(std::ptr::null(), |e| e.as_ptr())
}

unsafe extern "C" fn release(stream: *mut FFI_ArrowArrayStream) {
    if stream.is_null() {
        return;
    }
    // SAFETY: private_data is the Box made by `stream`, freed here once; the release
    // callback is then cleared, which marks the stream released.
    unsafe {
        let data = (*stream).private_data();
        if !data.is_null() {
            drop(Box::from_raw(data as *mut Private));
        }
        (*stream).set_private_data(std::ptr::null_mut::<c_void>());
        (*stream).set_release(None);
    }
}
