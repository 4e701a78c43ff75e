//! Types the walker recognises by exact type. Nothing here is looked up at import: the stdlib
//! types are looked up slot by slot, the encoder's only once their module is in sys.modules (no
//! object can be a ZoneInfo before zoneinfo is imported, so the encoder never imports it: issue
//! 32), the decoder's by importing the module its payload needs. numpy's ndarray likewise, once
//! numpy has been imported by someone else.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// The datetime module's classes and its UTC singleton.
pub struct DateTimeTypes {
    pub datetime: Py<PyType>,
    pub date: Py<PyType>,
    pub time: Py<PyType>,
    pub timedelta: Py<PyType>,
    pub timezone: Py<PyType>,
    pub utc: Py<PyAny>,
}

/// uuid.UUID and the SafeUUID enum its `is_safe` holds.
pub struct UuidTypes {
    pub uuid: Py<PyType>,
    pub safe_uuid: Py<PyAny>,
}

/// One stdlib slot: what `load` finds in the modules named, looked up once.
pub struct StdSlot<T: 'static> {
    cell: PyOnceLock<T>,
    /// The module and its C accelerator, if any (`_datetime` holds the datetime classes, and a
    /// program importing it alone can make dates without `datetime` in sys.modules).
    modules: &'static [&'static str],
    load: fn(Python<'_>) -> PyResult<T>,
}

impl<T: Send + Sync + 'static> StdSlot<T> {
    const fn new(modules: &'static [&'static str], load: fn(Python<'_>) -> PyResult<T>) -> Self {
        StdSlot {
            cell: PyOnceLock::new(),
            modules,
            load,
        }
    }

    /// The encoder's view: the types once one of the slot's modules is in sys.modules (and not
    /// blocked with None), else None without importing anything. Until then each call costs a
    /// dict lookup per module; a module that fails to load is retried, never cached as missing.
    pub fn if_imported<'a>(&'a self, py: Python<'_>) -> Option<&'a T> {
        if let Some(types) = self.cell.get(py) {
            return Some(types);
        }
        let modules = sys_modules(py)?;
        let imported = self
            .modules
            .iter()
            .any(|name| matches!(modules.get_item(name), Ok(Some(module)) if !module.is_none()));
        if !imported {
            return None;
        }
        self.cell.get_or_try_init(py, || (self.load)(py)).ok()
    }

    /// The decoder's view: imports the module when the payload needs it.
    pub fn imported<'a>(&'a self, py: Python<'_>) -> PyResult<&'a T> {
        self.cell.get_or_try_init(py, || (self.load)(py))
    }
}

fn class(py: Python<'_>, module: &str, name: &str) -> PyResult<Py<PyType>> {
    Ok(py
        .import(module)?
        .getattr(name)?
        .cast_into::<PyType>()?
        .unbind())
}

pub static DATETIME: StdSlot<DateTimeTypes> = StdSlot::new(&["datetime", "_datetime"], |py| {
    Ok(DateTimeTypes {
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
    })
});

pub static DECIMAL: StdSlot<Py<PyType>> = StdSlot::new(&["decimal", "_decimal"], |py| {
    class(py, "decimal", "Decimal")
});

pub static UUID: StdSlot<UuidTypes> = StdSlot::new(&["uuid"], |py| {
    Ok(UuidTypes {
        uuid: class(py, "uuid", "UUID")?,
        safe_uuid: py.import("uuid")?.getattr("SafeUUID")?.unbind(),
    })
});

/// PosixPath, WindowsPath, PurePosixPath, PureWindowsPath: the index is the wire flavour.
pub static PATHS: StdSlot<[Py<PyType>; 4]> = StdSlot::new(&["pathlib"], |py| {
    Ok([
        class(py, "pathlib", "PosixPath")?,
        class(py, "pathlib", "WindowsPath")?,
        class(py, "pathlib", "PurePosixPath")?,
        class(py, "pathlib", "PureWindowsPath")?,
    ])
});

/// zoneinfo.ZoneInfo (`import _zoneinfo` imports zoneinfo too, so one name suffices).
pub static ZONEINFO: StdSlot<Py<PyType>> =
    StdSlot::new(&["zoneinfo"], |py| class(py, "zoneinfo", "ZoneInfo"));

/// types.FunctionType, without importing `types`.
pub fn function_type(py: Python<'_>) -> Bound<'_, PyType> {
    // SAFETY: PyFunction_Type is a static type object that lives as long as the interpreter.
    unsafe {
        Bound::from_borrowed_ptr(py, (&raw mut pyo3::ffi::PyFunction_Type).cast())
            .cast_into_unchecked::<PyType>()
    }
}

static SYS_MODULES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// sys.modules (the dict itself: `import` adds to it in place).
fn sys_modules(py: Python<'_>) -> Option<&Bound<'_, PyDict>> {
    SYS_MODULES
        .get_or_try_init(py, || -> PyResult<Py<PyDict>> {
            Ok(py
                .import("sys")?
                .getattr("modules")?
                .cast_into::<PyDict>()?
                .unbind())
        })
        .ok()
        .map(|modules| modules.bind(py))
}

static NDARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// numpy.ndarray, if numpy has been imported in this process (a dict lookup until it is).
pub fn ndarray_type(py: Python<'_>) -> Option<&Py<PyType>> {
    if let Some(t) = NDARRAY.get(py) {
        return Some(t);
    }
    let modules = sys_modules(py)?;
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

static FUNCTIONS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// freight._functions: functions made at run time as a node (`native`, `ENTRY`).
pub fn functions(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    freight_module(py, &FUNCTIONS, "freight._functions")
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
