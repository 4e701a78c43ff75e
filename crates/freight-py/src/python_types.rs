//! Types the walker recognises by exact type, looked up once per interpreter. numpy's ndarray is
//! looked up only once numpy has been imported by someone else (freight never imports it to
//! encode: if numpy is not in sys.modules, no object can be an ndarray).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

pub struct StdTypes {
    pub datetime: Py<PyType>,
    pub date: Py<PyType>,
    pub time: Py<PyType>,
    pub timedelta: Py<PyType>,
    pub timezone: Py<PyType>,
    pub utc: Py<PyAny>,
    pub decimal: Py<PyType>,
    pub uuid: Py<PyType>,
    pub safe_uuid: Py<PyAny>,
    pub zoneinfo: Option<Py<PyType>>,
    /// PosixPath, WindowsPath, PurePosixPath, PureWindowsPath: the index is the wire flavour.
    pub paths: [Py<PyType>; 4],
    pub function: Py<PyType>,
}

static STD_TYPES: PyOnceLock<StdTypes> = PyOnceLock::new();

fn class(py: Python<'_>, module: &str, name: &str) -> PyResult<Py<PyType>> {
    Ok(py
        .import(module)?
        .getattr(name)?
        .cast_into::<PyType>()?
        .unbind())
}

pub fn std_types(py: Python<'_>) -> PyResult<&StdTypes> {
    STD_TYPES.get_or_try_init(py, || {
        let zoneinfo = match py.import("zoneinfo") {
            Ok(m) => Some(m.getattr("ZoneInfo")?.cast_into::<PyType>()?.unbind()),
            Err(_) => None,
        };
        Ok(StdTypes {
            datetime: class(py, "datetime", "datetime")?,
            date: class(py, "datetime", "date")?,
            time: class(py, "datetime", "time")?,
            timedelta: class(py, "datetime", "timedelta")?,
            timezone: class(py, "datetime", "timezone")?,
            utc: py
                .import("datetime")?
                .getattr("timezone")?
                .getattr("utc")?
                .unbind(),
            decimal: class(py, "decimal", "Decimal")?,
            uuid: class(py, "uuid", "UUID")?,
            safe_uuid: py.import("uuid")?.getattr("SafeUUID")?.unbind(),
            zoneinfo,
            paths: [
                class(py, "pathlib", "PosixPath")?,
                class(py, "pathlib", "WindowsPath")?,
                class(py, "pathlib", "PurePosixPath")?,
                class(py, "pathlib", "PureWindowsPath")?,
            ],
            function: class(py, "types", "FunctionType")?,
        })
    })
}

static NDARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static SYS_MODULES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// numpy.ndarray, if numpy has been imported in this process (a dict lookup until it is).
pub fn ndarray_type(py: Python<'_>) -> Option<&Py<PyType>> {
    if let Some(t) = NDARRAY.get(py) {
        return Some(t);
    }
    let modules = SYS_MODULES
        .get_or_try_init(py, || -> PyResult<Py<PyDict>> {
            Ok(py
                .import("sys")?
                .getattr("modules")?
                .cast_into::<PyDict>()?
                .unbind())
        })
        .ok()?
        .bind(py);
    let numpy = modules.get_item(pyo3::intern!(py, "numpy")).ok()??;
    let ndarray = numpy.getattr("ndarray").ok()?.cast_into::<PyType>().ok()?;
    let _ = NDARRAY.set(py, ndarray.unbind());
    NDARRAY.get(py)
}

/// A Python module of freight's own, imported once.
pub fn freight_module<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyModule>>,
    name: &str,
) -> PyResult<&'py Bound<'py, PyModule>> {
    Ok(cell
        .get_or_try_init(py, || py.import(name).map(Bound::unbind))?
        .bind(py))
}

/// `type(obj).__mro__`, skipping the type itself.
pub fn mro_bases<'py>(ty: &Bound<'py, PyType>) -> PyResult<Bound<'py, PyTuple>> {
    Ok(ty
        .getattr(pyo3::intern!(ty.py(), "__mro__"))?
        .cast_into::<PyTuple>()?)
}

static PICKLE_BRIDGE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// freight._pickle, the Python half of the pickle bridge.
pub fn pickle_bridge(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    freight_module(py, &PICKLE_BRIDGE, "freight._pickle")
}

static CLOUDPICKLE_VERSION: PyOnceLock<String> = PyOnceLock::new();

pub fn cloudpickle_version(py: Python<'_>) -> PyResult<&str> {
    Ok(CLOUDPICKLE_VERSION
        .get_or_try_init(py, || -> PyResult<String> {
            py.import("cloudpickle")?.getattr("__version__")?.extract()
        })?
        .as_str())
}

static NUMPY_HELPER: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// freight.serializers.numpy (imports numpy): dtype wire forms, array views and allocation.
pub fn numpy_helper(py: Python<'_>) -> crate::errors::Result<&Bound<'_, PyModule>> {
    freight_module(py, &NUMPY_HELPER, "freight.serializers.numpy").map_err(|err| {
        if err.is_instance_of::<pyo3::exceptions::PyImportError>(py) {
            crate::errors::Error::Missing(
                "the payload holds numpy arrays but numpy is not installed; install it with: pip install 'freight[numpy]'"
                    .to_owned(),
            )
        } else {
            err.into()
        }
    })
}
