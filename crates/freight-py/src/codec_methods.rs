//! The codec's calls as Python sees them: `Codec.dumps`, `loads`, `dumps_frames`, `loads_frames`,
//! `_dumps_parts` and `_loads_node`, each a method descriptor of the class (what a `#[pymethods]`
//! method is too, so `freight.Freight` inherits them, `help()` shows their signatures and
//! docstrings, and a call adds no Python frame) whose arguments one step parses
//! (call_options.rs). Written by hand rather than by `#[pymethods]` because PyO3's parsing
//! raises a bare `TypeError` for a misspelled option, and collecting unknown keywords with
//! `**kwargs` cost about 340 instructions on every call, with or without keywords (issue 32).

use std::ffi::CString;

use pyo3::ffi;
use pyo3::impl_::trampoline::get_trampoline_function;
use pyo3::prelude::*;
use pyo3::{Borrowed, PyTypeInfo};

use crate::call_options::{
    self, CallOptions, Positional, RawCall, Signature, DUMPS, LOADS, LOADS_NODE,
};
use crate::codec::Codec;

/// Defines the methods: for each, from its docstring (the doc comment), its signature and its
/// body, a function CPython calls (through PyO3's trampoline, see `install`) that parses the
/// call's arguments and runs the body on the codec, and its entry in `METHODS`.
macro_rules! codec_methods {
    ($(
        $(#[doc = $doc:literal])*
        fn $name:ident = $signature:expr;
        |$py:ident, $codec:ident, $args:ident, $options:ident| $body:expr;
    )*) => {
        $(
            /// # Safety
            /// As CPython calls a `METH_FASTCALL | METH_KEYWORDS` method descriptor of `Codec`.
            unsafe fn $name<'py>(
                $py: Python<'py>,
                slf: *mut ffi::PyObject,
                args: *const *mut ffi::PyObject,
                nargs: ffi::Py_ssize_t,
                kwnames: *mut ffi::PyObject,
            ) -> PyResult<*mut ffi::PyObject> {
                let raw = RawCall { slf, args, nargs, kwnames };
                // SAFETY: CPython's arguments, passed on as they came.
                unsafe {
                    call($py, &$signature, raw, |$codec, $args, $options| {
                        Ok($body.into_any())
                    })
                }
            }
        )*

        /// Every method: signature, docstring, the function CPython calls.
        fn methods() -> Vec<(&'static Signature, &'static str, ffi::PyCFunctionFastWithKeywords)> {
            vec![$((
                &$signature,
                concat!($($doc, "\n"),*),
                get_trampoline_function!(fastcall_cfunction_with_keywords, $name),
            )),*]
        }
    };
}

codec_methods! {
    /// Serializes ``obj`` into one ``bytes`` (each frame copied exactly once, or compressed).
    ///
    /// Args:
    ///     obj: any Python object.
    ///     checksum: write per-frame xxh3-64 checksums (default: the codec's setting, False;
    ///         compressed frames always carry one).
    ///     compression: None (the codec's default), "none", "lz4", "zstd", ("zstd", level), "auto",
    ///         ("auto", link bytes per second).
    ///     key: sign with HMAC-SHA256 (default: the codec's first key, if any).
    ///
    /// Raises:
    ///     SerializationError: nothing (native encoder, registry, pickle, cloudpickle) can encode
    ///         it; the message names the entry that failed.
    ///     OptionError: an option value of the wrong kind, or an option it does not take (the
    ///         message names the closest one).
    fn dumps = Signature { name: "dumps", positional: &["obj"], options: DUMPS };
    |py, codec, args, options| codec.dumps(py, &args.get(0), options)?;

    /// Serializes ``obj`` into ``[header, frame, ...]`` (and the signature when signed).
    ///
    /// Frames are read-only views of the original memory (no copy) unless compressed. Frame
    /// checksums as ``dumps`` writes them (the codec's setting, False by default: computing them
    /// reads every byte). Options and errors as ``dumps``.
    fn dumps_frames = Signature { name: "dumps_frames", positional: &["obj"], options: DUMPS };
    |py, codec, args, options| codec.dumps_frames(py, &args.get(0), options)?;

    /// Encodes ``obj`` once in the ``dumps`` layout, as parts over the objects' memory, for
    /// ``NativeStore.put_parts`` (what ``Store.save`` writes). Options as ``dumps``.
    fn dumps_parts = Signature { name: "_dumps_parts", positional: &["obj"], options: DUMPS };
    |py, codec, args, options| Bound::new(py, codec.dumps_parts(py, &args.get(0), options)?)?;

    /// Deserializes a payload from any buffer (bytes, bytearray, memoryview, mmap, ...).
    ///
    /// Args:
    ///     data: the output of ``dumps``.
    ///     allow_pickle: False refuses payloads that would run pickle (UnsafePayloadError).
    ///     zero_copy: True returns read-only views of ``data`` for arrays.
    ///     verify: check the frame checksums a payload carries (default True, zero_copy too: each
    ///         checksummed frame is read once, not copied); False skips them (constant time).
    ///     key: require a valid signature under this key (or any of a list of keys).
    ///     max_size: largest decompressed frame accepted (default 16 GiB).
    ///     allowed_tags: the only serializer tags the payload may use ("pickle" for pickle nodes).
    ///     strict_versions: another major version of a library (outside the promised crossings)
    ///         raises ProducerVersionError instead of a FreightWarning.
    ///     copy: True: nothing returned refers to ``data`` (every array and buffer is copied out),
    ///         so a receive buffer may be reused or freed as soon as this returns. Contradicts
    ///         ``zero_copy=True``.
    ///
    /// Each option left out takes the codec's setting.
    ///
    /// Raises:
    ///     DeserializationError: truncated, corrupt or not a freight payload (or a subclass:
    ///         IntegrityError, UnsafePayloadError, UnknownTagError, FormatVersionError,
    ///         MissingDependencyError).
    ///     OptionError: an option value of the wrong kind, or an option it does not take (the
    ///         message names the closest one).
    fn loads = Signature { name: "loads", positional: &["data"], options: LOADS };
    |py, codec, args, options| codec.loads(py, &args.get(0), options)?;

    /// Deserializes the output of ``dumps_frames`` (a header buffer, then one per frame).
    ///
    /// Options and errors as ``loads``.
    fn loads_frames = Signature { name: "loads_frames", positional: &["frames"], options: LOADS };
    |py, codec, args, options| codec.loads_frames(py, &args.get(0), options)?;

    /// Decodes one node of a payload (a lazy read's entry): `data` holds the payload's bytes
    /// where they lie, at least its header and the frames the node uses; `node` is (start, end,
    /// memo_base) in the tree; `memo` fills the slots the node refers to outside it. Only the
    /// frames the node uses are read and verified. Options as ``loads``.
    fn loads_node = Signature {
        name: "_loads_node",
        positional: &["data", "node", "memo"],
        options: LOADS_NODE,
    };
    |py, codec, args, options| {
        let (node, memo) = (args.get(1).extract()?, args.get(2).extract()?);
        codec.loads_node(py, &args.get(0), node, memo, options)?
    };
}

/// Parses a call's arguments, then runs `body` on the codec it was called on.
///
/// # Safety
/// `raw` as CPython passes it to a `METH_FASTCALL | METH_KEYWORDS` method descriptor of
/// `Codec`, which has checked that `slf` is an instance of `Codec` (or of a subclass).
#[inline(always)]
unsafe fn call<'py>(
    py: Python<'py>,
    signature: &Signature,
    raw: RawCall,
    body: impl FnOnce(
        &Codec,
        &Positional<'_, 'py>,
        &CallOptions<'_, 'py>,
    ) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<*mut ffi::PyObject> {
    let slf = raw.slf;
    // SAFETY: CPython's arguments, passed on as they came.
    let (positional, options) = unsafe { call_options::parse(py, signature, raw)? };
    // SAFETY: the descriptor checked `slf`'s type; it is alive for the call.
    let codec = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<Codec>() };
    Ok(body(codec.get(), &positional, &options)?.into_ptr())
}

/// Makes the methods `Codec`'s: a method descriptor each, in the class's namespace (as PyO3 puts
/// a `#[pymethods]` method there), so `freight.Freight` and its subclasses inherit them. Each
/// calls its function through PyO3's own trampoline (the one `#[pymethods]` expand to), so the
/// interpreter-attachment count and the turning of a Rust panic into an exception are the same
/// as for every other method of the extension.
pub fn install(py: Python<'_>) -> PyResult<()> {
    let class = Codec::type_object(py);
    for (signature, doc, meth) in methods() {
        let def = leak_def(signature, doc, meth);
        // SAFETY: `def` lives as long as the process; the type is Codec's.
        let descriptor = unsafe {
            Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(class.as_type_ptr(), def))?
        };
        let name = pyo3::types::PyString::intern(py, signature.name);
        // Not `setattr`: tools/check_rust_seams.py reads `.setattr(name)` with a computed name as
        // Rust reaching into freight's Python; this defines the extension's own class instead.
        // SAFETY: all three objects are alive; PyObject_SetAttr takes its own references.
        let status =
            unsafe { ffi::PyObject_SetAttr(class.as_ptr(), name.as_ptr(), descriptor.as_ptr()) };
        if status != 0 {
            return Err(PyErr::fetch(py));
        }
    }
    Ok(())
}

/// A method's definition, which lives as long as the process (CPython's descriptor points to it;
/// made once, when the extension is imported): its name, its flags, and its docstring led by
/// the text signature CPython reads (`__text_signature__`, `inspect.signature`, `help()`). The
/// docstring is the doc comment's lines, less the one space after each `///`.
fn leak_def(
    signature: &Signature,
    doc: &str,
    meth: ffi::PyCFunctionFastWithKeywords,
) -> *mut ffi::PyMethodDef {
    let lines: Vec<&str> = doc
        .lines()
        .map(|line| line.strip_prefix(' ').unwrap_or(line))
        .collect();
    let text = format!("{}\n--\n\n{}", signature.text_signature(), lines.join("\n"));
    let name = CString::new(signature.name).expect("a method name has no NUL");
    let doc = CString::new(text).expect("a docstring has no NUL");
    Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.into_raw(),
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: meth,
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: doc.into_raw(),
    }))
}
