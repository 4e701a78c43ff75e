//! A small root written without a walk: one scalar (None, a bool, an int of 64 bits, a float, a
//! str kept in the tree), or a tuple, list or dict of at most `FLAT_MAX` of them (str keys) in
//! which no str object appears twice (a second one would be a memo reference: the walk's job).
//! Such a `dumps` was mostly the walk's set-up around a few nodes (encode state, memo, versions,
//! the tree's buffer: ~700 of an int's ~1,350 instructions). The nodes are the walker's own
//! (`Walker::walk`, a root list or dict with its kept memo marker); a test compares the two
//! paths' payloads for every kind.

use std::cell::RefCell;

use freight_core::{Tag, TreeWriter};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::encode::leaves::{int64, utf8};
use crate::encode::walker::FRAME_MIN;

thread_local! {
    /// The writer small trees are written with, kept between calls (its buffer's malloc and free,
    /// and the moves of a writer by value, less).
    static WRITER: RefCell<TreeWriter> = RefCell::new(TreeWriter::with_capacity(64));
}

/// The most items (pairs for a dict) of a container written here: the check that no str
/// appears twice compares each str with those before it.
const FLAT_MAX: usize = 32;

/// Calls `write` with the tree of `obj` when it is a value this path writes, and returns its
/// result; None for any other value (the walk's job), without calling it.
pub(crate) fn with_small_root<R>(
    obj: &Bound<'_, PyAny>,
    write: impl FnOnce(&[u8]) -> R,
) -> Option<R> {
    WRITER.with(|cell| {
        let Ok(mut w) = cell.try_borrow_mut() else {
            return None; // `write` called freight again on this thread: the walk
        };
        w.clear();
        if !small_root(obj.as_ptr(), &mut w) {
            return None;
        }
        let written = write(w.as_bytes());
        if w.capacity() > 4096 {
            *w = TreeWriter::with_capacity(64); // a large str's buffer is not kept
        }
        Some(written)
    })
}

fn small_root(ptr: *mut ffi::PyObject, w: &mut TreeWriter) -> bool {
    // SAFETY: reading the type, size and items of a live object of that exact type; nothing
    // here runs Python code, so no container changes while it is read.
    unsafe {
        let ty = ffi::Py_TYPE(ptr);
        if ty == &raw mut ffi::PyTuple_Type {
            let n = ffi::PyTuple_GET_SIZE(ptr) as usize;
            w.container(Tag::Tuple, n);
            let items =
                std::slice::from_raw_parts((*ptr.cast::<ffi::PyTupleObject>()).ob_item.as_ptr(), n);
            n <= FLAT_MAX && items_once(items, w)
        } else if ty == &raw mut ffi::PyList_Type {
            let n = ffi::PyList_GET_SIZE(ptr) as usize;
            w.memo(0, true); // a root list's marker (it could hold itself)
            w.container(Tag::List, n);
            let items = std::slice::from_raw_parts((*ptr.cast::<ffi::PyListObject>()).ob_item, n);
            n <= FLAT_MAX && items_once(items, w)
        } else if ty == &raw mut ffi::PyDict_Type {
            dict(ptr, w)
        } else {
            scalar(ptr, w)
        }
    }
}

/// The items of a tuple or list, when each is a scalar and no str among them appears twice.
fn items_once(items: &[*mut ffi::PyObject], w: &mut TreeWriter) -> bool {
    items
        .iter()
        .enumerate()
        .all(|(i, &item)| !repeated_str(item, &items[..i]) && scalar(item, w))
}

/// A dict of str keys and scalar values (its keys are distinct objects, but a value may be one of
/// them, and a key one of the values before it).
unsafe fn dict(ptr: *mut ffi::PyObject, w: &mut TreeWriter) -> bool {
    let n = ffi::PyDict_Size(ptr) as usize;
    if n > FLAT_MAX {
        return false;
    }
    w.memo(0, true); // a root dict's marker (it could hold itself)
    w.container(Tag::Dict, n);
    let (mut keys, mut values) = (
        [std::ptr::null_mut(); FLAT_MAX],
        [std::ptr::null_mut(); FLAT_MAX],
    );
    let (mut pos, mut i) = (0, 0);
    let (mut key, mut value) = (std::ptr::null_mut(), std::ptr::null_mut());
    while ffi::PyDict_Next(ptr, &mut pos, &mut key, &mut value) != 0 && i < n {
        if ffi::Py_TYPE(key) != &raw mut ffi::PyUnicode_Type
            || repeated_str(key, &values[..i])
            || repeated_str(value, &keys[..i])
            || repeated_str(value, &values[..i])
            || !scalar(key, w)
            || !scalar(value, w)
        {
            return false;
        }
        (keys[i], values[i]) = (key, value);
        i += 1;
    }
    i == n
}

/// Whether `item` is a str that is also one of `before` (the same object).
fn repeated_str(item: *mut ffi::PyObject, before: &[*mut ffi::PyObject]) -> bool {
    // SAFETY: reading the type of a live object.
    unsafe { ffi::Py_TYPE(item) == &raw mut ffi::PyUnicode_Type && before.contains(&item) }
}

fn scalar(ptr: *mut ffi::PyObject, w: &mut TreeWriter) -> bool {
    // SAFETY: reading the type and value of a live object of that exact type.
    unsafe {
        let ty = ffi::Py_TYPE(ptr);
        if ptr == ffi::Py_None() {
            w.none();
        } else if ty == &raw mut ffi::PyBool_Type {
            w.bool(ptr == ffi::Py_True());
        } else if ty == &raw mut ffi::PyLong_Type {
            let Some(v) = int64(ptr) else {
                return false; // a big int: the walker's node
            };
            w.int(v);
        } else if ty == &raw mut ffi::PyFloat_Type {
            w.float(ffi::PyFloat_AS_DOUBLE(ptr));
        } else if ty == &raw mut ffi::PyUnicode_Type {
            // Lone surrogates, or a str in a frame of its own: the walker's node.
            match utf8(ptr) {
                Some(bytes) if bytes.len() < FRAME_MIN => w.byte_string(Tag::Str, bytes),
                _ => return false,
            }
        } else {
            return false;
        }
    }
    true
}
