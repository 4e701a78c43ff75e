//! NdArray nodes back into numpy arrays: a view of the frame when that loses nothing, a copy
//! (checksummed in the same pass) into a fresh array otherwise. Only the dtype goes through
//! Python (python/freight/serializers/numpy.py), and each dtype wire text once per process.

use std::collections::HashMap;
use std::sync::Mutex;

use freight_core::bits::array_flags;
use freight_core::{Reader, Tag};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use crate::buffer::RawBuffer;
use crate::decode::tree::TreeDecoder;
use crate::errors::{Decoding, Error, Result};
use crate::python_types::numpy_helper;

/// The pieces needed to rebuild an array: dtype, shape, size in bytes, order, writeability.
struct ArraySpec<'py> {
    dtype: Bound<'py, PyAny>,
    shape: Bound<'py, PyTuple>,
    nbytes: u64,
    fortran: bool,
    writeable: bool,
}

/// dtypes by wire text ("<f8"): a DataFrame of many columns pays one Python call per distinct
/// dtype, not one per array. Bounded: a payload cannot grow it past this many texts. The path
/// for a dtype node behind a memo marker or reference (see `by_bytes` for the others).
static DTYPES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
const DTYPES_MAX: usize = 1024;
/// Longer texts are not dtypes freight writes as one string; they are not cached.
const DTYPE_TEXT_MAX: usize = 64;

/// A dtype decoded from a wire node's bytes, with the `names` tuple it had then: numpy lets
/// code rename a structured dtype's fields in place (`dtype.names = ...`), which replaces that
/// tuple, and a renamed dtype must not be handed out for the original bytes again.
struct Cached {
    dtype: Py<PyAny>,
    itemsize: u64,
    names: Option<Py<PyAny>>,
}

/// dtypes by the bytes of their wire node, for nodes that hold no memo marker or reference
/// (their value is their bytes alone): a structured dtype's node is a dict of lists, which
/// would otherwise be decoded into Python objects and rebuilt through `np.dtype` on every load.
/// Bounded in entries and key length, like `DTYPES`. The GIL serialises its users (the module
/// is `gil_used`); the mutex is never contended.
static BY_BYTES: Mutex<Option<HashMap<Box<[u8]>, Cached>>> = Mutex::new(None);
/// Longest node cached by its bytes (a struct of a few dozen fields).
const DTYPE_NODE_MAX: usize = 4096;
/// Deepest nesting of a cached node (sub-arrays of structs of sub-arrays...).
const DTYPE_NODE_DEPTH: usize = 32;

/// The length of the dtype node at `r` when it holds only strings, ints, booleans, None, lists,
/// tuples and dicts (no memo marker, reference or other tag), else None. Malformed nodes are
/// None too: the ordinary decode then reports them.
fn plain_node_len(r: &Reader<'_>) -> Option<usize> {
    fn skip(r: &mut Reader<'_>, depth: usize) -> Option<()> {
        if depth > DTYPE_NODE_DEPTH {
            return None;
        }
        match r.tag().ok()? {
            Tag::None_ | Tag::True | Tag::False => {}
            Tag::Int => {
                r.uvarint("an int").ok()?;
            }
            Tag::Str => {
                r.byte_string("a str").ok()?;
            }
            Tag::List | Tag::Tuple => {
                for _ in 0..r.count(1, "a container").ok()? {
                    skip(r, depth + 1)?;
                }
            }
            Tag::Dict => {
                for _ in 0..r.count(2, "a dict").ok()? {
                    skip(r, depth + 1)?;
                    skip(r, depth + 1)?;
                }
            }
            _ => return None,
        }
        Some(())
    }
    let mut probe = r.clone();
    let start = probe.position();
    skip(&mut probe, 0)?;
    Some(probe.position() - start).filter(|&n| n <= DTYPE_NODE_MAX)
}

/// The cached dtype for `key`, unless its fields were renamed since (then it is dropped).
fn cached<'py>(py: Python<'py>, key: &[u8]) -> Result<Option<(Bound<'py, PyAny>, u64)>> {
    let hit = {
        let guard = BY_BYTES.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_ref().and_then(|map| map.get(key)).map(|c| {
            (
                c.dtype.bind(py).clone(),
                c.itemsize,
                c.names.as_ref().map(|n| n.bind(py).clone()),
            )
        })
    };
    let Some((dtype, itemsize, names)) = hit else {
        return Ok(None);
    };
    if let Some(names) = names {
        if !dtype.getattr(pyo3::intern!(py, "names"))?.is(&names) {
            let mut guard = BY_BYTES.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(map) = guard.as_mut() {
                map.remove(key);
            }
            return Ok(None);
        }
    }
    Ok(Some((dtype, itemsize)))
}

fn remember(py: Python<'_>, key: &[u8], dtype: &Bound<'_, PyAny>, itemsize: u64) -> Result<()> {
    let names = dtype.getattr(pyo3::intern!(py, "names"))?;
    let names = (!names.is_none()).then(|| names.unbind());
    let mut guard = BY_BYTES.lock().unwrap_or_else(|e| e.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    if map.len() < DTYPES_MAX {
        map.insert(
            key.into(),
            Cached {
                dtype: dtype.clone().unbind(),
                itemsize,
                names,
            },
        );
    }
    Ok(())
}

/// (dtype, itemsize) of a wire form: from the cache for short texts, else through Python.
fn dtype_of<'py>(py: Python<'py>, wire: &Bound<'py, PyAny>) -> Result<(Bound<'py, PyAny>, u64)> {
    let cache = DTYPES.get_or_init(py, || PyDict::new(py).unbind()).bind(py);
    let cacheable = wire.is_exact_instance_of::<pyo3::types::PyString>()
        && wire.len().is_ok_and(|n| n <= DTYPE_TEXT_MAX);
    if cacheable {
        if let Some(hit) = cache.get_item(wire)? {
            let (dtype, itemsize): (Bound<'py, PyAny>, u64) = hit.extract()?;
            return Ok((dtype, itemsize));
        }
    }
    let (dtype, itemsize) = dtype_from_wire(py, wire)?;
    if cacheable && cache.len() < DTYPES_MAX {
        cache.set_item(wire, (&dtype, itemsize))?;
    }
    Ok((dtype, itemsize))
}

/// (dtype, itemsize) rebuilt from a wire form through Python (which refuses object dtypes).
fn dtype_from_wire<'py>(
    py: Python<'py>,
    wire: &Bound<'py, PyAny>,
) -> Result<(Bound<'py, PyAny>, u64)> {
    let dtype = numpy_helper(py)?
        .getattr(pyo3::intern!(py, "dtype_from_wire"))?
        .call1((wire,))
        .decoding("a numpy dtype")?;
    let itemsize: u64 = dtype.getattr(pyo3::intern!(py, "itemsize"))?.extract()?;
    Ok((dtype, itemsize))
}

fn array_spec<'py>(
    py: Python<'py>,
    (dtype, itemsize): (Bound<'py, PyAny>, u64),
    flags: u8,
    shape: &[u64],
) -> Result<ArraySpec<'py>> {
    // The element count must fit even when the item size is 0 (a zero-size dtype would
    // otherwise hide an absurd shape).
    let overflow = || Error::corrupt(format!("array shape {shape:?} overflows"));
    let mut count: u64 = 1;
    for &dim in shape {
        count = count
            .checked_mul(dim)
            .filter(|&c| c <= isize::MAX as u64)
            .ok_or_else(overflow)?;
    }
    let nbytes = count.checked_mul(itemsize).ok_or_else(overflow)?;
    Ok(ArraySpec {
        dtype,
        shape: PyTuple::new(py, shape)?,
        nbytes,
        fortran: flags & array_flags::FORTRAN != 0,
        writeable: flags & array_flags::WRITEABLE != 0,
    })
}

impl<'py> TreeDecoder<'_, 'py> {
    /// An array's dtype node: by its bytes when they alone say what it is (`BY_BYTES`), else
    /// decoded and rebuilt through Python. A node behind a memo marker (the encoder marks the
    /// wire dict it caches per dtype) is still decoded, since a later reference may need the
    /// object in its slot, but its dtype comes from the cache all the same.
    fn dtype(&mut self, r: &mut Reader<'_>) -> Result<(Bound<'py, PyAny>, u64)> {
        let py = self.py;
        let mut after_memo = r.clone();
        let memo = after_memo.tag().ok() == Some(Tag::Memo);
        let probe = if memo { after_memo } else { r.clone() };
        let Some(len) = plain_node_len(&probe) else {
            let wire = self.node(r, None)?;
            return dtype_of(py, &wire);
        };
        let key = probe.clone().take(len, "a dtype")?;
        if !memo {
            if let Some(hit) = cached(py, key)? {
                r.take(len, "a dtype")?;
                return Ok(hit);
            }
        }
        let wire = self.node(r, None)?;
        if memo {
            if let Some(hit) = cached(py, key)? {
                return Ok(hit);
            }
        }
        let found = dtype_from_wire(py, &wire)?;
        remember(py, key, &found.0, found.1)?;
        Ok(found)
    }

    /// An NdArray node (after its tag).
    pub(crate) fn ndarray(&mut self, r: &mut Reader<'_>) -> Result<Bound<'py, PyAny>> {
        let py = self.py;
        // The dtype's wire form is a node of its own (a text, or a structure for records).
        let dtype = self.dtype(r)?;
        let (flags, shape, index) = r.ndarray_tail()?;
        let spec = array_spec(py, dtype, flags, &shape)?;
        let ctx = self.ctx()?.clone();
        let frame = ctx.peek(index)?;
        if spec.nbytes != frame.raw_len() as u64 {
            return Err(Error::corrupt(format!(
                "an array of shape {shape:?} needs {} bytes but its frame {index} holds {}",
                spec.nbytes,
                frame.raw_len()
            )));
        }
        let helper = numpy_helper(py)?;
        // A compressed frame can only be decompressed into a fresh array.
        let view_ok = !frame.compressed()
            && !ctx.opts.copy
            && (ctx.opts.zero_copy || !spec.writeable || ctx.writable(frame));
        if view_ok {
            let writeable = spec.writeable && ctx.writable(frame);
            let buffer = ctx.frame_view(py, index, writeable)?;
            return helper
                .getattr(pyo3::intern!(py, "from_frame"))?
                .call1((buffer, &spec.dtype, &spec.shape, spec.fortran, writeable))
                .decoding("a numpy array");
        }
        let arr = helper
            .getattr(pyo3::intern!(py, "empty"))?
            .call1((&spec.dtype, &spec.shape, spec.fortran))
            .decoding("a numpy array")?;
        let dst = RawBuffer::get(&arr, ffi::PyBUF_WRITABLE | ffi::PyBUF_ANY_CONTIGUOUS)?;
        // SAFETY: a fresh array nobody else references; the export is writable and contiguous.
        let out = unsafe { dst.as_mut_slice() };
        // numpy's default handler mallocs the data alone, so the data pointer is malloc's.
        let alloc = out.as_ptr();
        crate::buffer::ready_for_writes(py, alloc, out, freight_core::memory::prepare_decoded);
        ctx.copy_frame(py, index, out)?;
        drop(dst);
        Ok(arr)
    }
}
