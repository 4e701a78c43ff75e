//! Error mapping. The exception classes are defined once, in `python/freight/exceptions.py`,
//! and imported here; each core error variant maps to exactly one of them.

use pyo3::prelude::*;

pyo3::import_exception!(freight.exceptions, SerializationError);
pyo3::import_exception!(freight.exceptions, DeserializationError);
pyo3::import_exception!(freight.exceptions, UnknownTagError);
pyo3::import_exception!(freight.exceptions, IntegrityError);
pyo3::import_exception!(freight.exceptions, UnsafePayloadError);
pyo3::import_exception!(freight.exceptions, FormatVersionError);
pyo3::import_exception!(freight.exceptions, MissingDependencyError);

/// A core (format) error raised while reading a payload.
pub fn decode_error(err: freight_core::Error) -> PyErr {
    let msg = err.to_string();
    if err.is_integrity() {
        return IntegrityError::new_err(msg);
    }
    match err {
        freight_core::Error::UnsupportedVersion { .. } => FormatVersionError::new_err(msg),
        _ => DeserializationError::new_err(msg),
    }
}

/// Wraps an exception raised while decoding (by numpy, by a serializer, by the interpreter when
/// a payload is malformed) as a DeserializationError whose `__cause__` is the original, unless
/// it already is a freight error.
pub fn wrap_decode(py: Python<'_>, err: PyErr, what: &str) -> PyErr {
    // KeyboardInterrupt, SystemExit and the like are not decoding failures: let them through.
    // A Rust panic inside another PyO3 library (polars on malformed metadata) is one.
    if is_freight_error(py, &err)
        || !(err.is_instance_of::<pyo3::exceptions::PyException>(py) || is_rust_panic(py, &err))
    {
        return err;
    }
    let new = DeserializationError::new_err(format!("cannot decode {what}: {}", err.value(py)));
    new.set_cause(py, Some(err));
    new
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

pub fn is_freight_error(py: Python<'_>, err: &PyErr) -> bool {
    err.is_instance_of::<SerializationError>(py) || err.is_instance_of::<DeserializationError>(py)
}

/// Internal result of the encoder: either a Python error, or `Unsupported`, which means "the
/// native walker cannot encode this payload; encode it through the pickle bridge".
pub enum EncodeError {
    Unsupported,
    Py(PyErr),
}

impl From<PyErr> for EncodeError {
    fn from(err: PyErr) -> Self {
        EncodeError::Py(err)
    }
}

impl From<pyo3::CastError<'_, '_>> for EncodeError {
    fn from(err: pyo3::CastError<'_, '_>) -> Self {
        EncodeError::Py(err.into())
    }
}

pub type EncodeResult<T> = Result<T, EncodeError>;
