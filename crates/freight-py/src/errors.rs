//! Errors, mapped once. Every fallible function of the bindings returns `Result<T>` (this
//! module's `Error`) and uses `?`; the one `impl From<Error> for PyErr` below picks the class
//! from `freight.exceptions` (defined once in Python and imported here). obstore's
//! `PyObjectStoreError` is the model.

use pyo3::prelude::*;

pyo3::import_exception!(freight.exceptions, FreightError);
pyo3::import_exception!(freight.exceptions, SerializationError);
pyo3::import_exception!(freight.exceptions, DeserializationError);
pyo3::import_exception!(freight.exceptions, IntegrityError);
pyo3::import_exception!(freight.exceptions, UnsafePayloadError);
pyo3::import_exception!(freight.exceptions, FormatVersionError);
pyo3::import_exception!(freight.exceptions, MissingDependencyError);
pyo3::import_exception!(freight.exceptions, StorageError);
pyo3::import_exception!(freight.exceptions, KeyNotFoundError);
pyo3::import_exception!(freight.exceptions, KeyExistsError);
pyo3::import_exception!(freight.exceptions, OptionError);

/// Everything that can go wrong in the bindings. The direction (encoding or decoding) is part
/// of each variant, so the mapping needs no context.
#[derive(Debug)]
pub enum Error {
    /// A payload that does not read (decoding): the core's variant picks the class.
    Core(freight_core::Error),
    /// An exception raised by Python code or PyO3, passed on as it is.
    Py(PyErr),
    /// Encoding failed: `SerializationError`, with the Python exception that caused it (when
    /// Python code raised: a serializer, an object's own method) as its `__cause__`.
    Encode { msg: String, cause: Option<PyErr> },
    /// Decoding failed for a reason that is not the payload's bytes (a bad argument), or
    /// Python code raised while freight decoded (numpy on a dtype, a serializer, a constructor
    /// on a malformed value): `DeserializationError`, with that exception as its `__cause__`.
    Decode { msg: String, cause: Option<PyErr> },
    /// An option's value is of the wrong kind or out of range (`compression="gzip"`,
    /// `key="text"`): `OptionError`, whichever direction the call goes.
    Option(String),
    /// Decoding would run code that `allow_pickle=False` refuses: `UnsafePayloadError`.
    Unsafe(String),
    /// Decoding needs a library that is not installed: `MissingDependencyError`.
    Missing(String),
    /// A store could not be opened, read or written.
    Store(freight_store::Error),
    /// The native walker cannot encode this payload: it goes through the pickle bridge
    /// instead. Handled inside the encoder; never reaches Python.
    Unsupported,
}

pub type Result<T> = std::result::Result<T, Error>;

impl From<freight_core::Error> for Error {
    fn from(err: freight_core::Error) -> Self {
        Error::Core(err)
    }
}

impl From<freight_store::Error> for Error {
    fn from(err: freight_store::Error) -> Self {
        Error::Store(err)
    }
}

impl From<PyErr> for Error {
    fn from(err: PyErr) -> Self {
        Error::Py(err)
    }
}

impl From<pyo3::CastError<'_, '_>> for Error {
    fn from(err: pyo3::CastError<'_, '_>) -> Self {
        Error::Py(err.into())
    }
}

impl From<pyo3::CastIntoError<'_>> for Error {
    fn from(err: pyo3::CastIntoError<'_>) -> Self {
        Error::Py(err.into())
    }
}

fn with_cause(new: PyErr, cause: Option<PyErr>) -> PyErr {
    if cause.is_some() {
        Python::attach(|py| new.set_cause(py, cause));
    }
    new
}

impl From<Error> for PyErr {
    fn from(err: Error) -> PyErr {
        match err {
            Error::Core(err) => {
                let msg = err.to_string();
                if err.is_integrity() {
                    IntegrityError::new_err(msg)
                } else if matches!(err, freight_core::Error::UnsupportedVersion { .. }) {
                    FormatVersionError::new_err(msg)
                } else {
                    DeserializationError::new_err(msg)
                }
            }
            Error::Py(err) => err,
            Error::Encode { msg, cause } => with_cause(SerializationError::new_err(msg), cause),
            Error::Decode { msg, cause } => with_cause(DeserializationError::new_err(msg), cause),
            Error::Option(msg) => OptionError::new_err(msg),
            Error::Unsafe(msg) => UnsafePayloadError::new_err(msg),
            Error::Missing(msg) => MissingDependencyError::new_err(msg),
            Error::Store(err) => {
                let msg = err.to_string();
                match err {
                    freight_store::Error::NotFound { .. } => KeyNotFoundError::new_err(msg),
                    freight_store::Error::AlreadyExists { .. } => KeyExistsError::new_err(msg),
                    _ => StorageError::new_err(msg),
                }
            }
            Error::Unsupported => SerializationError::new_err(
                "internal error: the native encoder gave up outside of a payload it could hand to pickle",
            ),
        }
    }
}

impl Error {
    /// Encoding failed, with no Python exception behind it.
    pub fn encode(msg: impl Into<String>) -> Self {
        Error::Encode {
            msg: msg.into(),
            cause: None,
        }
    }

    /// Decoding failed (a bad argument), with no Python exception behind it.
    pub fn decode(msg: impl Into<String>) -> Self {
        Error::Decode {
            msg: msg.into(),
            cause: None,
        }
    }

    /// An option value of the wrong kind; `msg` says what the option takes.
    pub fn option(msg: impl Into<String>) -> Self {
        Error::Option(msg.into())
    }

    /// A corrupt-payload error (the core's wording: "corrupt freight payload: ...").
    pub fn corrupt(msg: impl Into<String>) -> Self {
        Error::Core(freight_core::Error::corrupt(msg))
    }
}

/// Attaches "what was being decoded" to exceptions Python code raised while decoding.
pub trait Decoding<T> {
    /// A `DeserializationError` naming `what`, whose `__cause__` is the original exception;
    /// freight's own errors, and interrupts (KeyboardInterrupt, SystemExit), pass through.
    fn decoding(self, what: &str) -> Result<T>;
}

impl<T> Decoding<T> for PyResult<T> {
    #[inline]
    fn decoding(self, what: &str) -> Result<T> {
        self.map_err(|err| Python::attach(|py| decoding(py, err, what)))
    }
}

impl<T> Decoding<T> for Result<T> {
    #[inline]
    fn decoding(self, what: &str) -> Result<T> {
        self.map_err(|err| match err {
            Error::Py(err) => Python::attach(|py| decoding(py, err, what)),
            other => other,
        })
    }
}

fn decoding(py: Python<'_>, err: PyErr, what: &str) -> Error {
    // A Rust panic inside another PyO3 library (polars on malformed metadata) is a decoding
    // failure too; other BaseExceptions are not.
    if is_freight_error(py, &err)
        || !(err.is_instance_of::<pyo3::exceptions::PyException>(py) || is_rust_panic(py, &err))
    {
        return Error::Py(err);
    }
    Error::Decode {
        msg: format!("cannot decode {what}: {}", err.value(py)),
        cause: Some(err),
    }
}

/// Whether `err` is a PanicException of some PyO3 library: each defines its own class
/// `pyo3_runtime.PanicException`, a BaseException, so no single type matches them all.
fn is_rust_panic(py: Python<'_>, err: &PyErr) -> bool {
    let ty = err.get_type(py);
    let named = |attr: &str, want: &str| {
        ty.getattr(attr)
            .and_then(|v| v.extract::<String>())
            .is_ok_and(|v| v == want)
    };
    named("__module__", "pyo3_runtime") && named("__name__", "PanicException")
}

fn is_freight_error(py: Python<'_>, err: &PyErr) -> bool {
    err.is_instance_of::<FreightError>(py)
}
