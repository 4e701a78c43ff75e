//! The leaves of the hot types the walker writes itself: int (and big int), str, bytes,
//! bytearray (an `impl Walker`, apart from the graph walk in walker.rs).

use std::sync::Arc;

use freight_core::Tag;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::buffer::RawBuffer;
use crate::encode::state::FrameSource;
use crate::encode::walker::{Walker, FRAME_MIN};
use crate::errors::Result;

/// The value of an exact int that fits in 64 bits (an `Int` node), None for a big one.
///
/// # Safety
/// `ptr` is a live exact int.
#[inline(always)]
pub(crate) unsafe fn int64(ptr: *mut ffi::PyObject) -> Option<i64> {
    let mut overflow = 0;
    let v = unsafe { ffi::PyLong_AsLongLongAndOverflow(ptr, &mut overflow) };
    (overflow == 0).then_some(v)
}

/// The UTF-8 of an exact str (cached inside it, as long-lived as it), None when it holds lone
/// surrogates (not UTF-8: the error raised is cleared, and the caller keeps them its own way).
///
/// # Safety
/// `ptr` is a live exact str, which outlives the slice's use.
#[inline(always)]
pub(crate) unsafe fn utf8<'a>(ptr: *mut ffi::PyObject) -> Option<&'a [u8]> {
    let mut size: ffi::Py_ssize_t = 0;
    let data = unsafe { ffi::PyUnicode_AsUTF8AndSize(ptr, &mut size) };
    if data.is_null() {
        unsafe { ffi::PyErr_Clear() };
        return None;
    }
    Some(unsafe { std::slice::from_raw_parts(data.cast(), size as usize) })
}

impl<'py> Walker<'_, 'py> {
    pub(crate) fn int(&mut self, obj: &Bound<'py, PyAny>) -> Result<()> {
        // SAFETY: obj is an exact int.
        if let Some(v) = unsafe { int64(obj.as_ptr()) } {
            self.w.int(v);
            return Ok(());
        }
        let bits: usize = obj
            .call_method0(pyo3::intern!(self.py, "bit_length"))?
            .extract()?;
        let n = bits / 8 + 1;
        let kwargs = PyDict::new(self.py);
        kwargs.set_item("signed", true)?;
        let bytes = obj.call_method("to_bytes", (n, "little"), Some(&kwargs))?;
        let bytes: &[u8] = bytes.extract()?;
        self.w.big_int(bytes);
        Ok(())
    }

    pub(crate) fn str(&mut self, obj: &Bound<'py, PyAny>) -> Result<()> {
        // SAFETY: obj is an exact str, alive while its UTF-8 is written.
        if let Some(bytes) = unsafe { utf8(obj.as_ptr()) } {
            if bytes.len() >= FRAME_MIN {
                let frame = self.state.add_frame(FrameSource::Object {
                    obj: obj.clone().unbind(),
                    ptr: bytes.as_ptr() as usize,
                    len: bytes.len(),
                })?;
                self.w.frame_ref(Tag::FrameStr, frame);
            } else {
                self.w.byte_string(Tag::Str, bytes);
            }
            return Ok(());
        }
        // Lone surrogates: not valid UTF-8; keep them with "surrogatepass", as pickle does.
        let encoded = obj
            .cast::<PyString>()
            .map_err(PyErr::from)?
            .call_method1("encode", ("utf-8", "surrogatepass"))?;
        let bytes: &[u8] = encoded.extract()?;
        if bytes.len() >= FRAME_MIN {
            let (ptr, len) = (bytes.as_ptr() as usize, bytes.len());
            let frame = self.state.add_frame(FrameSource::Object {
                obj: encoded.clone().unbind(),
                ptr,
                len,
            })?;
            self.w.frame_ref(Tag::FrameStr, frame);
        } else {
            self.w.byte_string(Tag::StrSurrogates, bytes);
        }
        Ok(())
    }

    pub(crate) fn bytes(&mut self, obj: &Bound<'py, PyAny>) -> Result<()> {
        // SAFETY: obj is an exact bytes object; its buffer is immutable and lives as long as it.
        let (ptr, len) = unsafe {
            (
                ffi::PyBytes_AsString(obj.as_ptr()) as *const u8,
                ffi::PyBytes_Size(obj.as_ptr()) as usize,
            )
        };
        if len >= FRAME_MIN {
            let frame = self.state.add_frame(FrameSource::Object {
                obj: obj.clone().unbind(),
                ptr: ptr as usize,
                len,
            })?;
            self.w.frame_ref(Tag::FrameBytes, frame);
        } else {
            self.w
                .byte_string(Tag::Bytes, unsafe { std::slice::from_raw_parts(ptr, len) });
        }
        Ok(())
    }

    pub(crate) fn bytearray(&mut self, obj: &Bound<'py, PyAny>) -> Result<()> {
        let buf = RawBuffer::simple(obj)?;
        if buf.len() >= FRAME_MIN {
            let frame = self.state.add_frame(FrameSource::Buffer(Arc::new(buf)))?;
            self.w.frame_ref(Tag::FrameByteArray, frame);
        } else {
            self.w.byte_string(Tag::ByteArray, buf.as_slice());
        }
        Ok(())
    }
}
