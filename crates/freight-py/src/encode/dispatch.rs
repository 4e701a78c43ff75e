//! How the walker finds a registered serializer for an object: the exact-type dict and the
//! predicate list of a `freight.Registry` (both updated in place by Python), MRO in between,
//! and, for the libraries freight ships serializers for, loading those serializers the first
//! time an object of the library shows up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use freight_core::ptrmap::PtrMap;
use pyo3::types::{PyDict, PyList, PyType};

/// Bumped by the registry (`Registry._rebuild`, Python) whenever its views change.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Called by the registry when a view changes: types remembered as having no serializer may
/// have one now.
#[pyfunction]
pub fn _registry_changed() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Types `slow` found no serializer for, while no predicate serializer is registered (those
/// decide per object), valid for one generation of the registry. Without it, every object the
/// pickler hands to freight paid an MRO walk once any serializer was registered: for a small
/// closure, whose few objects all come this way, a sizeable share of its dumps spent finding
/// nothing. With it, a type seen before costs one map lookup.
#[derive(Default)]
pub struct Unserialized {
    generation: u64,
    types: PtrMap<Py<PyType>>,
}

/// A registry's views, held across calls (see `Dispatch`).
pub struct DispatchRefs {
    types: Py<PyDict>,
    native: Py<PyDict>,
    predicates: Py<PyList>,
    pending: Py<PyDict>,
    registry: Py<PyAny>,
    unserialized: Arc<Mutex<Unserialized>>,
}

impl DispatchRefs {
    pub fn new(registry: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(Self {
            types: registry
                .call_method0("types_view")?
                .cast_into::<PyDict>()?
                .unbind(),
            native: registry
                .getattr("_native_view")?
                .cast_into::<PyDict>()?
                .unbind(),
            predicates: registry
                .getattr("_predicate_view")?
                .cast_into::<PyList>()?
                .unbind(),
            pending: registry
                .getattr("_pending_view")?
                .cast_into::<PyDict>()?
                .unbind(),
            registry: registry.clone().unbind(),
            unserialized: Arc::default(),
        })
    }

    pub fn bind<'py>(&self, py: Python<'py>) -> Dispatch<'py> {
        Dispatch {
            types: self.types.bind(py).clone(),
            native: self.native.bind(py).clone(),
            predicates: self.predicates.bind(py).clone(),
            pending: self.pending.bind(py).clone(),
            registry: self.registry.bind(py).clone(),
            unserialized: self.unserialized.clone(),
        }
    }

    pub fn clone_ref(&self, py: Python<'_>) -> Self {
        Self {
            types: self.types.clone_ref(py),
            native: self.native.clone_ref(py),
            predicates: self.predicates.clone_ref(py),
            pending: self.pending.clone_ref(py),
            registry: self.registry.clone_ref(py),
            unserialized: self.unserialized.clone(),
        }
    }

    pub fn registry<'py>(&self, py: Python<'py>) -> &Bound<'py, PyAny> {
        self.registry.bind(py)
    }
}

/// The registry as the walker sees it: the exact-type dict and the predicate list of a
/// `freight.Registry`, both updated in place by Python when registrations change, and the
/// libraries whose built-in serializers are not loaded yet (top-level module -> loader).
pub struct Dispatch<'py> {
    pub types: Bound<'py, PyDict>,
    /// Registrations for types the walker encodes natively (they override that encoding).
    pub native: Bound<'py, PyDict>,
    pub predicates: Bound<'py, PyList>,
    pub pending: Bound<'py, PyDict>,
    pub registry: Bound<'py, PyAny>,
    unserialized: Arc<Mutex<Unserialized>>,
}

/// Types already found not to belong to a library whose serializers are pending, so that the
/// walker asks for a type's module once, not for every object. The types are kept alive, so an
/// address is never reused by another type while it is in the set.
static SETTLED: PyOnceLock<Mutex<PtrMap<Py<PyType>>>> = PyOnceLock::new();
const SETTLED_MAX: usize = 4096;

fn settled(py: Python<'_>, ty: &Bound<'_, PyType>) -> bool {
    SETTLED
        .get_or_init(py, Default::default)
        .lock()
        .is_ok_and(|set| set.contains_key(&(ty.as_ptr() as usize)))
}

fn settle(py: Python<'_>, ty: &Bound<'_, PyType>) {
    if let Ok(mut set) = SETTLED.get_or_init(py, Default::default).lock() {
        if set.len() >= SETTLED_MAX {
            set.clear();
        }
        set.insert(ty.as_ptr() as usize, ty.clone().unbind());
    }
}

impl<'py> Dispatch<'py> {
    /// Nothing registered and nothing left to load: every lookup would find nothing.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty() && self.predicates.is_empty() && self.pending.is_empty()
    }

    /// Whether no lookup can find anything for objects of type `ty` (cheap: no Python call once
    /// the type is settled).
    pub fn nothing_for(&self, ty: &Bound<'py, PyType>) -> bool {
        if !self.predicates.is_empty() {
            return false;
        }
        if self.types.is_empty() && (self.pending.is_empty() || settled(ty.py(), ty)) {
            return true;
        }
        let generation = GENERATION.load(Ordering::Relaxed);
        self.unserialized.lock().is_ok_and(|mut known| {
            if known.generation != generation {
                known.types.clear();
                known.generation = generation;
            }
            known.types.contains_key(&(ty.as_ptr() as usize))
        })
    }

    /// Remembers that `slow` found nothing for `ty` (see `Unserialized`).
    fn remember_unserialized(&self, ty: &Bound<'py, PyType>) {
        if !self.predicates.is_empty() {
            return;
        }
        let generation = GENERATION.load(Ordering::Relaxed);
        if let Ok(mut known) = self.unserialized.lock() {
            if known.generation != generation || known.types.len() >= SETTLED_MAX {
                known.types.clear();
                known.generation = generation;
            }
            known
                .types
                .insert(ty.as_ptr() as usize, ty.clone().unbind());
        }
    }

    #[inline]
    pub fn exact(&self, ty: &Bound<'py, PyType>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.types.get_item(ty)
    }

    /// Exact type, MRO, then `supported(obj)` predicates; then, if the object's library has
    /// serializers shipped with freight that are not loaded yet, loads them and looks again.
    pub fn slow(&self, obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.is_empty() {
            return Ok(None);
        }
        let ty = obj.get_type();
        if self.nothing_for(&ty) {
            return Ok(None);
        }
        if !self.types.is_empty() {
            if let Some(entry) = self.exact(&ty)? {
                return Ok(Some(entry));
            }
            for base in crate::types::mro_bases(&ty)?.iter().skip(1) {
                if let Some(entry) = self.types.get_item(&base)? {
                    // Serializers that rebuild exactly their own types (freight's built-in
                    // ones) leave subclasses to pickle, which keeps their type.
                    if entry
                        .getattr(pyo3::intern!(obj.py(), "subclasses"))?
                        .is_truthy()?
                    {
                        return Ok(Some(entry));
                    }
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
        if !self.pending.is_empty() && !settled(obj.py(), &ty) {
            let module = ty.getattr(pyo3::intern!(obj.py(), "__module__"))?;
            if let Ok(module) = module.extract::<&str>() {
                let top = module.split('.').next().unwrap_or(module);
                if self.pending.contains(top)? {
                    let loaded: bool = self
                        .registry
                        .call_method1(pyo3::intern!(obj.py(), "_load_library"), (top,))?
                        .extract()?;
                    if loaded {
                        return self.slow(obj);
                    }
                }
            }
            settle(obj.py(), &ty);
        }
        self.remember_unserialized(&ty);
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
