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
//! with frame indices for validity (or None) and buffers (see `walk` and `build`). The walker
//! writes that metadata straight into the tree (`encode::arrow`); `arrow_dumps` gives it as
//! Python objects, for the serializers' own `serialize`.
//!
//! Errors are `crate::errors::Error`: what cannot be exported is `Encode` (the serializers then
//! use another form), what does not rebuild is a corrupt payload.

mod build;
mod capsule;
mod refused;
pub(crate) mod schema;
mod walk;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::buffer::maybe_detach;
use crate::errors::{Error, Result};
pub use build::RawNode;
pub use capsule::CArrays;
pub use walk::{Frames, Node};

/// The field metadata key that marks an extension type in the IPC schema bytes.
const EXTENSION_KEY: &[u8] = b"ARROW:extension:name";

/// What an Arrow exporter holds, as payload metadata: its field's IPC schema bytes, one node
/// per array, and the buffers the nodes refer to by index (the Ext node's frames).
pub struct Exported {
    pub schema: Vec<u8>,
    pub nodes: Vec<Node>,
    pub frames: Frames,
}

impl Exported {
    /// Reads what `obj` exports through `__arrow_c_stream__` or `__arrow_c_array__`.
    pub fn of(obj: &Bound<'_, PyAny>) -> Result<Self> {
        let (field, arrays) = capsule::import(obj)?;
        let schema = schema::to_ipc(&field);
        let mut frames = Frames::default();
        let nodes = arrays
            .iter()
            .map(|data| Node::of(data, &mut frames))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            schema,
            nodes,
            frames,
        })
    }

    /// Whether the schema declares an extension type anywhere: pyarrow's serializers look at
    /// those in Python (an unregistered Python extension type would come back as its storage).
    pub fn has_extension_type(&self) -> bool {
        self.schema
            .windows(EXTENSION_KEY.len())
            .any(|w| w == EXTENSION_KEY)
    }
}

/// The Arrow metadata `(schema, batches)` of an Ext node, read by the decoder straight from the
/// tree for the serializers that ask for it (`arrow_meta`): the serializer hands it to
/// `arrow_loads` as it would the tuple, without the tuples of every array node being made in
/// Python and read back (a 3-column table of 10 rows: ~30k of ~96k instructions per load).
#[pyclass(frozen, module = "freight._freight")]
pub struct ArrowMeta {
    pub schema: Vec<u8>,
    pub batches: Vec<RawNode>,
}

#[pymethods]
impl ArrowMeta {
    /// How many arrays the stream holds (a record batch of no rows has none).
    #[getter]
    fn batch_count(&self) -> usize {
        self.batches.len()
    }

    /// The stream field's IPC schema bytes: what the serializers key the pyarrow schema they
    /// imported once by (see `CArrays`).
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.schema)
    }
}

/// `(meta, frames)` of an object exporting `__arrow_c_stream__` or `__arrow_c_array__`.
/// Raises SerializationError for data it cannot carry (the caller falls back to another form).
#[pyfunction]
pub fn arrow_dumps<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyList>)> {
    let exported = Exported::of(obj)?;
    let batches = exported
        .nodes
        .iter()
        .map(|node| node.to_py(py))
        .collect::<PyResult<Vec<_>>>()?;
    let meta = PyTuple::new(
        py,
        [
            PyBytes::new(py, &exported.schema).into_any(),
            PyList::new(py, batches)?.into_any(),
        ],
    )?;
    Ok((meta, exported.frames.into_list(py)?))
}

/// The arrays of `meta` rebuilt over `frames` and validated, as a capsule: an
/// `arrow_array_stream` (`form="stream"`), or `(arrow_schema, arrow_array)` capsules of its
/// one array (`form="array"`). Raises DeserializationError on anything malformed.
#[pyfunction]
pub fn arrow_loads<'py>(
    py: Python<'py>,
    meta: &Bound<'py, PyAny>,
    frames: &Bound<'py, PyAny>,
    form: &str,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(loads(py, meta, frames, form)?)
}

fn loads<'py>(
    py: Python<'py>,
    meta: &Bound<'py, PyAny>,
    frames: &Bound<'py, PyAny>,
    form: &str,
) -> Result<Bound<'py, PyAny>> {
    if !matches!(form, "stream" | "array" | "arrays") {
        return Err(Error::decode(format!(
            "unknown Arrow form {form:?}: \"stream\", \"array\" or \"arrays\""
        )));
    }
    let mut source = build::FrameSource::new(frames);
    let (field, plans) = if let Ok(parsed) = meta.cast::<ArrowMeta>() {
        let parsed = parsed.get();
        let field = schema::from_ipc(&parsed.schema)?;
        let plans = parsed
            .batches
            .iter()
            .map(|node| build::plan_raw(node, &mut source, 0))
            .collect::<Result<Vec<_>>>()?;
        (field, plans)
    } else {
        let (schema_bytes, batches): (Bound<'py, PyAny>, Bound<'py, PyAny>) = meta
            .extract()
            .map_err(|_| build::malformed("metadata that is not (schema, batches)"))?;
        let schema_bytes = schema_bytes
            .cast::<PyBytes>()
            .map_err(|_| build::malformed("schema that is not bytes"))?;
        let field = schema::from_ipc(schema_bytes.as_bytes())?;
        let plans = batches
            .try_iter()
            .map_err(|_| build::malformed("batches that are not a list"))?
            .map(|node| build::plan(&node?, &mut source, 0))
            .collect::<Result<Vec<_>>>()?;
        (field, plans)
    };
    drop(source);
    let bytes = plans.iter().map(build::Plan::bytes).sum();
    let limit = build::max_values(bytes);
    let arrays = maybe_detach(py, bytes, || {
        plans
            .into_iter()
            .map(|plan| build::array(plan, field.data_type(), limit).and_then(build::batch_columns))
            .collect::<Result<Vec<_>>>()
    })?;
    match form {
        "stream" => return capsule::stream(py, field, arrays),
        "arrays" => return Ok(Bound::new(py, capsule::CArrays::new(arrays))?.into_any()),
        _ => {}
    }
    let [data]: [_; 1] = arrays.try_into().map_err(|a: Vec<_>| {
        Error::corrupt(format!(
            "an Arrow array payload holds {} arrays, not 1",
            a.len()
        ))
    })?;
    capsule::array(py, &field, data)
}
