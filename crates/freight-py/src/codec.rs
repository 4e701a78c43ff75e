//! `Codec`: the configured entry points (`dumps`, `loads`, ...) that `freight.Freight` binds.
//! Two phases: while attached, walk the objects into a tree and a list of frames (encode/);
//! then lay the envelope out and copy the frames with the GIL released. Loading opens the
//! payload through freight-core and rebuilds the objects (decode/).

use freight_core::envelope::{EnvelopeSpec, EnvelopeWriter, TreeOnly};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::buffer::{frame_memoryview, maybe_detach, uninit_bytes, FrameBuffer, RawBuffer};
use crate::call_options::{CallOptions, Opt};
use crate::decode::input::{export_frame_list, export_input};
use crate::decode::tree::{Memo, TreeDecoder};
use crate::decode::{decode, decode_builtins, DecodeCtx, DecodeOptions};
use crate::encode::compression::{self, StoredFrame};
use crate::encode::dispatch::DispatchRefs;
use crate::encode::{encode, scalar, Encoded};
use crate::errors::{Error, Result};
use crate::options::{self, Compression};
use crate::payload_parts::PayloadParts;

/// The configured encoder and decoder: `freight.Freight` is its Python subclass, so that
/// `Freight.dumps` & co. are this class's methods themselves (no Python frame on the call path)
/// and `help()` shows their own signatures and docstrings. The methods are defined in
/// codec_methods.rs, which parses their options in one step (call_options.rs).
#[pyclass(module = "freight._freight", frozen, subclass)]
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
    allowed_tags: Option<Vec<String>>,
    strict_versions: bool,
}

/// What every writer of a payload starts from: the object encoded, its frames as they will be
/// stored (compressed or not), and the signing key.
struct Prepared {
    encoded: Encoded,
    stored: Vec<StoredFrame>,
    key: Option<Vec<u8>>,
}

impl Prepared {
    /// The envelope's description, with frame checksums when asked (compressed frames always).
    fn spec(&self, checksum: bool) -> EnvelopeSpec<'_> {
        let layouts = self.stored.iter().map(|s| s.layout).collect();
        self.encoded.spec(layouts, checksum, self.key.is_some())
    }

    /// Each frame's stored bytes: compressed, or the source as it is.
    fn frames(&self) -> Vec<&[u8]> {
        self.stored
            .iter()
            .zip(self.encoded.frame_slices())
            .map(|(s, source)| s.data.as_deref().unwrap_or(source))
            .collect()
    }
}

/// Seals the frames that carry a checksum or digests (interpreter released when they are large),
/// for layouts that are not written in one pass (`write_contiguous` hashes as it copies).
fn seal_frames(py: Python<'_>, writer: &mut EnvelopeWriter<'_>, frames: &[&[u8]]) {
    let sealed = writer.sealed_len();
    maybe_detach(py, sealed, || writer.seal_frames(frames));
}

impl Codec {
    /// A call's decode options over the codec's defaults.
    fn decode_options(&self, call: &CallOptions<'_, '_>) -> Result<DecodeOptions> {
        let allow_pickle = options::flag("allow_pickle", call.get(Opt::AllowPickle))?;
        let verify = options::flag("verify", call.get(Opt::Verify))?;
        let strict_versions = options::flag("strict_versions", call.get(Opt::StrictVersions))?;
        let zero_copy =
            options::flag("zero_copy", call.get(Opt::ZeroCopy))?.unwrap_or(self.zero_copy);
        let copy = options::flag("copy", call.get(Opt::Copy))?.unwrap_or(false);
        if copy && zero_copy {
            return Err(Error::option(
                "copy=True and zero_copy=True contradict each other: copy=True copies every array \
                 out of the input, zero_copy=True views it; pass one",
            ));
        }
        Ok(DecodeOptions {
            allow_pickle: allow_pickle.unwrap_or(self.allow_pickle),
            zero_copy,
            copy,
            // The reading contract's rule: zero-copy and mapped loads verify too, unless told not to.
            verify: verify
                .or(self.verify)
                .unwrap_or(freight_core::payload::VERIFY_BY_DEFAULT),
            keys: match call.get(Opt::Key) {
                Some(key) => options::keys(key)?,
                None => self.keys.clone(),
            },
            max_size: options::max_size_arg(call.get(Opt::MaxSize))?.unwrap_or(self.max_size),
            allowed_tags: match call.get(Opt::AllowedTags) {
                Some(obj) => options::allowed_tags(obj)?,
                None => self.allowed_tags.clone(),
            },
            strict_versions: strict_versions.unwrap_or(self.strict_versions),
        })
    }

    /// Frames as they will be stored, after the call's (or the codec's) compression policy.
    fn compress_frames(
        &self,
        py: Python<'_>,
        encoded: &Encoded,
        compression: Option<&Bound<'_, PyAny>>,
    ) -> Result<Vec<StoredFrame>> {
        let policy = match compression {
            Some(obj) => options::compression(obj)?,
            None => self.compression,
        };
        if encoded.state.frames.is_empty() {
            // Nothing to compress (most small values): the option is checked, nothing more.
            return Ok(Vec::new());
        }
        let sources = encoded.frame_slices();
        let itemsizes = &encoded.state.itemsizes;
        let total = match policy {
            Compression::None => 0,
            _ => sources.iter().map(|s| s.len()).sum(),
        };
        Ok(maybe_detach(py, total, || {
            compression::apply(policy, &sources, itemsizes)
        }))
    }

    /// Opens `parts` (the one reading path of both layouts) and decodes the object.
    fn decode_parts<'py>(
        &self,
        py: Python<'py>,
        parts: freight_core::Parts<crate::decode::input::Input>,
        opts: DecodeOptions,
    ) -> Result<Bound<'py, PyAny>> {
        let ctx = DecodeCtx::new(py, parts, &self.dispatch, opts)?;
        decode(py, ctx)
    }

    fn signing_key(&self, key: Option<&Bound<'_, PyAny>>) -> Result<Option<Vec<u8>>> {
        Ok(match key {
            Some(key) => options::keys(key)?.into_iter().next(),
            None => self.keys.first().cloned(),
        })
    }

    /// Encodes `obj` and compresses its frames, with the call's options (or the codec's).
    #[inline(always)]
    fn prepare(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        call: &CallOptions<'_, '_>,
    ) -> Result<Prepared> {
        let encoded = encode(py, &self.dispatch, obj)?;
        self.prepare_encoded(py, encoded, call)
    }

    /// `prepare` of an object already encoded: its frames compressed and the signing key found,
    /// with the call's options (or the codec's).
    #[inline(always)]
    fn prepare_encoded(
        &self,
        py: Python<'_>,
        encoded: Encoded,
        call: &CallOptions<'_, '_>,
    ) -> Result<Prepared> {
        let stored = self.compress_frames(py, &encoded, call.get(Opt::Compression))?;
        let key = self.signing_key(call.get(Opt::Key))?;
        Ok(Prepared {
            encoded,
            stored,
            key,
        })
    }

    /// Whether the call's payload carries frame checksums.
    fn checksum(&self, call: &CallOptions<'_, '_>) -> Result<bool> {
        Ok(options::flag("checksum", call.get(Opt::Checksum))?.unwrap_or(self.checksum))
    }

    /// The payload of a small root (a scalar, a few of them in a container), written without a
    /// walk (its header is the whole of it), when the call and the codec change nothing in it.
    #[inline(always)]
    fn small_root<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
        call: &CallOptions<'_, '_>,
    ) -> Option<Result<Bound<'py, PyBytes>>> {
        if !call.none_but(&[]) || !self.keys.is_empty() || self.dispatch.overrides_native(py) {
            return None;
        }
        scalar::with_small_root(obj, |tree| tree_only(py, tree, false))
    }

    pub(crate) fn dumps<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
        call: &CallOptions<'_, '_>,
    ) -> Result<Bound<'py, PyBytes>> {
        if let Some(bytes) = self.small_root(py, obj, call) {
            return bytes;
        }
        let encoded = encode(py, &self.dispatch, obj)?;
        let checksum = self.checksum(call)?;
        if encoded.is_tree_only() && self.keys.is_empty() && call.get(Opt::Key).is_none() {
            // Most small values: the header is the whole payload, with nothing to compress, seal
            // or sign. The compression option is still checked, by the step that has no frames
            // to apply it to (without building the prepared payload: 200 instructions a call).
            self.compress_frames(py, &encoded, call.get(Opt::Compression))?;
            return tree_only(py, &encoded.tree, encoded.state.needs_pickle);
        }
        let prepared = self.prepare_encoded(py, encoded, call)?;
        let spec = prepared.spec(checksum);
        let mut writer = EnvelopeWriter::new(&spec);
        let total = writer.total_len();
        // SAFETY: write_contiguous writes all `total` bytes before `bytes` is returned.
        let (bytes, out) = unsafe { uninit_bytes(py, total)? };
        let frames = prepared.frames();
        let frame_bytes: usize = frames.iter().map(|f| f.len()).sum();
        let key = prepared.key.as_deref();
        // The frame sources stay alive (and pinned by their exports) in `encoded` meanwhile.
        maybe_detach(
            py,
            frame_bytes.max(if key.is_some() { total } else { 0 }),
            || writer.write_contiguous(out, &frames, key),
        );
        Ok(bytes)
    }

    /// The `dumps` layout as parts over the objects' memory, for `NativeStore.put_parts`:
    /// encoded, compressed, checksummed and signed once, never assembled in one buffer.
    pub(crate) fn dumps_parts(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        call: &CallOptions<'_, '_>,
    ) -> Result<PayloadParts> {
        let prepared = self.prepare(py, obj, call)?;
        let spec = prepared.spec(self.checksum(call)?);
        let mut writer = EnvelopeWriter::new(&spec);
        seal_frames(py, &mut writer, &prepared.frames());
        let mut header = vec![0u8; writer.header_len()];
        writer.write_header(&mut header, prepared.key.as_deref());
        let parts = writer.parts();
        drop(writer);
        drop(spec);
        let Prepared {
            encoded, stored, ..
        } = prepared;
        Ok(PayloadParts {
            encoded,
            stored,
            header,
            parts,
        })
    }

    pub(crate) fn dumps_frames<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
        call: &CallOptions<'_, '_>,
    ) -> Result<Bound<'py, PyList>> {
        if let Some(header) = self.small_root(py, obj, call) {
            return Ok(PyList::new(py, [header?])?);
        }
        let prepared = self.prepare(py, obj, call)?;
        let spec = prepared.spec(self.checksum(call)?);
        let mut writer = EnvelopeWriter::new(&spec);
        seal_frames(py, &mut writer, &prepared.frames());
        let (encoded, stored, key) = (&prepared.encoded, &prepared.stored, &prepared.key);
        let sources = encoded.frame_slices();
        // SAFETY: write_header writes all header_len() bytes before the list is returned.
        let (header, header_out) = unsafe { uninit_bytes(py, writer.header_len())? };
        writer.write_header(header_out, key.as_deref());
        let out = PyList::empty(py);
        out.append(&header)?;
        for ((s, frame), &source) in stored.iter().zip(&encoded.state.frames).zip(&sources) {
            match &s.data {
                Some(data) => out.append(PyBytes::new(py, data))?,
                None => out.append(frame_memoryview(
                    py,
                    FrameBuffer::new(frame.owner(py), source.as_ptr(), source.len(), true),
                )?)?,
            }
        }
        Ok(out)
    }
}

#[pymethods]
impl Codec {
    #[new]
    #[pyo3(signature = (registry, *, allow_pickle=None, zero_copy=None, verify=None, checksum=None, compression=None, key=None, max_size=None, allowed_tags=None, strict_versions=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        registry: Bound<'_, PyAny>,
        allow_pickle: Option<Bound<'_, PyAny>>,
        zero_copy: Option<Bound<'_, PyAny>>,
        verify: Option<Bound<'_, PyAny>>,
        checksum: Option<Bound<'_, PyAny>>,
        compression: Option<Bound<'_, PyAny>>,
        key: Option<Bound<'_, PyAny>>,
        max_size: Option<Bound<'_, PyAny>>,
        allowed_tags: Option<Bound<'_, PyAny>>,
        strict_versions: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let flag = |name, obj: &Option<Bound<'_, PyAny>>| options::flag(name, obj.as_ref());
        Ok(Self {
            dispatch: DispatchRefs::new(&registry)?,
            allow_pickle: flag("allow_pickle", &allow_pickle)?.unwrap_or(true),
            zero_copy: flag("zero_copy", &zero_copy)?.unwrap_or(false),
            verify: flag("verify", &verify)?,
            checksum: flag("checksum", &checksum)?.unwrap_or(false),
            compression: match &compression {
                Some(obj) => options::compression(obj)?,
                None => Compression::None,
            },
            keys: match &key {
                Some(obj) => options::keys(obj)?,
                None => Vec::new(),
            },
            max_size: options::max_size_arg(max_size.as_ref())?
                .unwrap_or(options::DEFAULT_MAX_SIZE),
            allowed_tags: match &allowed_tags {
                Some(obj) => options::allowed_tags(obj)?,
                None => None,
            },
            strict_versions: flag("strict_versions", &strict_versions)?.unwrap_or(false),
        })
    }
}

/// The loading calls, as codec_methods.rs hands them over: their positional arguments and
/// their options, parsed (call_options.rs).
impl Codec {
    pub(crate) fn loads<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        call: &CallOptions<'_, 'py>,
    ) -> Result<Bound<'py, PyAny>> {
        if call.none_but(&[Opt::Copy]) && self.keys.is_empty() {
            if let Ok(bytes) = data.cast_exact::<PyBytes>() {
                if let Some(obj) = decode_builtins(py, bytes.as_bytes())? {
                    return Ok(obj);
                }
            } else if options::flag("copy", call.get(Opt::Copy))? == Some(true) && !self.zero_copy {
                // A borrowed buffer (mpi4py's receive buffer): builtins are decoded into new
                // objects, so the fast path serves it too, without a bytes copy first.
                if let Ok(buf) = RawBuffer::get(data, pyo3::ffi::PyBUF_SIMPLE) {
                    if let Some(obj) = decode_builtins(py, buf.as_slice())? {
                        return Ok(obj);
                    }
                }
            }
        }
        let opts = self.decode_options(call)?;
        let parts = freight_core::Parts::Single(export_input(data)?);
        self.decode_parts(py, parts, opts)
    }

    /// Decodes one node of a payload (a lazy read's entry): see `_loads_node`'s docstring.
    pub(crate) fn loads_node<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        node: (usize, usize, usize),
        memo: std::collections::HashMap<usize, Py<PyAny>>,
        call: &CallOptions<'_, 'py>,
    ) -> Result<Bound<'py, PyAny>> {
        let mut opts = self.decode_options(call)?;
        // Judged on this node, not on the payload's other entries (check_node).
        let (allow_pickle, allowed_tags) = (opts.allow_pickle, opts.allowed_tags.take());
        opts.allow_pickle = true;
        let parts = freight_core::Parts::Single(export_input(data)?);
        let ctx = DecodeCtx::new(py, parts, &self.dispatch, opts)?;
        let (start, end, base) = node;
        ctx.check_node(
            py,
            start..end,
            base as u64,
            allow_pickle,
            allowed_tags.as_deref(),
        )?;
        let tree = ctx.tree();
        let Some(bytes) = tree.get(start..end) else {
            return Err(Error::corrupt(format!(
                "node {start}..{end} lies outside the tree ({} bytes)",
                tree.len()
            )));
        };
        let mut slots: Memo = std::iter::repeat_with(|| None).take(base).collect();
        for (slot, obj) in memo {
            if slot < base {
                slots[slot] = Some(obj);
            }
        }
        let mut decoder = TreeDecoder::with_memo(py, &ctx, slots);
        decoder.root(bytes)
    }

    pub(crate) fn loads_frames<'py>(
        &self,
        py: Python<'py>,
        frames: &Bound<'py, PyAny>,
        call: &CallOptions<'_, 'py>,
    ) -> Result<Bound<'py, PyAny>> {
        let opts = self.decode_options(call)?;
        let parts = export_frame_list(frames)?;
        self.decode_parts(py, parts, opts)
    }
}

/// The payload of a tree without frames, key or signature: its header is the whole of it.
fn tree_only<'py>(py: Python<'py>, tree: &[u8], needs_pickle: bool) -> Result<Bound<'py, PyBytes>> {
    let payload = TreeOnly::new(tree, needs_pickle);
    // SAFETY: write writes all `len` bytes before `bytes` is returned.
    let (bytes, out) = unsafe { uninit_bytes(py, payload.len())? };
    payload.write(out);
    Ok(bytes)
}
