//! The encode side: `walker` turns an object graph into a node tree and frames (`state`),
//! finding serializers through `dispatch`; `stdlib`, `numpy` and `serializer` encode the
//! objects that need Python, `arrow` the Arrow exporters, `leaves` the hot scalar leaves (each
//! an `impl Walker`);
//! `islands` pickles in place what has no native encoding, one pickler per payload;
//! `pickle_sink` is the pickler's hook (of the island pickler, and of the whole-payload pickler
//! when the walker gives the payload to pickle);
//! `compression` applies the policy to the frames; `scalar` writes a small root's tree (a
//! scalar, a few of them in a container) without a walk.
//! Nothing here imports the decode side.

mod arrow;
pub mod compression;
pub mod dispatch;
pub mod islands;
mod leaves;
mod numpy;
pub mod pickle_sink;
pub mod scalar;
mod serializer;
pub mod state;
mod stdlib;
pub mod walker;

use freight_core::envelope::{EnvelopeSpec, FrameLayout};
use freight_core::ptrmap::PtrMap;
use freight_core::{PickleData, TreeWriter};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::encode::dispatch::DispatchRefs;
use crate::encode::pickle_sink::PickleSink;
use crate::encode::state::{EncodeState, FrameSource};
use crate::encode::walker::{Walker, FRAME_MIN};
use crate::errors::{Error, Result};

/// A walked payload, ready to be laid out.
pub struct Encoded {
    pub tree: Vec<u8>,
    pub state: EncodeState,
    versions: Vec<(String, String)>,
}

impl Encoded {
    /// Whether the payload is its tree alone: no frames, serializer tags or producer versions.
    pub fn is_tree_only(&self) -> bool {
        self.state.frames.is_empty() && self.state.tags.is_empty() && self.versions.is_empty()
    }

    pub fn frame_slices(&self) -> Vec<&[u8]> {
        self.state
            .frames
            .iter()
            .map(FrameSource::as_slice)
            .collect()
    }

    pub fn spec<'a>(
        &'a self,
        frames: Vec<FrameLayout>,
        checksums: bool,
        signed: bool,
    ) -> EnvelopeSpec<'a> {
        EnvelopeSpec {
            needs_pickle: self.state.needs_pickle,
            tags: self.state.tags.iter().map(String::as_str).collect(),
            versions: self
                .versions
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
            frames,
            checksums,
            signed,
            tree: &self.tree,
        }
    }
}

/// Walks `obj` natively, pickling in place what has no native encoding (pickle islands, one
/// pickler for the payload: islands.rs); when the walker meets what islands cannot express
/// (`Error::Unsupported`), the whole payload goes through one (cloud)pickler instead.
#[inline(always)]
pub fn encode(py: Python<'_>, dispatch: &DispatchRefs, obj: &Bound<'_, PyAny>) -> Result<Encoded> {
    let bound = dispatch.bind(py);
    let mut state = EncodeState::default();
    let native = {
        let mut walker = Walker::new(py, &bound, &mut state, false);
        walker.islands = Some(dispatch);
        // SAFETY: reading the type of a live object.
        let walked = if unsafe { ffi::Py_TYPE(obj.as_ptr()) } == &raw mut ffi::PyFunction_Type {
            // A function (a task, a lambda, a closure): a registration for functions, freight's
            // own node (freight._functions) when it qualifies, else one island.
            match walker.function(obj, true) {
                Ok(true) => Ok(()),
                Ok(false) => walker.island_here(obj),
                Err(err) => Err(err),
            }
        } else {
            walker.walk(obj, true)
        };
        match walked.and_then(|()| walker.islands_alias()) {
            Ok(false) => Ok(Some(walker.into_tree())),
            Ok(true) | Err(Error::Unsupported) => Ok(None),
            Err(err) => Err(err),
        }
    };
    if let Some(session) = state.session.take() {
        session.close(py);
    }
    let native = native?;
    if let Some(tree) = native {
        let mut versions = if state.pickled {
            pickle_versions(py, state.cloudpickle)?
        } else {
            Vec::new()
        };
        library_versions(py, &state.tags, state.arrays, &mut versions)?;
        return Ok(Encoded {
            tree,
            state,
            versions,
        });
    }
    encode_pickled(py, dispatch, obj, std::mem::take(&mut state.ext_cache))
}

/// The whole payload through one (cloud)pickler; arrays and registered types inside still
/// become freight nodes and frames (see pickle_sink.rs).
#[inline(never)]
fn encode_pickled(
    py: Python<'_>,
    dispatch: &DispatchRefs,
    obj: &Bound<'_, PyAny>,
    ext_cache: PtrMap<(Py<PyAny>, Py<PyAny>)>,
) -> Result<Encoded> {
    let cloud_first = pickle_sink::by_reference_fails(py, obj)?.is_some();
    let sink = Bound::new(
        py,
        PickleSink::new(dispatch.clone_ref(py), ext_cache, cloud_first),
    )?;
    let module = crate::python_types::pickle_bridge(py)?;
    let out = module
        .getattr(pyo3::intern!(py, "dump"))?
        .call1((obj, &sink, cloud_first))?;
    let out = out.cast::<PyTuple>()?;
    let data = out.get_item(0)?.cast_into::<PyBytes>()?;
    let cloud: bool = out.get_item(1)?.extract()?;
    let (mut state, externals, buffers, _) = sink.borrow().take();
    state.needs_pickle = true;
    let mut versions = pickle_versions(py, cloud)?;
    library_versions(py, &state.tags, state.arrays, &mut versions)?;
    let mut w = TreeWriter::new();
    let bytes = data.as_bytes();
    if bytes.len() >= FRAME_MIN {
        let (ptr, len) = (bytes.as_ptr() as usize, bytes.len());
        let index = state.add_frame(FrameSource::Object {
            obj: data.clone().into_any().unbind(),
            ptr,
            len,
        })?;
        w.pickle(cloud, PickleData::Frame(index), &buffers, &externals);
    } else {
        w.pickle(cloud, PickleData::Inline(bytes), &buffers, &externals);
    }
    Ok(Encoded {
        tree: w.into_bytes(),
        state,
        versions,
    })
}

/// The producer versions a payload with pickle records (pickled code is version-specific).
fn pickle_versions(py: Python<'_>, cloud: bool) -> Result<Vec<(String, String)>> {
    // Looked up once: neither can change in a process.
    static WITH_CLOUD: pyo3::sync::PyOnceLock<Vec<(String, String)>> =
        pyo3::sync::PyOnceLock::new();
    let python = ("python".to_owned(), python_version(py).to_owned());
    if !cloud {
        return Ok(vec![python]);
    }
    Ok(WITH_CLOUD
        .get_or_try_init(py, || -> PyResult<_> {
            let cloudpickle = crate::python_types::cloudpickle_version(py)?.to_owned();
            Ok(vec![python, ("cloudpickle".to_owned(), cloudpickle)])
        })?
        .clone())
}

/// The versions of the libraries whose serializers a payload uses (`pandas` → `3.1.1`), by the
/// top-level module of each tag: a payload that fails to load in another environment says what
/// wrote it (`freight.inspect(blob)["producer"]`).
fn library_versions(
    py: Python<'_>,
    tags: &[String],
    arrays: bool,
    versions: &mut Vec<(String, String)>,
) -> Result<()> {
    if tags.is_empty() && !arrays {
        return Ok(());
    }
    // sys.modules, looked up once: the import machinery costs about a microsecond a call.
    static MODULES: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let modules = MODULES
        .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("sys")?.getattr("modules")?.unbind())
        })?
        .bind(py);
    // Arrays are numpy's whatever their tag: a reader of another numpy major version is told.
    let arrays = arrays.then_some("numpy");
    for top in arrays
        .into_iter()
        .chain(tags.iter().map(|tag| tag.split('.').next().unwrap_or(tag)))
    {
        if versions.iter().any(|(name, _)| name == top) {
            continue;
        }
        // A library's version cannot change once it is imported: looked up once (a numpy
        // array's dumps spent a tenth of its time asking numpy for its version).
        thread_local!(static FOUND: std::cell::RefCell<Vec<(String, String)>> = const { std::cell::RefCell::new(Vec::new()) });
        if let Some(known) = FOUND.with(|f| f.borrow().iter().find(|(n, _)| n == top).cloned()) {
            versions.push(known);
            continue;
        }
        let Ok(module) = modules.get_item(top) else {
            continue;
        };
        if let Ok(version) = module.getattr(pyo3::intern!(py, "__version__")) {
            if let Ok(version) = version.extract::<String>() {
                let entry = (top.to_owned(), version);
                FOUND.with(|f| f.borrow_mut().push(entry.clone()));
                versions.push(entry);
            }
        }
    }
    Ok(())
}

/// "3.11": the producer version a pickle payload records (code objects are version-specific).
fn python_version(py: Python<'_>) -> &'static str {
    static VERSION: pyo3::sync::PyOnceLock<String> = pyo3::sync::PyOnceLock::new();
    VERSION.get_or_init(py, || {
        let v = py.version_info();
        format!("{}.{}", v.major, v.minor)
    })
}
