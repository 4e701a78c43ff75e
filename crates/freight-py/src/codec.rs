//! `Codec`: the configured entry points (`dumps`, `loads`, ...) that `freight.Freight` binds.
//! Two phases: while attached, walk the objects into a tree and a list of frames; then lay the
//! envelope out and copy the frames with the GIL released.

use freight_core::envelope::{EnvelopeSpec, EnvelopeWriter, FrameLayout};
use freight_core::{PickleData, TreeWriter};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::buffer::{frame_memoryview, maybe_detach, uninit_bytes, FrameBuffer};
use crate::compression::Stored;
use crate::decode::{decode, DecodeCtx, Options};
use crate::dispatch::DispatchRefs;
use crate::encode::{Dispatch, EncodeState, FrameSource, Walker, FRAME_MIN};
use crate::errors::{EncodeError, SerializationError};
use crate::options::{self, Compression};
use crate::pickle_bridge::PickleSink;

#[pyclass(module = "freight._freight", frozen)]
pub struct Codec {
    /// The registry's views (types, predicates, libraries to load), read without calls.
    dispatch: DispatchRefs,
    allow_pickle: bool,
    zero_copy: bool,
    verify: Option<bool>,
    checksum: bool,
    compression: Compression,
    /// The first key signs; all of them are accepted on load (key rotation).
    keys: Vec<Vec<u8>>,
    max_size: u64,
}

/// A walked payload, ready to be laid out.
struct Encoded {
    tree: Vec<u8>,
    state: EncodeState,
    versions: Vec<(String, String)>,
}

impl Encoded {
    fn frame_slices(&self) -> Vec<&[u8]> {
        self.state
            .frames
            .iter()
            .map(FrameSource::as_slice)
            .collect()
    }

    fn spec<'a>(
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

/// The producer versions a payload with pickle records (pickled code is version-specific).
fn pickle_versions(py: Python<'_>, cloud: bool) -> PyResult<Vec<(String, String)>> {
    let mut versions = vec![("python".to_owned(), python_version(py).to_owned())];
    if cloud {
        versions.push((
            "cloudpickle".to_owned(),
            crate::types::cloudpickle_version(py)?.to_owned(),
        ));
    }
    Ok(versions)
}

/// The versions of the libraries whose serializers a payload uses (`pandas` → `3.1.1`), by the
/// top-level module of each tag: a payload that fails to load in another environment says what
/// wrote it (`freight.inspect(blob)["producer"]`).
fn library_versions(
    py: Python<'_>,
    tags: &[String],
    versions: &mut Vec<(String, String)>,
) -> PyResult<()> {
    if tags.is_empty() {
        return Ok(());
    }
    // sys.modules, looked up once: the import machinery costs about a microsecond a call.
    static MODULES: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let modules = MODULES
        .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("sys")?.getattr("modules")?.unbind())
        })?
        .bind(py);
    for tag in tags {
        let top = tag.split('.').next().unwrap_or(tag);
        if versions.iter().any(|(name, _)| name == top) {
            continue;
        }
        let Ok(module) = modules.get_item(top) else {
            continue;
        };
        if let Ok(version) = module.getattr(pyo3::intern!(py, "__version__")) {
            if let Ok(version) = version.extract::<String>() {
                versions.push((top.to_owned(), version));
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

impl Codec {
    fn dispatch<'py>(&self, py: Python<'py>) -> Dispatch<'py> {
        self.dispatch.bind(py)
    }

    fn encode(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Encoded> {
        let dispatch = self.dispatch(py);
        let mut state = EncodeState::default();
        let native = {
            let mut walker = Walker::new(py, &dispatch, &mut state, false);
            match walker.walk(obj, true) {
                Ok(()) => Some(walker.into_tree()),
                Err(EncodeError::Unsupported) => None,
                Err(EncodeError::Py(err)) => return Err(err),
            }
        };
        if let Some(tree) = native {
            let mut versions = if state.pickled {
                pickle_versions(py, state.cloudpickle)?
            } else {
                Vec::new()
            };
            library_versions(py, &state.tags, &mut versions)?;
            return Ok(Encoded {
                tree,
                state,
                versions,
            });
        }
        self.encode_pickled(py, obj, std::mem::take(&mut state.ext_cache))
    }

    /// The whole payload through one (cloud)pickler; arrays and registered types inside still
    /// become freight nodes and frames (see pickle_bridge.rs).
    #[inline(never)]
    fn encode_pickled(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        ext_cache: freight_core::ptrmap::PtrMap<(Py<PyAny>, Py<PyAny>)>,
    ) -> PyResult<Encoded> {
        let cloud_first = crate::pickle_bridge::by_reference_fails(py, obj)?.is_some();
        let sink = Bound::new(
            py,
            PickleSink::new(self.dispatch.clone_ref(py), ext_cache, cloud_first),
        )?;
        let module = crate::types::pickle_bridge(py)?;
        let out = module
            .getattr(pyo3::intern!(py, "dump"))?
            .call1((obj, &sink, cloud_first))?;
        let out = out.cast::<PyTuple>()?;
        let data = out.get_item(0)?.cast_into::<PyBytes>()?;
        let cloud: bool = out.get_item(1)?.extract()?;
        let (mut state, externals, buffers, _) = sink.borrow().take();
        state.needs_pickle = true;
        let mut versions = pickle_versions(py, cloud)?;
        library_versions(py, &state.tags, &mut versions)?;
        let mut w = TreeWriter::new();
        let bytes = data.as_bytes();
        if bytes.len() >= FRAME_MIN {
            let (ptr, len) = (bytes.as_ptr() as usize, bytes.len());
            let index = state
                .add_frame(FrameSource::Object {
                    obj: data.clone().into_any().unbind(),
                    ptr,
                    len,
                })
                .map_err(|e| match e {
                    EncodeError::Py(err) => err,
                    EncodeError::Unsupported => SerializationError::new_err("too many frames"),
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

    fn options(
        &self,
        allow_pickle: Option<bool>,
        zero_copy: Option<bool>,
        verify: Option<bool>,
        key: Option<&Bound<'_, PyAny>>,
        max_size: Option<u64>,
    ) -> PyResult<Options> {
        let zero_copy = zero_copy.unwrap_or(self.zero_copy);
        Ok(Options {
            allow_pickle: allow_pickle.unwrap_or(self.allow_pickle),
            zero_copy,
            // Verifying reads every byte: a zero-copy load skips it unless asked, so that it stays
            // constant-time.
            verify: verify.or(self.verify).unwrap_or(!zero_copy),
            keys: match key {
                Some(key) => options::keys(key)?,
                None => self.keys.clone(),
            },
            max_size: max_size.unwrap_or(self.max_size),
        })
    }

    /// Frames as they will be stored, after the call's (or the codec's) compression policy.
    fn store(
        &self,
        py: Python<'_>,
        encoded: &Encoded,
        compression: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Stored>> {
        let policy = match compression {
            Some(obj) => options::compression(obj)?,
            None => self.compression,
        };
        let sources = encoded.frame_slices();
        let itemsizes = &encoded.state.itemsizes;
        if policy == Compression::None {
            return Ok(crate::compression::apply(policy, &sources, itemsizes));
        }
        let total: usize = sources.iter().map(|s| s.len()).sum();
        Ok(maybe_detach(py, total, || {
            crate::compression::apply(policy, &sources, itemsizes)
        }))
    }

    fn signing_key(&self, key: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<u8>>> {
        Ok(match key {
            Some(key) => options::keys(key)?.into_iter().next(),
            None => self.keys.first().cloned(),
        })
    }
}

/// Lets the frame copies run on another thread while the GIL is released.
struct SendPtr<T: ?Sized>(*mut T);
unsafe impl<T: ?Sized> Send for SendPtr<T> {}
impl<T: ?Sized> SendPtr<T> {
    // A method (not a field access) so that closures capture the whole Send wrapper.
    fn get(&self) -> *mut T {
        self.0
    }
}

#[pymethods]
impl Codec {
    #[new]
    #[pyo3(signature = (types, registry, *, allow_pickle=true, zero_copy=false, verify=None, checksum=true, compression=None, key=None, max_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        types: Bound<'_, PyDict>,
        registry: Bound<'_, PyAny>,
        allow_pickle: bool,
        zero_copy: bool,
        verify: Option<bool>,
        checksum: bool,
        compression: Option<Bound<'_, PyAny>>,
        key: Option<Bound<'_, PyAny>>,
        max_size: Option<u64>,
    ) -> PyResult<Self> {
        let _ = types; // the registry's own view; kept in the signature for compatibility
        Ok(Self {
            dispatch: DispatchRefs::new(&registry)?,
            allow_pickle,
            zero_copy,
            verify,
            checksum,
            compression: match &compression {
                Some(obj) => options::compression(obj)?,
                None => Compression::None,
            },
            keys: match &key {
                Some(obj) => options::keys(obj)?,
                None => Vec::new(),
            },
            max_size: max_size.unwrap_or(options::DEFAULT_MAX_SIZE),
        })
    }

    /// Serializes `obj` to one `bytes` object (each frame copied exactly once, or compressed).
    #[pyo3(signature = (obj, /, *, checksum=None, compression=None, key=None))]
    fn dumps<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
        checksum: Option<bool>,
        compression: Option<&Bound<'py, PyAny>>,
        key: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let encoded = self.encode(py, obj)?;
        let stored = self.store(py, &encoded, compression)?;
        let key = self.signing_key(key)?;
        let layouts = stored.iter().map(|s| s.layout).collect();
        let spec = encoded.spec(layouts, checksum.unwrap_or(self.checksum), key.is_some());
        let mut writer = EnvelopeWriter::new(&spec);
        let total = writer.total_len();
        // SAFETY: write_contiguous (and sign_contiguous) write all `total` bytes before `bytes`
        // is returned.
        let (bytes, out) = unsafe { uninit_bytes(py, total)? };
        let sources = encoded.frame_slices();
        let frames: Vec<&[u8]> = stored
            .iter()
            .zip(&sources)
            .map(|(s, &source)| s.data.as_deref().unwrap_or(source))
            .collect();
        let frame_bytes: usize = frames.iter().map(|f| f.len()).sum();
        let out = SendPtr(out as *mut [u8]);
        let frames_ptr = SendPtr(&frames as *const Vec<&[u8]> as *mut Vec<&[u8]>);
        let writer_ptr = SendPtr(&mut writer as *mut EnvelopeWriter);
        let key = key.as_deref();
        maybe_detach(
            py,
            frame_bytes.max(if key.is_some() { total } else { 0 }),
            move || {
                // SAFETY: `out` is the fresh bytes object's buffer, exclusively ours until returned;
                // the frame sources are kept alive (and pinned by their exports) by `encoded`.
                let (out, frames, writer) =
                    unsafe { (&mut *out.get(), &*frames_ptr.get(), &mut *writer_ptr.get()) };
                writer.write_contiguous(out, frames)?;
                if let Some(key) = key {
                    writer.sign_contiguous(out, key);
                }
                Ok::<(), freight_core::Error>(())
            },
        )
        .map_err(|e| SerializationError::new_err(e.to_string()))?;
        Ok(bytes)
    }

    /// Serializes `obj` to a list of buffers: the header, then each frame (a zero-copy view of
    /// the original memory unless compressed), then the signature when signed. No checksums by
    /// default (computing them reads every byte).
    #[pyo3(signature = (obj, /, *, checksum=false, compression=None, key=None))]
    fn dumps_frames<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
        checksum: bool,
        compression: Option<&Bound<'py, PyAny>>,
        key: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let encoded = self.encode(py, obj)?;
        let stored = self.store(py, &encoded, compression)?;
        let key = self.signing_key(key)?;
        let layouts = stored.iter().map(|s| s.layout).collect();
        let spec = encoded.spec(layouts, checksum, key.is_some());
        let mut writer = EnvelopeWriter::new(&spec);
        let sources = encoded.frame_slices();
        if checksum {
            for (i, (s, &source)) in stored.iter().zip(&sources).enumerate() {
                let data = s.data.as_deref().unwrap_or(source);
                let block = writer.block_checksum(i);
                let sum = maybe_detach(py, data.len(), || {
                    freight_core::checksum::frame_checksum(data, block)
                });
                writer.set_frame_checksum(i, sum);
            }
        }
        // SAFETY: write_header writes all header_len() bytes before the list is returned.
        let (header, header_out) = unsafe { uninit_bytes(py, writer.header_len())? };
        writer.write_header(header_out);
        let out = PyList::empty(py);
        let mut signed_parts: Vec<&[u8]> = vec![header.as_bytes()];
        out.append(&header)?;
        for ((s, frame), &source) in stored.iter().zip(&encoded.state.frames).zip(&sources) {
            match &s.data {
                Some(data) => out.append(PyBytes::new(py, data))?,
                None => out.append(frame_memoryview(
                    py,
                    FrameBuffer::new(frame.owner(py), source.as_ptr(), source.len(), true),
                )?)?,
            }
            signed_parts.push(s.data.as_deref().unwrap_or(source));
        }
        if let Some(key) = key {
            let total: usize = signed_parts.iter().map(|p| p.len()).sum();
            let signature =
                maybe_detach(py, total, || freight_core::sign::sign(&key, &signed_parts));
            out.append(PyBytes::new(py, &signature))?;
        }
        Ok(out)
    }

    /// Deserializes a payload from any buffer.
    #[pyo3(signature = (data, /, *, allow_pickle=None, zero_copy=None, verify=None, key=None, max_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn loads<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        allow_pickle: Option<bool>,
        zero_copy: Option<bool>,
        verify: Option<bool>,
        key: Option<&Bound<'py, PyAny>>,
        max_size: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let opts = self.options(allow_pickle, zero_copy, verify, key, max_size)?;
        let ctx = DecodeCtx::contiguous(py, data, self.dispatch.registry(py), opts)?;
        decode(py, ctx)
    }

    /// Deserializes a payload given as a list of buffers (the output of `dumps_frames`).
    #[pyo3(signature = (frames, /, *, allow_pickle=None, zero_copy=None, verify=None, key=None, max_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn loads_frames<'py>(
        &self,
        py: Python<'py>,
        frames: &Bound<'py, PyAny>,
        allow_pickle: Option<bool>,
        zero_copy: Option<bool>,
        verify: Option<bool>,
        key: Option<&Bound<'py, PyAny>>,
        max_size: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let opts = self.options(allow_pickle, zero_copy, verify, key, max_size)?;
        let list = match frames.cast::<PyList>() {
            Ok(list) => list.clone(),
            Err(_) => frames
                .try_iter()
                .and_then(|items| PyList::new(py, items.collect::<PyResult<Vec<_>>>()?))
                .map_err(|err| {
                    let new =
                        crate::errors::DeserializationError::new_err(format!(
                        "loads_frames needs a list of buffers (the output of dumps_frames), not {}",
                        frames.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                    ));
                    new.set_cause(py, Some(err));
                    new
                })?,
        };
        let ctx = DecodeCtx::from_frames(py, &list, self.dispatch.registry(py), opts)?;
        decode(py, ctx)
    }
}
