//! How the walker finds a registered serializer for an object: the exact-type dict and the
//! predicate list of a `freight.Registry` (both updated in place by Python), MRO in between.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyType};

/// The registry as the walker sees it: the exact-type dict and the predicate list of a
/// `freight.Registry`, both updated in place by Python when registrations change.
pub struct Dispatch<'py> {
    pub types: Bound<'py, PyDict>,
    pub predicates: Bound<'py, PyList>,
}

impl<'py> Dispatch<'py> {
    pub fn is_empty(&self) -> bool {
        self.types.is_empty() && self.predicates.is_empty()
    }

    #[inline]
    pub fn exact(&self, ty: &Bound<'py, PyType>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.types.get_item(ty)
    }

    /// MRO, then `supported(obj)` predicates.
    pub fn slow(&self, obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.is_empty() {
            return Ok(None);
        }
        let ty = obj.get_type();
        if !self.types.is_empty() {
            for base in crate::types::mro_bases(&ty)?.iter().skip(1) {
                if let Some(entry) = self.types.get_item(&base)? {
                    return Ok(Some(entry));
                }
            }
        }
        for entry in self.predicates.iter() {
            if entry
                .call_method1(pyo3::intern!(obj.py(), "accepts"), (obj,))?
                .is_truthy()?
            {
                return Ok(Some(entry));
            }
        }
        Ok(None)
    }
}

/// Types pickle saves itself without consulting `reducer_override`.
pub fn is_pickle_atomic_type(py: Python<'_>, ty: &Bound<'_, PyAny>) -> bool {
    let ptr = ty.as_ptr();
    let _ = py;
    unsafe {
        [
            (&raw mut ffi::PyLong_Type).cast::<ffi::PyObject>(),
            (&raw mut ffi::PyFloat_Type).cast(),
            (&raw mut ffi::PyBool_Type).cast(),
            (&raw mut ffi::PyUnicode_Type).cast(),
            (&raw mut ffi::PyBytes_Type).cast(),
            (&raw mut ffi::PyByteArray_Type).cast(),
            (&raw mut ffi::PyList_Type).cast(),
            (&raw mut ffi::PyTuple_Type).cast(),
            (&raw mut ffi::PyDict_Type).cast(),
            (&raw mut ffi::PySet_Type).cast(),
            (&raw mut ffi::PyFrozenSet_Type).cast(),
            ffi::Py_TYPE(ffi::Py_None()).cast(),
        ]
        .contains(&ptr)
    }
}
