//! Dict keys decoded through a small per-thread cache, as msgspec decodes them. A payload's dict
//! keys are mostly a few short names, again and again across messages (a small message's dict,
//! every record of a list sent one by one); a new key cost an allocation, a UTF-8 decode and a
//! SipHash (about a third of a 10-key dict's `loads`), a cached one is a lookup, with its hash
//! already computed. Only ASCII keys of at most `MAX_LEN` bytes; `SLOTS` slots, direct-mapped by
//! a hash of the bytes, a slot replaced on a miss. One cache for the process, never freed (a
//! thread's own would have to give its references back as the thread ends, when Python may be
//! finalizing), taken with `try_lock`: a decode that finds it taken (another thread of a
//! free-threaded Python, a child forked while it was held) decodes its keys as any str. A key so decoded may be the same object as an
//! equal key of another dict or payload: str objects are immutable, and equal keys held by
//! several dicts are what CPython's own interning makes too.

use std::sync::Mutex;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

const SLOTS: usize = 512;
const MAX_LEN: usize = 32;

struct Slot {
    len: u8,
    bytes: [u8; MAX_LEN],
    key: Py<PyString>,
}

static CACHE: Mutex<Vec<Option<Slot>>> = Mutex::new(Vec::new());

/// The str of `data` from the cache, made and cached on a miss; None when `data` is not a
/// key the cache holds (too long, not ASCII), which the caller decodes as any str.
#[inline]
pub(crate) fn cached<'py>(py: Python<'py>, data: &[u8]) -> Option<Bound<'py, PyAny>> {
    if data.len() > MAX_LEN || !data.is_ascii() {
        return None;
    }
    let Ok(mut slots) = CACHE.try_lock() else {
        return None;
    };
    if slots.is_empty() {
        slots.resize_with(SLOTS, || None);
    }
    let slot = &mut slots[index(data)];
    if let Some(hit) = slot.as_ref().filter(|s| &s.bytes[..s.len as usize] == data) {
        return Some(hit.key.bind(py).clone().into_any());
    }
    let key = make(py, data);
    let mut bytes = [0u8; MAX_LEN];
    bytes[..data.len()].copy_from_slice(data);
    // The replaced key's reference is dropped here, attached.
    *slot = Some(Slot {
        len: data.len() as u8,
        bytes,
        key: key.clone().unbind(),
    });
    Some(key.into_any())
}

/// A new str of the ASCII `data`, its hash computed once here (then cached inside it).
fn make<'py>(py: Python<'py>, data: &[u8]) -> Bound<'py, PyString> {
    let key = PyString::new(py, std::str::from_utf8(data).expect("ASCII is UTF-8"));
    // SAFETY: hashing a live str cannot fail.
    unsafe { ffi::PyObject_Hash(key.as_ptr()) };
    key
}

/// The slot of `data`: FxHash's multiply over its 8-byte words, the top bits.
#[inline]
fn index(data: &[u8]) -> usize {
    let mut h = data.len() as u64;
    for chunk in data.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    (h >> (64 - SLOTS.trailing_zeros())) as usize
}
