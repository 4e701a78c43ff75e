//! Objects handed to registered serializers: the serializer's result (metadata walked natively,
//! frames exported as buffers) becomes an Ext node; values in that metadata with no native
//! encoding become pickle islands.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::buffer::RawBuffer;
use crate::encode::state::FrameSource;
use crate::encode::walker::{refcnt, Walker, FRAME_MIN};
use crate::errors::{Error, Result};

impl<'py> Walker<'_, 'py> {
    /// An object handled by a registered serializer.
    pub fn ext(
        &mut self,
        obj: &Bound<'py, PyAny>,
        entry: &Bound<'py, PyAny>,
        shared: bool,
    ) -> Result<()> {
        let py = self.py;
        let ptr = obj.as_ptr();
        if self.memo_seen(ptr, shared, false)? {
            return Ok(());
        }
        let tag: String = entry.getattr(pyo3::intern!(py, "tag"))?.extract()?;
        let safe: bool = entry.getattr(pyo3::intern!(py, "safe"))?.extract()?;
        let tag_index = self.state.tag_index(&tag);
        if !safe {
            self.state.needs_pickle = true;
        }
        let arrow = entry.getattr(pyo3::intern!(py, "arrow"))?;
        if arrow.is_truthy()? && self.arrow(obj, &arrow, tag_index)? {
            self.memo_done(ptr, shared);
            return Ok(());
        }
        let out = match self.state.ext_cache.get(&(ptr as usize)) {
            Some((_, out)) => out.bind(py).clone(),
            None => {
                let out = entry.call_method1(pyo3::intern!(py, "encode"), (obj,))?;
                self.state
                    .ext_cache
                    .insert(ptr as usize, (obj.clone().unbind(), out.clone().unbind()));
                out
            }
        };
        let (meta, frames): (Bound<'py, PyAny>, Bound<'py, PyList>) = out.extract()?;
        self.w.ext_begin(tag_index);
        self.keep_alive.push(meta.clone());
        let meta_shared = refcnt(meta.as_ptr()) > 2;
        let was_in_metadata = self.in_metadata;
        self.in_metadata = true;
        let walked = self.nested(|this| this.walk(&meta, meta_shared));
        self.in_metadata = was_in_metadata;
        walked?;
        let mut indices = Vec::with_capacity(frames.len());
        for frame in frames.iter() {
            let buf = RawBuffer::simple(&frame).map_err(|cause| Error::Encode {
                msg: format!(
                    "serializer {tag:?} returned a frame of type {} that is not a contiguous buffer",
                    frame.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ),
                cause: Some(cause),
            })?;
            indices.push(self.state.add_frame(FrameSource::Buffer(Arc::new(buf)))?);
        }
        self.w.ext_end(&indices);
        self.memo_done(ptr, shared);
        Ok(())
    }

    /// A function (`types.FunctionType`) met outside a serializer's metadata: a registration
    /// for functions, else freight's own node for one made at run time when it qualifies
    /// (`freight._functions.native`), written as an Ext node through [`Self::ext`] with the
    /// node's result cached first. False: the caller pickles it, as before.
    pub(crate) fn function(&mut self, obj: &Bound<'py, PyAny>, shared: bool) -> Result<bool> {
        let py = self.py;
        if !self.overrides && !self.dispatch.types.is_empty() {
            if let Some(entry) = self.dispatch.exact(&obj.get_type())? {
                self.ext(obj, &entry, shared)?;
                return Ok(true);
            }
        }
        let ptr = obj.as_ptr() as usize;
        let functions = crate::python_types::functions(py)?;
        if let std::collections::hash_map::Entry::Vacant(vacant) = self.state.ext_cache.entry(ptr) {
            let out = functions
                .getattr(pyo3::intern!(py, "native"))?
                .call1((obj,))?;
            if out.is_none() {
                return Ok(false);
            }
            vacant.insert((obj.clone().unbind(), out.unbind()));
        }
        let entry = functions.getattr(pyo3::intern!(py, "ENTRY"))?;
        self.ext(obj, &entry, shared)?;
        Ok(true)
    }

    /// Inside a serializer's metadata, a value freight cannot encode natively (the values of an
    /// object column, say) is pickled on its own, in place; the payload then needs pickle.
    pub(crate) fn island(&mut self, obj: &Bound<'py, PyAny>) -> Result<()> {
        let out = crate::python_types::pickle_bridge(self.py)?
            .getattr(pyo3::intern!(self.py, "dump_island"))?
            .call1((obj,))?;
        let (data, cloud): (Bound<'py, PyBytes>, bool) = out.extract()?;
        self.state.needs_pickle = true;
        self.state.pickled = true;
        self.state.cloudpickle |= cloud;
        let bytes = data.as_bytes();
        if bytes.len() >= FRAME_MIN {
            let (ptr, len) = (bytes.as_ptr() as usize, bytes.len());
            let frame = self.state.add_frame(FrameSource::Object {
                obj: data.clone().into_any().unbind(),
                ptr,
                len,
            })?;
            self.w
                .pickle(cloud, freight_core::PickleData::Frame(frame), &[], &[]);
        } else {
            self.w
                .pickle(cloud, freight_core::PickleData::Inline(bytes), &[], &[]);
        }
        Ok(())
    }
}
