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

impl<'py> Walker<'_, 'py> {
    pub(crate) fn int(&mut self, obj: &Bound<'py, PyAny>) -> Result<()> {
        let mut overflow = 0;
        // SAFETY: obj is an exact int.
        let v = unsafe { ffi::PyLong_AsLongLongAndOverflow(obj.as_ptr(), &mut overflow) };
        if overflow == 0 {
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
        let mut size: ffi::Py_ssize_t = 0;
        // SAFETY: obj is an exact str; the UTF-8 buffer is cached inside it and lives as long.
        let data = unsafe { ffi::PyUnicode_AsUTF8AndSize(obj.as_ptr(), &mut size) };
        if !data.is_null() {
            let len = size as usize;
            if len >= FRAME_MIN {
                let frame = self.state.add_frame(FrameSource::Object {
                    obj: obj.clone().unbind(),
                    ptr: data as usize,
                    len,
                })?;
                self.w.frame_ref(Tag::FrameStr, frame);
            } else {
                let bytes = unsafe { std::slice::from_raw_parts(data as *const u8, len) };
                self.w.byte_string(Tag::Str, bytes);
            }
            return Ok(());
        }
        // Lone surrogates: not valid UTF-8; keep them with "surrogatepass", as pickle does.
        // SAFETY: clearing the UnicodeEncodeError AsUTF8AndSize just raised.
        unsafe { ffi::PyErr_Clear() };
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
