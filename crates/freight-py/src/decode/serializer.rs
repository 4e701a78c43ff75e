//! Ext nodes: objects rebuilt by the registered serializer whose tag the node names, from the
//! node's metadata and views of its frames.

use freight_core::Reader;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::decode::tree::TreeDecoder;
use crate::errors::{Decoding, Error, Result};

impl<'py> TreeDecoder<'_, 'py> {
    /// An Ext node (after its tag).
    pub(crate) fn ext(&mut self, r: &mut Reader<'_>) -> Result<Bound<'py, PyAny>> {
        let py = self.py;
        let tag_index = r.index("a tag index")? as usize;
        let ctx = self.ctx()?.clone();
        let entry = ctx
            .entries
            .get(tag_index)
            .ok_or_else(|| {
                Error::corrupt(format!(
                    "a node uses tag {tag_index} but the payload lists {}",
                    ctx.entries.len()
                ))
            })?
            .bind(py)
            .clone();
        // Arrow data in the walker's form is read without making its tuples (`arrow_meta`).
        let arrow = entry
            .getattr(pyo3::intern!(py, "arrow_meta"))
            .is_ok_and(|a| a.is_truthy().unwrap_or(false));
        let fast = if arrow { self.arrow_meta(r)? } else { None };
        let meta = match fast {
            Some(meta) => meta,
            None => self.node(r, None)?,
        };
        let frames = r.frame_list()?;
        ctx.verify_frames(py, &frames)?;
        let views = PyList::empty(py);
        for index in frames {
            views.append(ctx.frame_view(py, index, true)?)?;
        }
        let tag = &ctx.payload.header().tags[tag_index];
        entry
            .call_method1(pyo3::intern!(py, "decode"), (meta, views))
            .decoding(&format!("an object with serializer {tag:?}"))
    }
}
