//! The versions this process runs, as payloads record them: Python's minor version for
//! "python", a library's `__version__` once it is imported. Both sides ask: the encoder to record
//! them, the decoder to tell a payload written by these very versions without a Python call.

use std::cell::RefCell;

use pyo3::prelude::*;

/// `name`'s version in this process, or None when it is not imported (nothing is imported to
/// find out). Versions cannot change in a process, so each found one is looked up once (a numpy
/// array's dumps spent a tenth of its time asking numpy for its version).
pub fn installed(py: Python<'_>, name: &str) -> Option<String> {
    thread_local!(static FOUND: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) });
    if let Some(found) = FOUND.with(|f| {
        f.borrow()
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }) {
        return Some(found);
    }
    let version = if name == "python" {
        let v = py.version_info();
        Some(format!("{}.{}", v.major, v.minor))
    } else {
        // sys.modules, looked up once: the import machinery costs about a microsecond a call.
        static MODULES: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
        MODULES
            .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
                Ok(py.import("sys")?.getattr("modules")?.unbind())
            })
            .and_then(|modules| modules.bind(py).get_item(name))
            .and_then(|module| module.getattr(pyo3::intern!(py, "__version__")))
            .and_then(|v| v.extract::<String>())
            .ok()
    }?;
    FOUND.with(|f| f.borrow_mut().push((name.to_owned(), version.clone())));
    Some(version)
}
