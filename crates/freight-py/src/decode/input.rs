//! A payload being decoded: the exported input buffer(s), opened by freight-core's
//! `Payload::open` (which owns every check of the bytes), the resolved serializer entries, and
//! Python views of its frames.

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

use freight_core::envelope::Limits;
use freight_core::{Frame, Frames, OpenOptions, Parts, Payload};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyList, PyTuple};

use crate::buffer::{frame_memoryview, maybe_detach, FrameBuffer, Owner, RawBuffer};
use crate::encode::dispatch::DispatchRefs;
use crate::errors::{Error, Result};

/// An exported input buffer, shared by the payload and every view of it.
#[derive(Clone)]
pub struct Input(pub Arc<RawBuffer>);

impl AsRef<[u8]> for Input {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self.0.as_slice()
    }
}

/// How a payload is decoded (a call's arguments over the codec's defaults).
pub struct DecodeOptions {
    pub allow_pickle: bool,
    pub zero_copy: bool,
    /// Nothing decoded may refer to the input after the call (a receive buffer about to be
    /// reused): every frame is copied out, views included.
    pub copy: bool,
    pub verify: bool,
    /// Keys a signature is checked against (any of them); empty: signatures are not required.
    pub keys: Vec<Vec<u8>>,
    /// Largest raw frame accepted (checked before anything is allocated for it).
    pub max_size: u64,
    /// When set, the only serializer tags (and "pickle", for pickle nodes) a payload may use.
    pub allowed_tags: Option<Vec<String>>,
    /// Producer versions that differ where it matters raise instead of warning.
    pub strict_versions: bool,
}

impl DecodeOptions {
    fn open_options(&self) -> OpenOptions<'_> {
        OpenOptions {
            keys: &self.keys,
            limits: Limits {
                max_frame: self.max_size,
                ..Limits::default()
            },
            verify: self.verify,
        }
    }
}

/// Exports one input buffer: writable when its exporter says so. A plain request tells that
/// already (the exporter fills `readonly`), so the writable request tried first before cost a
/// raised and discarded BufferError for every read-only frame: ~4k instructions each, a fifth of
/// a small Arrow table's zero-copy load.
pub fn export_input(obj: &Bound<'_, PyAny>) -> Result<Input> {
    RawBuffer::simple(obj)
        .map(|buf| Input(Arc::new(buf)))
        .map_err(|cause| Error::Decode {
            msg: format!(
                "freight can only load from a buffer (bytes, bytearray, memoryview, mmap, ...), not {}",
                type_name(obj)
            ),
            cause: Some(cause),
        })
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// A payload as Python hands it over: one buffer (`dumps` output), or a list or tuple of
/// buffers (`dumps_frames` output) when `split` is allowed.
pub fn export_parts(obj: &Bound<'_, PyAny>, split: bool) -> Result<Parts<Input>> {
    if split && (obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>()) {
        let parts = obj
            .try_iter()?
            .map(|part| export_input(&part?))
            .collect::<Result<Vec<_>>>()?;
        return Ok(Parts::Split(parts));
    }
    Ok(Parts::Single(export_input(obj)?))
}

/// The parts of `loads_frames`' argument: any iterable of buffers.
pub fn export_frame_list(obj: &Bound<'_, PyAny>) -> Result<Parts<Input>> {
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        return export_parts(obj, true);
    }
    let iter = obj.try_iter().map_err(|_| {
        Error::decode(format!(
            "loads_frames needs a list of buffers (the output of dumps_frames), not {}",
            type_name(obj)
        ))
    })?;
    let parts = iter
        .map(|part| export_input(&part?))
        .collect::<Result<Vec<_>>>()?;
    Ok(Parts::Split(parts))
}

/// Opens `parts`, with the interpreter released when a signature check reads many bytes.
pub fn open(py: Python<'_>, parts: Parts<Input>, opts: &OpenOptions<'_>) -> Result<Payload<Input>> {
    let signed_bytes = if opts.keys.is_empty() {
        0
    } else {
        match &parts {
            Parts::Single(buf) => buf.as_ref().len(),
            Parts::Split(parts) => parts.iter().map(|p| p.as_ref().len()).sum(),
        }
    };
    Ok(maybe_detach(py, signed_bytes, || {
        Payload::open(parts, opts)
    })?)
}

/// Everything a decode needs, owned, so that the pickle bridge can hold it while pickle runs.
pub struct DecodeCtx {
    pub(crate) payload: Payload<Input>,
    pub(crate) entries: Vec<Py<PyAny>>,
    pub opts: DecodeOptions,
}

fn unsafe_serializer(tag: &str) -> Error {
    Error::Unsafe(format!(
        "the payload uses serializer {tag:?}, which is marked unsafe (its decoding can run arbitrary \
         code), and allow_pickle=False refuses that; load it with allow_pickle=True only if you trust \
         its source, or register the serializer with safe=True if its decoding runs no such code"
    ))
}

/// The registry entry of each tag the payload lists, refusing the payload before anything is
/// decoded when it needs pickle (or an unsafe serializer) and `allow_pickle` is off.
fn resolve_tags(
    py: Python<'_>,
    payload: &Payload<Input>,
    registry: &DispatchRefs,
    opts: &DecodeOptions,
) -> Result<Vec<Py<PyAny>>> {
    let header = payload.header();
    if let Some(allowed) = &opts.allowed_tags {
        check_allowed_tags(payload, allowed)?;
    }
    let safe = |entry: &Bound<'_, PyAny>| -> PyResult<bool> {
        entry.getattr(pyo3::intern!(py, "safe"))?.extract()
    };
    if header.needs_pickle() && !opts.allow_pickle {
        // Name the unsafe serializer when that is the reason (lookups that fail are ignored here:
        // the payload is refused either way).
        let unsafe_tag = header.tags.iter().find(|tag| {
            registry
                .by_tag(py, tag)
                .and_then(|entry| safe(&entry))
                .is_ok_and(|safe| !safe)
        });
        return Err(match unsafe_tag {
            Some(tag) => unsafe_serializer(tag),
            None => Error::Unsafe(
                "the payload needs pickle to load (it holds objects freight encodes with pickle), and \
                 allow_pickle=False refuses that; load it with allow_pickle=True only if you trust its source"
                    .to_owned(),
            ),
        });
    }
    let mut entries = Vec::with_capacity(header.tags.len());
    for tag in &header.tags {
        let entry = registry.by_tag(py, tag)?;
        if !opts.allow_pickle && !safe(&entry)? {
            return Err(unsafe_serializer(tag));
        }
        entries.push(entry.unbind());
    }
    Ok(entries)
}

/// The tag of freight's node for a function made at run time (freight._functions.TAG).
const FUNCTION_TAG: &str = "builtins.function";

/// Whether `allowed` lets `tag` through: listed, or the function node where "pickle" is listed
/// (a function that was a pickle island before that node existed still loads where pickle may).
fn allows(allowed: &[String], tag: &str) -> bool {
    allowed
        .iter()
        .any(|a| a == tag || (tag == FUNCTION_TAG && a == "pickle"))
}

/// Refuses a payload that uses a serializer tag (or pickle nodes, as the tag "pickle") outside
/// `allowed`, from the header and a walk of the tree, before anything is decoded.
fn check_allowed_tags(payload: &Payload<Input>, allowed: &[String]) -> Result<()> {
    let listed = |tag: &str| allows(allowed, tag);
    let refuse = |tag: &str| {
        Error::Unsafe(format!(
            "the payload uses {tag:?}, which allowed_tags does not list (it allows {allowed:?}); \
             add it to allowed_tags only if you trust what that serializer decodes"
        ))
    };
    if let Some(tag) = payload.header().tags.iter().find(|t| !listed(t)) {
        return Err(refuse(tag));
    }
    if payload.header().needs_pickle() && !listed("pickle") && payload.walk()?.pickle_nodes > 0 {
        return Err(refuse("pickle"));
    }
    Ok(())
}

/// The producer-version policy (python/freight/_versions.py): a warning, or an error when
/// strict. Payloads written by the versions this process runs (nearly all of them: numpy arrays
/// record numpy's) are told apart in Rust, without a Python call.
fn check_versions(py: Python<'_>, payload: &Payload<Input>, strict: bool) -> Result<()> {
    let versions = &payload.header().versions;
    let current = versions
        .iter()
        .all(|(name, version)| is_current(py, name, version));
    // _versions keeps the last checked payload's versions for error messages: once a payload
    // from other versions was checked, the next one is checked too (which replaces them).
    thread_local!(static OTHER_VERSIONS_SEEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
    if current && !OTHER_VERSIONS_SEEN.with(|seen| seen.replace(false)) {
        return Ok(());
    }
    if !current {
        OTHER_VERSIONS_SEEN.with(|seen| seen.set(true));
    }
    static CHECK: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let check = CHECK.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py.import("freight._versions")?.getattr("check")?.unbind())
    })?;
    check.bind(py).call1((versions.clone(), strict))?;
    Ok(())
}

/// Whether `name` `version` is what this process runs (Python's minor version for "python"; a
/// library's `__version__` once it is imported). Versions cannot change in a process: cached.
fn is_current(py: Python<'_>, name: &str, version: &str) -> bool {
    thread_local!(static KNOWN: std::cell::RefCell<Vec<(String, String)>> = const { std::cell::RefCell::new(Vec::new()) });
    if let Some(known) = KNOWN.with(|k| {
        k.borrow()
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v == version)
    }) {
        return known;
    }
    let here = if name == "python" {
        let v = py.version_info();
        Some(format!("{}.{}", v.major, v.minor))
    } else {
        py.import("sys")
            .and_then(|sys| sys.getattr("modules"))
            .and_then(|modules| modules.get_item(name))
            .and_then(|module| module.getattr("__version__"))
            .and_then(|v| v.extract::<String>())
            .ok()
    };
    match here {
        Some(here) => {
            let same = here == version;
            KNOWN.with(|k| k.borrow_mut().push((name.to_owned(), here)));
            same
        }
        None => false, // not imported yet: the Python check decides (and imports nothing)
    }
}

impl DecodeCtx {
    /// Opens a payload and resolves its tags: everything that can refuse it before any node is
    /// decoded. Shared (`Rc`) with the pickle bridge's source while pickle runs.
    #[inline]
    pub fn new(
        py: Python<'_>,
        parts: Parts<Input>,
        registry: &DispatchRefs,
        opts: DecodeOptions,
    ) -> Result<Rc<Self>> {
        let payload = open(py, parts, &opts.open_options())?;
        let entries = resolve_tags(py, &payload, registry, &opts)?;
        if !payload.header().versions.is_empty() {
            check_versions(py, &payload, opts.strict_versions)?;
        }
        Ok(Rc::new(Self {
            payload,
            entries,
            opts,
        }))
    }

    pub fn tree(&self) -> &[u8] {
        self.payload.tree()
    }

    /// The safe-loading options judged on one node (a lazy read's entry) rather than on the
    /// payload (returns the frames the node uses): its serializer tags and pickle nodes, from a walk of the node. The context was
    /// opened without them (`allow_pickle` on, no `allowed_tags`), so that the other entries of
    /// a payload do not refuse this one.
    pub fn check_node(
        &self,
        py: Python<'_>,
        node: std::ops::Range<usize>,
        memo_base: u64,
        allow_pickle: bool,
        allowed: Option<&[String]>,
    ) -> Result<Vec<u32>> {
        let header = self.payload.header();
        let (span, summary) = freight_core::walk::walk_node(
            self.tree(),
            node,
            memo_base,
            header.frames.len() as u32,
            header.tags.len() as u32,
        )?;
        let listed = |tag: &str| allowed.is_none_or(|a| allows(a, tag));
        let refuse = |tag: &str| {
            Error::Unsafe(format!(
                "the entry uses {tag:?}, which allowed_tags does not list (it allows {allowed:?}); \
                 add it to allowed_tags only if you trust what that serializer decodes"
            ))
        };
        for &index in &summary.ext_tags {
            let tag = header.tags[index as usize].as_str();
            if !listed(tag) {
                return Err(refuse(tag));
            }
            let entry = self.entries[index as usize].bind(py);
            if !allow_pickle
                && !entry
                    .getattr(pyo3::intern!(py, "safe"))?
                    .extract::<bool>()?
            {
                return Err(unsafe_serializer(tag));
            }
        }
        if summary.pickle_nodes > 0 {
            if !listed("pickle") {
                return Err(refuse("pickle"));
            }
            if !allow_pickle {
                return Err(Error::Unsafe(
                    "the entry needs pickle to load (it holds objects freight encodes with pickle), and \
                     allow_pickle=False refuses that; load it with allow_pickle=True only if you trust its source"
                        .to_owned(),
                ));
            }
        }
        Ok(span.frames)
    }

    /// "python 3.11, cloudpickle 3.1": what wrote the payload, for error messages.
    pub fn producer(&self) -> Option<String> {
        let versions = &self.payload.header().versions;
        if versions.is_empty() {
            return None;
        }
        // Without format!: every pickle node's load asks for it (for its error messages).
        let mut text = String::with_capacity(48);
        for (i, (name, version)) in versions.iter().enumerate() {
            if i > 0 {
                text.push_str(", ");
            }
            text.push_str(name);
            text.push(' ');
            text.push_str(version);
        }
        Some(text)
    }

    pub(crate) fn frames(&self) -> &Frames<Input> {
        self.payload.frames()
    }

    /// Verifies a serializer's frames together (on all cores when large), before they are viewed.
    pub(crate) fn verify_frames(&self, py: Python<'_>, indices: &[u32]) -> Result<()> {
        let frames = self.frames();
        let total: usize = indices
            .iter()
            .filter_map(|&i| frames.get(i).ok())
            .map(|f| f.stored().len())
            .sum();
        Ok(maybe_detach(py, total, || frames.verify_many(indices))?)
    }

    /// Frame `index`, to look at (length, writability) before using it.
    pub(crate) fn peek(&self, index: u32) -> Result<&Frame<Input>> {
        Ok(self.frames().get(index)?)
    }

    /// The verified raw bytes of a frame: borrowed from the input, or decompressed.
    pub fn frame_raw(&self, py: Python<'_>, index: u32) -> Result<Cow<'_, [u8]>> {
        let n = self.peek(index)?.raw_len();
        let frames = self.frames();
        Ok(maybe_detach(py, n, || frames.raw(index))?)
    }

    /// Whether a view of this frame may be writable.
    pub(crate) fn writable(&self, frame: &Frame<Input>) -> bool {
        !self.opts.zero_copy && !frame.owner().0.readonly()
    }

    /// A memoryview of a frame (verified), writable when the input is and zero_copy is off. A
    /// compressed frame is decompressed into a new (writable) bytearray, and with `copy` every
    /// frame is copied into one.
    pub fn frame_view<'py>(
        &self,
        py: Python<'py>,
        index: u32,
        want_writable: bool,
    ) -> Result<Bound<'py, PyAny>> {
        let frame = self.peek(index)?;
        if frame.compressed() || self.opts.copy {
            let out = PyByteArray::new(py, &[]);
            out.resize(frame.raw_len())?;
            // SAFETY: a fresh bytearray nobody else references.
            self.copy_frame(py, index, unsafe { out.as_bytes_mut() })?;
            return Ok(crate::buffer::memoryview(out.as_any())?);
        }
        let frames = self.frames();
        let frame = maybe_detach(py, frame.stored().len(), || frames.view(index))?;
        let writable = want_writable && self.writable(frame);
        let data = frame.stored();
        Ok(frame_memoryview(
            py,
            FrameBuffer::new(
                Owner::Buffer(frame.owner().0.clone()),
                data.as_ptr(),
                data.len(),
                !writable,
            ),
        )?)
    }

    /// Copies (or decompresses) a frame into `dst` (exactly its raw length), verifying its
    /// checksum in the same pass.
    pub(crate) fn copy_frame(&self, py: Python<'_>, index: u32, dst: &mut [u8]) -> Result<()> {
        let frames = self.frames();
        Ok(maybe_detach(py, dst.len(), || {
            frames.copy_into(index, dst)
        })?)
    }

    /// Verifies the frames no node used, so that a change anywhere in the payload is caught.
    /// A signed payload that runs pickle has its frames (these, or all) authenticated before any
    /// node is decoded: frames are otherwise checked as they are used, and a pickle earlier in
    /// the tree would run before a tampered frame after it is refused.
    pub fn verify_before_pickle(&self, py: Python<'_>, indices: Option<&[u32]>) -> Result<()> {
        let header = self.payload.header();
        if self.opts.keys.is_empty() || !header.head_signed() || !header.needs_pickle() {
            return Ok(());
        }
        let frames = self.frames();
        Ok(maybe_detach(
            py,
            frames.unverified_len(),
            || match indices {
                Some(indices) => frames.verify_these(indices),
                None => frames.verify_rest(),
            },
        )?)
    }

    pub fn verify_rest(&self, py: Python<'_>) -> Result<()> {
        let frames = self.frames();
        Ok(maybe_detach(py, frames.unverified_len(), || {
            frames.verify_rest()
        })?)
    }
}
