//! The native walker: turns a Python object graph into a node tree and a list of frames.
//!
//! Exact-type checks only (a subclass is not its base). Objects referenced more than once
//! (refcount > 1) are memoized so that shared references and cycles come back as under pickle;
//! objects referenced once cost no memo work at all. An object it cannot encode natively is
//! pickled in place, a pickle island (islands.rs), by one pickler for the whole payload; what
//! the format cannot express that way (a cycle through a tuple, an object both inside an island
//! and in the native tree) returns `Error::Unsupported`, and the whole payload goes through the
//! pickle bridge (pickle_sink.rs), which hands arrays and registered types back here.

use freight_core::{Tag, TreeWriter};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::encode::dispatch::{Dispatch, DispatchRefs};
use crate::encode::state::EncodeState;
use crate::errors::{Error, Result};
use crate::limits::{with_stack, MAX_DEPTH, MAX_HASHABLE_DEPTH};
use crate::python_types::ndarray_type;
use freight_core::ptrmap::SmallPtrMap;

/// bytes, bytearray and str at least this large become frames (zero copy in dumps_frames).
pub const FRAME_MIN: usize = 64 * 1024;

/// The tree buffer a walk starts with. TreeWriter's default (64 bytes) was outgrown by a dict of
/// ten short str keys, and its reallocation cost ~380 of that dumps' ~6,400 instructions; a
/// 256-byte block costs malloc the same as a 64-byte one (both come from glibc's per-thread cache).
const TREE_CAPACITY: usize = 256;

/// A walker's memo, kept between walks when several trees share one memo scope (the pickle
/// externals of one payload, so that an array inside a serializer's metadata and the same array
/// elsewhere in the pickled graph stay one array).
#[derive(Default)]
pub struct MemoState {
    map: SmallPtrMap<MemoEntry>,
    next_slot: u32,
    keep_alive: Vec<Py<PyAny>>,
}

impl MemoState {
    /// The objects memoized, by address.
    pub fn keys(&self) -> impl Iterator<Item = usize> + '_ {
        self.map.keys()
    }
}

/// The memo slot of a payload's root that took none (see `Walker::memo_seen`).
const NO_SLOT: u32 = u32::MAX;

#[derive(Clone, Copy, Default)]
struct MemoEntry {
    slot: u32,
    /// False while a tuple, frozenset or serializer-encoded object is being walked: the decoder
    /// creates those after their children, so a reference back to one cannot be decoded natively.
    done: bool,
}

pub struct Walker<'a, 'py> {
    pub(crate) py: Python<'py>,
    pub(crate) dispatch: &'a Dispatch<'py>,
    pub state: &'a mut EncodeState,
    pub(crate) w: TreeWriter,
    memo: SmallPtrMap<MemoEntry>,
    pub(crate) next_slot: u32,
    pub(crate) depth: usize,
    /// Inside a serializer's metadata or a pickle external (an array or registered object the
    /// pickler handed over): anything unsupported is an error or a pickle island there, not a
    /// reason to give the whole payload to pickle.
    pub(crate) in_metadata: bool,
    pub(crate) overrides: bool,
    /// Objects created during the walk (serializer metadata): kept alive so that their
    /// addresses, used as memo keys, are not reused within this walk.
    pub(crate) keep_alive: Vec<Bound<'py, PyAny>>,
    /// Tuples and frozensets open around the current object (see MAX_HASHABLE_DEPTH).
    hashable_depth: usize,
    /// Set for a payload's walk: objects with no native encoding become pickle islands there
    /// (islands.rs) rather than sending the whole payload to pickle.
    pub(crate) islands: Option<&'a DispatchRefs>,
}

#[inline]
pub(crate) fn refcnt(ptr: *mut ffi::PyObject) -> isize {
    // SAFETY: ptr is a live object.
    unsafe { ffi::Py_REFCNT(ptr) }
}

impl<'a, 'py> Walker<'a, 'py> {
    // Inlined, as `encode` and `Codec::prepare` are: with the three inlined into `dumps`, two of
    // the six struct copies (memcpy of 136-376 bytes) a small value's dumps made are gone.
    #[inline(always)]
    pub fn new(
        py: Python<'py>,
        dispatch: &'a Dispatch<'py>,
        state: &'a mut EncodeState,
        in_metadata: bool,
    ) -> Self {
        // Only registrations for natively encoded types need a lookup of every object; others
        // are found when the walker meets an object it has no native encoding for.
        let overrides = !dispatch.native.is_empty();
        Self {
            py,
            dispatch,
            state,
            w: TreeWriter::with_capacity(TREE_CAPACITY),
            memo: SmallPtrMap::default(),
            next_slot: 0,
            depth: 0,
            in_metadata,
            overrides,
            keep_alive: Vec::new(),
            hashable_depth: 0,
            islands: None,
        }
    }

    /// A walker continuing the memo of earlier walks (see `MemoState`).
    pub fn with_memo(
        py: Python<'py>,
        dispatch: &'a Dispatch<'py>,
        state: &'a mut EncodeState,
        in_metadata: bool,
        memo: MemoState,
    ) -> Self {
        let mut walker = Self::new(py, dispatch, state, in_metadata);
        walker.memo = memo.map;
        walker.next_slot = memo.next_slot;
        walker.keep_alive = memo
            .keep_alive
            .into_iter()
            .map(|o| o.into_bound(py))
            .collect();
        walker
    }

    /// The tree (its memo markers still provisional: see `freight_core::compact_memo`), and the
    /// memo for the next walk in the same scope.
    pub fn into_parts(self) -> (TreeWriter, MemoState) {
        let memo = MemoState {
            map: self.memo,
            next_slot: self.next_slot,
            keep_alive: self.keep_alive.into_iter().map(Bound::unbind).collect(),
        };
        (self.w, memo)
    }

    /// The finished tree of a walk that is its own memo scope.
    pub fn into_tree(self) -> Vec<u8> {
        self.w.finish()
    }

    /// Memo bookkeeping for an object about to be written. Returns true when a reference was
    /// written instead (the object was seen before).
    #[inline]
    pub(crate) fn memo_seen(
        &mut self,
        ptr: *mut ffi::PyObject,
        shared: bool,
        done: bool,
    ) -> Result<bool> {
        if !shared {
            return Ok(false);
        }
        let key = ptr as usize;
        if let Some(entry) = self.memo.get(&key) {
            if !entry.done || entry.slot == NO_SLOT {
                return self.unsupported("a cycle through a tuple, frozenset or registered object");
            }
            self.w.reference(entry.slot);
            return Ok(true);
        }
        if self.depth == 0 && !self.in_metadata {
            // The payload's root (walked as shared whatever the program holds). Nothing comes
            // after it, so only its own descendants could refer to it: a list or dict keeps its
            // marker (it may contain itself); anything else gets an entry that sends a cycle
            // back to it to pickle, and no marker, no slot.
            // SAFETY: reading the type of a live object.
            let ty = unsafe { ffi::Py_TYPE(ptr) };
            if ty != &raw mut ffi::PyList_Type && ty != &raw mut ffi::PyDict_Type {
                self.memo.insert(
                    key,
                    MemoEntry {
                        slot: NO_SLOT,
                        done: false,
                    },
                );
                return Ok(false);
            }
        }
        self.memo.insert(
            key,
            MemoEntry {
                slot: self.next_slot,
                done,
            },
        );
        // A walk's root is always marked (walked as shared), whatever the program state: its
        // marker stays even when unused, which saves renumbering every reference after it.
        self.w.memo(self.next_slot, self.depth == 0);
        self.next_slot += 1;
        Ok(false)
    }

    pub(crate) fn memo_has(&self, key: usize) -> bool {
        self.memo.get(&key).is_some()
    }

    pub(crate) fn memo_is_empty(&self) -> bool {
        self.memo.is_empty()
    }

    pub(crate) fn memo_done(&mut self, ptr: *mut ffi::PyObject, shared: bool) {
        if shared {
            if let Some(entry) = self.memo.get_mut(&(ptr as usize)) {
                entry.done = true;
            }
        }
    }

    pub(crate) fn unsupported<T>(&self, what: &str) -> Result<T> {
        if self.in_metadata {
            Err(Error::encode(format!(
                "cannot encode {what} inside a serializer's metadata; metadata must hold only builtins, \
                 numpy arrays and registered types"
            )))
        } else {
            Err(Error::Unsupported)
        }
    }

    /// Walks one object. `shared`: whether anything else may reference it (refcount > 1 as seen
    /// from its container), which decides whether it is memoized.
    pub fn walk(&mut self, obj: &Bound<'py, PyAny>, shared: bool) -> Result<()> {
        let ptr = obj.as_ptr();
        // SAFETY: reading the type of a live object.
        let ty = unsafe { ffi::Py_TYPE(ptr) };
        if self.overrides {
            if let Some(entry) = self.dispatch.exact(&obj.get_type())? {
                return self.ext(obj, &entry, shared);
            }
        }
        unsafe {
            if ptr == ffi::Py_None() {
                self.w.none();
            } else if ty == &raw mut ffi::PyBool_Type {
                self.w.bool(ptr == ffi::Py_True());
            } else if ty == &raw mut ffi::PyLong_Type {
                self.int(obj)?;
            } else if ty == &raw mut ffi::PyFloat_Type {
                self.w.float(ffi::PyFloat_AS_DOUBLE(ptr));
            } else if ty == &raw mut ffi::PyUnicode_Type {
                self.str_node(obj, shared)?;
            } else if ty == &raw mut ffi::PyList_Type {
                if !self.memo_seen(ptr, shared, true)? {
                    self.nested(|this| this.list(obj))?;
                }
            } else if ty == &raw mut ffi::PyDict_Type {
                if !self.memo_seen(ptr, shared, true)? {
                    self.nested(|this| this.dict(obj))?;
                }
            } else if ty == &raw mut ffi::PyTuple_Type {
                if !self.memo_seen(ptr, shared, false)? {
                    self.hashable(|this| this.tuple(obj))?;
                    self.memo_done(ptr, shared);
                }
            } else if ty == &raw mut ffi::PyBytes_Type {
                if !self.memo_seen(ptr, shared, true)? {
                    self.bytes(obj)?;
                }
            } else {
                return self.walk_other(obj, shared);
            }
        }
        Ok(())
    }

    /// A str: its memo reference when it was written before, else its bytes. `memo_seen` is not
    /// called for an unshared one (the call alone was 3% of a small dict's dumps). Always inlined:
    /// left to the compiler it stayed a call, 8% more instructions for 10k records' dumps.
    #[inline(always)]
    fn str_node(&mut self, obj: &Bound<'py, PyAny>, shared: bool) -> Result<()> {
        if !shared || !self.memo_seen(obj.as_ptr(), true, true)? {
            self.str(obj)?;
        }
        Ok(())
    }

    /// Runs a container's walk one level deeper, growing the stack when it runs low so that
    /// deep nesting neither overflows nor needs a small limit.
    #[inline]
    pub(crate) fn nested(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Error::encode(format!(
                "the object nests deeper than {MAX_DEPTH} levels; flatten it before serializing"
            )));
        }
        let out = with_stack(|| f(self));
        self.depth -= 1;
        out
    }

    /// `nested`, for a tuple or frozenset: counts them, and past MAX_HASHABLE_DEPTH leaves the
    /// payload to pickle (the decoder would refuse it).
    pub(crate) fn hashable(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        if self.hashable_depth >= MAX_HASHABLE_DEPTH {
            return self.unsupported(&format!(
                "tuples or frozensets nested deeper than {MAX_HASHABLE_DEPTH} levels"
            ));
        }
        self.hashable_depth += 1;
        let out = self.nested(f);
        self.hashable_depth -= 1;
        out
    }

    /// Walks the items of a list, tuple or set-like given as borrowed pointers.
    #[inline]
    fn item(&mut self, item: *mut ffi::PyObject) -> Result<()> {
        let shared = refcnt(item) > 1;
        // SAFETY: item is a live object borrowed from its container; we take a reference for the
        // duration of the walk so that user code (a serializer) cannot free it under us.
        let item = unsafe { Bound::from_borrowed_ptr(self.py, item) };
        self.walk(&item, shared)
    }

    fn list(&mut self, obj: &Bound<'py, PyAny>) -> Result<()> {
        let ptr = obj.as_ptr();
        // SAFETY: obj is an exact list; indices are re-checked against its current size.
        let n = unsafe { ffi::PyList_GET_SIZE(ptr) } as usize;
        self.w.container(Tag::List, n);
        for i in 0..n {
            if i >= unsafe { ffi::PyList_GET_SIZE(ptr) } as usize {
                break;
            }
            self.item(unsafe { ffi::PyList_GET_ITEM(ptr, i as ffi::Py_ssize_t) })?;
        }
        if unsafe { ffi::PyList_GET_SIZE(ptr) } as usize != n {
            return Err(Error::encode(
                "a list changed size while it was being serialized".to_owned(),
            ));
        }
        Ok(())
    }

    fn tuple(&mut self, obj: &Bound<'py, PyAny>) -> Result<()> {
        let ptr = obj.as_ptr();
        // SAFETY: obj is an exact tuple (immutable).
        let n = unsafe { ffi::PyTuple_GET_SIZE(ptr) } as usize;
        self.w.container(Tag::Tuple, n);
        for i in 0..n {
            self.item(unsafe { ffi::PyTuple_GET_ITEM(ptr, i as ffi::Py_ssize_t) })?;
        }
        Ok(())
    }

    fn dict(&mut self, obj: &Bound<'py, PyAny>) -> Result<()> {
        let ptr = obj.as_ptr();
        // SAFETY: obj is an exact dict; PyDict_Next yields borrowed pointers that `item` pins.
        let n = unsafe { ffi::PyDict_Size(ptr) } as usize;
        self.w.container(Tag::Dict, n);
        let mut pos: ffi::Py_ssize_t = 0;
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut value: *mut ffi::PyObject = std::ptr::null_mut();
        let mut seen = 0usize;
        while unsafe { ffi::PyDict_Next(ptr, &mut pos, &mut key, &mut value) } != 0 {
            seen += 1;
            if seen > n {
                break;
            }
            // Pin the value before walking the key: a serializer run for the key could drop it.
            let value = unsafe { Bound::from_borrowed_ptr(self.py, value) };
            let value_shared = refcnt(value.as_ptr()) > 2;
            // SAFETY: reading the type of a live key.
            if !self.overrides && unsafe { ffi::Py_TYPE(key) } == &raw mut ffi::PyUnicode_Type {
                // A str key, which `item` would reach with no user code: written straight from
                // the dict's reference, without the general walk's type chain and pin (a tenth
                // of a small dict's dumps).
                let shared = refcnt(key) > 1;
                // SAFETY: the dict holds the key for the duration of this call.
                let key = unsafe { pyo3::Borrowed::from_ptr(self.py, key) };
                self.str_node(&key, shared)?;
            } else {
                self.item(key)?;
            }
            self.walk(&value, value_shared)?;
        }
        if seen != n || unsafe { ffi::PyDict_Size(ptr) } as usize != n {
            return Err(Error::encode(
                "a dict changed size while it was being serialized".to_owned(),
            ));
        }
        Ok(())
    }

    fn set_like(&mut self, obj: &Bound<'py, PyAny>, tag: Tag) -> Result<()> {
        let n = obj.len()?;
        if n > 1 {
            if let Some(sorted) = crate::encode::stdlib::sorted_items(obj, n)? {
                self.w.container(tag, n);
                for item in sorted.iter() {
                    // The set, the sorted list and `item` each hold a reference.
                    let shared = refcnt(item.as_ptr()) > 3;
                    self.walk(&item, shared)?;
                }
                return Ok(());
            }
        }
        self.w.container(tag, n);
        let mut count = 0;
        for item in obj.try_iter()? {
            let item = item?;
            count += 1;
            if count > n {
                break;
            }
            // `item` holds one reference of ours on top of the set's.
            let shared = refcnt(item.as_ptr()) > 2;
            self.walk(&item, shared)?;
        }
        if count != n {
            return Err(Error::encode(
                "a set changed size while it was being serialized".to_owned(),
            ));
        }
        Ok(())
    }

    /// Everything that is not one of the hot types above.
    #[inline(never)]
    fn walk_other(&mut self, obj: &Bound<'py, PyAny>, shared: bool) -> Result<()> {
        let py = self.py;
        let ptr = obj.as_ptr();
        let ty = obj.get_type();
        let typ = ty.as_ptr();
        // Registrations win over freight's own encodings (numpy arrays included); those for the
        // fast-path types were already looked up in `walk`.
        if !self.overrides && !self.dispatch.types.is_empty() {
            if let Some(entry) = self.dispatch.exact(&ty)? {
                return self.ext(obj, &entry, shared);
            }
        }
        unsafe {
            if typ == (&raw mut ffi::PyComplex_Type).cast() {
                self.w.complex(
                    ffi::PyComplex_RealAsDouble(ptr),
                    ffi::PyComplex_ImagAsDouble(ptr),
                );
                return Ok(());
            }
            if typ == (&raw mut ffi::PyByteArray_Type).cast() {
                if !self.memo_seen(ptr, shared, true)? {
                    self.bytearray(obj)?;
                }
                return Ok(());
            }
            if typ == (&raw mut ffi::PySet_Type).cast() {
                if !self.memo_seen(ptr, shared, true)? {
                    self.nested(|this| this.set_like(obj, Tag::Set))?;
                }
                return Ok(());
            }
            if typ == (&raw mut ffi::PyFrozenSet_Type).cast() {
                if !self.memo_seen(ptr, shared, false)? {
                    self.hashable(|this| this.set_like(obj, Tag::FrozenSet))?;
                    self.memo_done(ptr, shared);
                }
                return Ok(());
            }
        }
        if let Some(()) = self.stdlib(obj, &ty, shared)? {
            return Ok(());
        }
        if let Some(ndarray) = ndarray_type(py) {
            if ty.is(ndarray) {
                return match self.array_wire(obj)? {
                    Some(wire) => self.array(obj, &wire, shared),
                    None if self.in_metadata => self.island(obj),
                    None => {
                        // Pickled (object or StringDType arrays): still numpy's, so its version
                        // is recorded for a reader of another numpy.
                        self.state.arrays = true;
                        self.island_here(obj)
                    }
                };
            }
        }
        if let Some(entry) = self.dispatch.slow(obj)? {
            return self.ext(obj, &entry, shared);
        }
        if self.in_metadata {
            return self.island(obj);
        }
        if typ == (&raw mut ffi::PyFunction_Type).cast() && self.function(obj, shared)? {
            return Ok(());
        }
        self.island_here(obj)
    }

    /// Undoes a partly written node whose contents turned out to be unsupported (a datetime
    /// with a dateutil or pytz tzinfo). Inside a serializer's metadata the object is pickled in
    /// place instead, as any other value freight cannot encode there.
    pub(crate) fn rollback(
        &mut self,
        start: usize,
        slot: u32,
        obj: &Bound<'py, PyAny>,
        shared: bool,
        what: &str,
    ) -> Result<()> {
        self.w.truncate(start);
        if shared {
            self.memo.remove(&(obj.as_ptr() as usize));
            self.next_slot = slot;
        }
        if self.in_metadata {
            return self.island(obj);
        }
        if self.islands.is_some() {
            return self.island_here(obj);
        }
        self.unsupported(what)
    }

    /// An exact ndarray whose dtype has a wire form.
    pub fn array(
        &mut self,
        obj: &Bound<'py, PyAny>,
        wire: &Bound<'py, PyAny>,
        shared: bool,
    ) -> Result<()> {
        if self.memo_seen(obj.as_ptr(), shared, true)? {
            return Ok(());
        }
        self.write_array(obj, wire)
    }

    /// Writes the raw parts of an NdArray node (used by numpy.rs).
    pub fn writer(&mut self) -> &mut TreeWriter {
        &mut self.w
    }

    pub fn keep(&mut self, obj: Bound<'py, PyAny>) {
        self.keep_alive.push(obj);
    }

    pub fn py(&self) -> Python<'py> {
        self.py
    }
}
