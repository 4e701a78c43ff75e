//! How the walker finds a registered serializer for an object: the dispatch tables a
//! `freight.Registry` hands over (`DispatchTables`: exact types, predicates), MRO in between,
//! and, for the libraries freight ships serializers for, loading those serializers the first
//! time an object of the library shows up.
//!
//! The tables are this crate's object with a public interface: Python's `Registry` owns one,
//! replaces its contents through `update` whenever a registration changes, and gives it to a
//! `Codec` through `Registry.dispatch_tables()`. Rust reads no attribute of the Registry itself
//! (`tools/rust_seams.toml` lists what Rust reaches in Python, and `make lint` checks it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use freight_core::ptrmap::PtrMap;
use pyo3::types::{PyDict, PyList, PyType};

/// Types `slow` found no serializer for, while no predicate serializer is registered (those
/// decide per object), valid for one generation of the tables. Without it, every object the
/// pickler hands to freight paid an MRO walk once any serializer was registered: for a small
/// closure, whose few objects all come this way, a sizeable share of its dumps spent finding
/// nothing. With it, a type seen before costs one map lookup.
#[derive(Default)]
struct Unserialized {
    generation: u64,
    types: PtrMap<Py<PyType>>,
}

/// The dispatch tables of one registry layer (its parents merged in): what `dumps` looks up.
/// The dict and list objects stay the same for the tables' life and are changed in place by
/// `update` (never emptied first), so a call running in another thread sees every registration
/// as soon as it is made, as a library's serializers loaded in the middle of a call must be.
#[pyclass(frozen, module = "freight._freight")]
pub struct DispatchTables {
    types: Py<PyDict>,
    native: Py<PyDict>,
    predicates: Py<PyList>,
    /// Tag -> entry over all layers (a child's registration hides its parent's): what decoding
    /// looks a payload's tags up in without a Python call. A tag missing here goes to the
    /// registry's `by_tag` (a library's serializers loaded on first use, or the error).
    tags: Py<PyDict>,
    /// Libraries whose built-in serializers are not loaded yet (top-level module -> serializer
    /// module), shared by every registry and emptied by `load_library` as they load.
    pending: Py<PyDict>,
    /// `load_library(top) -> bool`: loads a library's built-in serializers (False when nothing
    /// was left to load).
    load_library: Py<PyAny>,
    /// Bumped by `update`: types remembered as having no serializer may have one now.
    generation: AtomicU64,
    unserialized: Mutex<Unserialized>,
}

/// Makes `dict` hold exactly `fresh`'s items, without a moment where it is empty.
fn replace_items(dict: &Bound<'_, PyDict>, fresh: &Bound<'_, PyDict>) -> PyResult<()> {
    let stale: Vec<Bound<'_, PyAny>> = dict
        .keys()
        .iter()
        .filter(|key| !fresh.contains(key).unwrap_or(false))
        .collect();
    for key in stale {
        dict.del_item(key)?;
    }
    dict.update(fresh.as_mapping())
}

#[pymethods]
impl DispatchTables {
    /// Empty tables; `pending` and `load_library` as the attributes above say.
    #[new]
    fn new(py: Python<'_>, pending: Bound<'_, PyDict>, load_library: Bound<'_, PyAny>) -> Self {
        Self {
            types: PyDict::new(py).unbind(),
            native: PyDict::new(py).unbind(),
            predicates: PyList::empty(py).unbind(),
            tags: PyDict::new(py).unbind(),
            pending: pending.unbind(),
            load_library: load_library.unbind(),
            generation: AtomicU64::new(0),
            unserialized: Mutex::default(),
        }
    }

    /// Replaces the tables' contents: `types` maps exact types to entries over all layers,
    /// `native` is its part for types the walker encodes natively (a registration there
    /// overrides the native encoding), `predicates` the entries that decide per object, in
    /// order; `tags` maps each tag to its entry over all layers.
    fn update(
        &self,
        types: &Bound<'_, PyDict>,
        native: &Bound<'_, PyDict>,
        predicates: &Bound<'_, PyAny>,
        tags: &Bound<'_, PyDict>,
    ) -> PyResult<()> {
        let py = types.py();
        replace_items(self.types.bind(py), types)?;
        replace_items(self.native.bind(py), native)?;
        replace_items(self.tags.bind(py), tags)?;
        let fresh = PyList::new(py, predicates.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
        let list = self.predicates.bind(py);
        list.set_slice(0, list.len(), &fresh)?;
        self.generation.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Exact type -> entry, over all layers (a new dict).
    fn types<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.types.bind(py).copy()
    }

    /// The predicate entries, in the order they are asked (a new list).
    fn predicates<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.predicates.bind(py).iter())
    }
}

/// A registry's tables and its `by_tag` (for decoding), held by a `Codec` across calls.
pub struct DispatchRefs {
    tables: Py<DispatchTables>,
    registry: Py<PyAny>,
}

impl DispatchRefs {
    /// `registry`: a `freight.Registry` (its public `dispatch_tables()` and `by_tag(tag)`).
    pub fn new(registry: &Bound<'_, PyAny>) -> PyResult<Self> {
        let tables = registry
            .call_method0(pyo3::intern!(registry.py(), "dispatch_tables"))?
            .cast_into::<DispatchTables>()?
            .unbind();
        Ok(Self {
            tables,
            registry: registry.clone().unbind(),
        })
    }

    pub fn bind<'py>(&self, py: Python<'py>) -> Dispatch<'py> {
        let tables = self.tables.get();
        Dispatch {
            types: tables.types.bind(py).clone(),
            native: tables.native.bind(py).clone(),
            predicates: tables.predicates.bind(py).clone(),
            pending: tables.pending.bind(py).clone(),
            tables: self.tables.bind(py).clone(),
        }
    }

    /// Whether a registration overrides a type the walker encodes natively (int, str, ...).
    pub fn overrides_native(&self, py: Python<'_>) -> bool {
        !self.tables.get().native.bind(py).is_empty()
    }

    pub fn clone_ref(&self, py: Python<'_>) -> Self {
        Self {
            tables: self.tables.clone_ref(py),
            registry: self.registry.clone_ref(py),
        }
    }

    pub fn registry<'py>(&self, py: Python<'py>) -> &Bound<'py, PyAny> {
        self.registry.bind(py)
    }

    /// The entry registered for `tag`: from the tables (no Python call), else from the
    /// registry's `by_tag`, which loads a library's serializers on first use or raises
    /// `UnknownTagError` / `MissingDependencyError`.
    pub fn by_tag<'py>(&self, py: Python<'py>, tag: &str) -> PyResult<Bound<'py, PyAny>> {
        if let Some(entry) = self.tables.get().tags.bind(py).get_item(tag)? {
            return Ok(entry);
        }
        self.registry
            .bind(py)
            .call_method1(pyo3::intern!(py, "by_tag"), (tag,))
    }
}

/// The registry's tables as the walker sees them (see `DispatchTables`).
pub struct Dispatch<'py> {
    pub types: Bound<'py, PyDict>,
    /// Registrations for types the walker encodes natively (they override that encoding).
    pub native: Bound<'py, PyDict>,
    pub predicates: Bound<'py, PyList>,
    pub pending: Bound<'py, PyDict>,
    tables: Bound<'py, DispatchTables>,
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
        let tables = self.tables.get();
        let generation = tables.generation.load(Ordering::Relaxed);
        tables.unserialized.lock().is_ok_and(|mut known| {
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
        let tables = self.tables.get();
        let generation = tables.generation.load(Ordering::Relaxed);
        if let Ok(mut known) = tables.unserialized.lock() {
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
            for base in crate::python_types::mro_bases(&ty)?.iter().skip(1) {
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
                        .tables
                        .get()
                        .load_library
                        .bind(obj.py())
                        .call1((top,))?
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
