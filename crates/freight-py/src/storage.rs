//! `NativeStore`: freight-store's `Store` for Python, every call with the GIL released.
//! `freight.storage.Store` (Python) encodes with a `Freight` and hands the frames here: they
//! are written as one `dumps`-layout payload (header, padding, frames, signature) streamed from
//! the original buffers, never assembled in memory. Loads return a `StoredBuffer` (the bytes,
//! or a read-only map of a local file) that `loads` views without a copy.

use std::ffi::c_int;
use std::sync::Arc;
use std::time::Duration;

use freight_core::envelope::{self, Limits};
use freight_store::{no_progress, Options, Store, Stored};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::buffer::{fill_buffer, RawBuffer};
use crate::errors::{Error, Result};
use crate::inspect::describe;
use crate::payload_parts::PayloadParts;

#[pyclass(module = "freight._freight", frozen)]
pub struct NativeStore {
    store: Arc<Store>,
}

/// A stored value's bytes, owned by Rust, exposed read-only through the buffer protocol.
#[pyclass(module = "freight._freight", frozen)]
pub struct StoredBuffer {
    stored: Stored,
    mapped: bool,
}

#[pymethods]
impl StoredBuffer {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        // SAFETY: the stored bytes live (unmoved, never written) as long as `slf`.
        unsafe {
            fill_buffer(
                slf.as_any(),
                view,
                flags,
                slf.get().stored.as_ref(),
                true,
                "a stored value is read-only",
            )
        }
    }

    fn __len__(&self) -> usize {
        self.stored.as_ref().len()
    }

    /// Whether the bytes are a memory map of the stored file.
    #[getter]
    fn mapped(&self) -> bool {
        self.mapped
    }
}

/// A Python callable `progress(done_bytes, total_bytes)` as a Rust progress callback: it takes
/// the GIL for each report (every 8 MiB or so), and its errors are ignored (a progress display
/// must not fail a save).
fn python_progress(callback: &Option<Py<PyAny>>) -> impl Fn(u64, u64) + Sync + '_ {
    move |done, total| {
        if let Some(callback) = callback {
            Python::attach(|py| {
                let _ = callback.call1(py, (done, total));
            });
        }
    }
}

impl NativeStore {
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Store) -> freight_store::Result<T> + Send,
    ) -> Result<T> {
        let store = &self.store;
        Ok(py.detach(|| f(store))?)
    }
}

#[pymethods]
impl NativeStore {
    #[new]
    #[pyo3(signature = (url, *, endpoint_url=None, region=None, access_key_id=None, secret_access_key=None, session_token=None, allow_http=None, max_retries=None, timeout=None, connect_timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        url: &str,
        endpoint_url: Option<String>,
        region: Option<String>,
        access_key_id: Option<String>,
        secret_access_key: Option<String>,
        session_token: Option<String>,
        allow_http: Option<bool>,
        max_retries: Option<usize>,
        timeout: Option<f64>,
        connect_timeout: Option<f64>,
    ) -> PyResult<Self> {
        let options = Options {
            endpoint_url,
            region,
            access_key_id,
            secret_access_key,
            session_token,
            allow_http,
            max_retries,
            timeout: timeout.map(|s| seconds("timeout", s)).transpose()?,
            connect_timeout: connect_timeout
                .map(|s| seconds("connect_timeout", s))
                .transpose()?,
        };
        let store = py
            .detach(|| Store::open(url, &options))
            .map_err(Error::from)?;
        Ok(Self {
            store: Arc::new(store),
        })
    }

    #[getter]
    fn url(&self) -> &str {
        self.store.url()
    }

    /// "file", "memory" or "s3".
    #[getter]
    fn backend(&self) -> &'static str {
        self.store_backend()
    }

    /// Writes a payload encoded by `Codec.dumps_parts` (the `dumps` layout, streamed from the
    /// objects' memory: one part or a multipart upload, atomically).
    #[pyo3(signature = (key, payload, if_absent=false, progress=None))]
    fn put_parts(
        &self,
        py: Python<'_>,
        key: &str,
        payload: PyRef<'_, PayloadParts>,
        if_absent: bool,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let slices = payload.slices();
        let report = python_progress(&progress);
        self.run(py, |store| store.put(key, &slices, if_absent, &report))?;
        Ok(())
    }

    /// Writes the concatenation of `parts` as it is (side objects of persistent serializers,
    /// zarr chunks, payloads copied byte for byte), atomically.
    #[pyo3(signature = (key, parts, if_absent=false))]
    fn put_bytes(
        &self,
        py: Python<'_>,
        key: &str,
        parts: &Bound<'_, PyList>,
        if_absent: bool,
    ) -> PyResult<()> {
        let buffers = parts
            .iter()
            .map(|p| RawBuffer::simple(&p))
            .collect::<PyResult<Vec<_>>>()?;
        let slices: Vec<&[u8]> = buffers.iter().map(RawBuffer::as_slice).collect();
        self.run(py, |store| store.put(key, &slices, if_absent, &no_progress))?;
        Ok(())
    }

    /// Bytes `start..end` of a value (clipped to its end), as `bytes`.
    fn get_range<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        start: u64,
        end: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.run(py, |store| store.get_range(key, start..end))?;
        Ok(PyBytes::new(py, &data))
    }

    /// Bytes of several ranges of one version of a value (`etag`, from `head`): one `bytes` per
    /// range; a value replaced since `head` is refused, never mixed (a lazy reader's frames).
    #[pyo3(signature = (key, ranges, etag=None))]
    fn get_ranges<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        ranges: Vec<(u64, u64)>,
        etag: Option<String>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let ranges: Vec<std::ops::Range<u64>> = ranges.into_iter().map(|(a, b)| a..b).collect();
        let got = self.run(py, |store| store.get_ranges(key, &ranges, etag.as_deref()))?;
        Ok(got.iter().map(|b| PyBytes::new(py, b)).collect())
    }

    /// Reads several ranges of one version of a value (as `get_ranges`) into `buffer`, a
    /// writable buffer of the value's length, each at its offset in the value: copied from the
    /// network into place, with no `bytes` per range (a lazy reader's frames).
    #[pyo3(signature = (key, ranges, etag, buffer))]
    fn get_ranges_into(
        &self,
        py: Python<'_>,
        key: &str,
        ranges: Vec<(u64, u64)>,
        etag: Option<String>,
        buffer: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let ranges: Vec<std::ops::Range<u64>> = ranges.into_iter().map(|(a, b)| a..b).collect();
        let target = RawBuffer::get(buffer, ffi::PyBUF_WRITABLE)?;
        // SAFETY: a writable export, held (so neither freed nor resized) until the call ends;
        // nothing else writes it meanwhile: the caller waits, detached, for the call.
        let dest = unsafe { target.as_mut_slice() };
        self.run(py, |store| {
            store.get_ranges_into(key, &ranges, etag.as_deref(), dest)
        })?;
        Ok(())
    }

    /// (first `length` bytes, size, modified, etag) of a value, from one ranged read (a lazy
    /// reader's header and the version it pins).
    fn get_head<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        length: u64,
    ) -> PyResult<(Bound<'py, PyBytes>, u64, f64, Option<String>)> {
        let (bytes, meta) = self.run(py, |store| store.get_head(key, length))?;
        Ok((
            PyBytes::new(py, &bytes),
            meta.size,
            meta.modified,
            meta.etag,
        ))
    }

    /// The whole value (read into memory, or mapped when it is a large local file).
    #[pyo3(signature = (key, progress=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &str,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<StoredBuffer> {
        let report = python_progress(&progress);
        let stored = self.run(py, |store| store.get(key, &report))?;
        let mapped = matches!(stored, Stored::Mapped(_));
        Ok(StoredBuffer { stored, mapped })
    }

    /// A read-only memory map of a value of a local folder store.
    fn map(&self, py: Python<'_>, key: &str) -> PyResult<StoredBuffer> {
        let stored = self.run(py, |store| store.map(key))?;
        Ok(StoredBuffer {
            stored,
            mapped: true,
        })
    }

    /// (size, modified, etag) of a value; KeyNotFoundError if there is none.
    fn head(&self, py: Python<'_>, key: &str) -> PyResult<(u64, f64, Option<String>)> {
        let meta = self.run(py, |store| store.head(key))?;
        Ok((meta.size, meta.modified, meta.etag))
    }

    /// The backend's name for `key` (its percent-encoded object path under the store's
    /// prefix), as freight-store's `keys` writes it.
    fn object_path(&self, key: &str) -> PyResult<String> {
        Ok(self.store.object_path(key).map_err(Error::from)?)
    }

    /// The file of `key` in a local folder store (whether it exists or not); None elsewhere.
    fn local_path(&self, key: &str) -> PyResult<Option<std::path::PathBuf>> {
        Ok(self.store.local_path(key).map_err(Error::from)?)
    }

    fn exists(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        Ok(self.run(py, |store| store.exists(key))?)
    }

    fn delete(&self, py: Python<'_>, key: &str) -> PyResult<()> {
        Ok(self.run(py, |store| store.delete(key))?)
    }

    /// [(key, size, modified, etag)] of the objects whose keys start with `prefix`, sorted by
    /// key.
    #[pyo3(signature = (prefix=""))]
    #[allow(clippy::type_complexity)]
    fn list(
        &self,
        py: Python<'_>,
        prefix: &str,
    ) -> PyResult<Vec<(String, u64, f64, Option<String>)>> {
        let metas = self.run(py, |store| store.list(prefix))?;
        Ok(metas
            .into_iter()
            .map(|m| (m.key, m.size, m.modified, m.etag))
            .collect())
    }

    fn delete_prefix(&self, py: Python<'_>, prefix: &str) -> PyResult<usize> {
        Ok(self.run(py, |store| store.delete_prefix(prefix))?)
    }

    /// What a value's header says, described as `inspect` describes a payload (frames have no
    /// offset and no checksum status: their bytes are not read), with its `key`, `size`,
    /// `modified` and `etag`, from a ranged read of its first bytes.
    fn info<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyDict>> {
        let mut want: u64 = 64 << 10;
        let (bytes, meta, header) = loop {
            let (bytes, meta) = self.run(py, |store| store.get_head(key, want))?;
            match envelope::parse_header(&bytes, &Limits::default()) {
                Ok(header) => break (bytes, meta, header),
                Err(freight_core::Error::Truncated { .. }) if want < meta.size => {
                    want = meta.size.min(want * 64);
                }
                Err(err) => return Err(Error::from(err).into()),
            }
        };
        let out = describe(py, &header, &bytes[header.tree.clone()], meta.size, &[])?;
        out.set_item("key", key)?;
        out.set_item("size", meta.size)?;
        out.set_item("modified", meta.modified)?;
        out.set_item("etag", meta.etag)?;
        out.set_item("signature_ok", None::<bool>)?;
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!("<freight NativeStore {}>", self.store.url())
    }
}

impl NativeStore {
    fn store_backend(&self) -> &'static str {
        self.store.backend_name()
    }
}

/// A timeout option in seconds: a finite number above 0 (`Duration::from_secs_f64` would panic
/// on a negative, infinite or NaN value).
fn seconds(name: &str, value: f64) -> Result<Duration> {
    match Duration::try_from_secs_f64(value) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(Error::option(format!(
            "{name}= takes a number of seconds above 0 (e.g. 30.0); got {value}"
        ))),
    }
}
