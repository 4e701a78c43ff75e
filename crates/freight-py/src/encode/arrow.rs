//! Arrow exporters (pyarrow tables and arrays, polars frames and series, the Arrow-backed
//! columns pandas' serializer hands over) written as Ext nodes straight from what they export:
//! the metadata `(schema, batches)` goes into the tree node by node, the buffers become frames
//! with no copy, and no Python object is made on the way. The tree is the one the walker writes
//! for the tuples `arrow_dumps` returns, so payloads are the same bytes either way (see
//! `crate::arrow` for the metadata's form).

use freight_core::Tag;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::arrow::{Exported, Node};
use crate::encode::state::FrameSource;
use crate::encode::walker::{Walker, FRAME_MIN};
use crate::errors::Result;

impl<'py> Walker<'_, 'py> {
    /// `obj` as the Ext node `tag` of its Arrow data, for a serializer that lets freight write
    /// it (its `arrow_node`, see `freight.serializers.arrow`). False, with nothing written, when
    /// the serializer must decide in Python: what the export refuses or the serializer's check
    /// turns down, and schemas with extension types.
    pub(crate) fn arrow(
        &mut self,
        obj: &Bound<'py, PyAny>,
        check: &Bound<'py, PyAny>,
        tag: u32,
    ) -> Result<bool> {
        if !check.is_exact_instance_of::<pyo3::types::PyBool>()
            && !check.call1((obj,))?.is_truthy()?
        {
            return Ok(false);
        }
        let Ok(exported) = Exported::of(obj) else {
            return Ok(false); // the serializer's own form, which says why or carries it
        };
        if exported.has_extension_type() {
            return Ok(false);
        }
        self.w.ext_begin(tag);
        let was_in_metadata = self.in_metadata;
        self.in_metadata = true;
        let written = self.nested(|this| this.arrow_meta(&exported));
        self.in_metadata = was_in_metadata;
        written?;
        let indices = exported
            .frames
            .into_buffers()
            .into_iter()
            .map(|buffer| self.state.add_frame(FrameSource::Arrow(buffer)))
            .collect::<Result<Vec<_>>>()?;
        self.w.ext_end(&indices);
        Ok(true)
    }

    /// `(schema, [node, ...])`, as the walker writes that tuple.
    fn arrow_meta(&mut self, exported: &Exported) -> Result<()> {
        self.hashable(|this| {
            this.w.container(Tag::Tuple, 2);
            this.schema_bytes(&exported.schema)?;
            this.nested(|this| {
                this.w.container(Tag::List, exported.nodes.len());
                exported
                    .nodes
                    .iter()
                    .try_for_each(|node| this.arrow_node(node))
            })
        })
    }

    /// The schema as the walker writes a bytes object: inline, or a frame when large.
    fn schema_bytes(&mut self, schema: &[u8]) -> Result<()> {
        if schema.len() < FRAME_MIN {
            self.w.byte_string(Tag::Bytes, schema);
            return Ok(());
        }
        let bytes = PyBytes::new(self.py, schema);
        let frame = self.state.add_frame(FrameSource::Object {
            ptr: bytes.as_bytes().as_ptr() as usize,
            len: schema.len(),
            obj: bytes.into_any().unbind(),
        })?;
        self.w.frame_ref(Tag::FrameBytes, frame);
        Ok(())
    }

    /// `(length, offset, validity, buffers, children)`.
    fn arrow_node(&mut self, node: &Node) -> Result<()> {
        self.hashable(|this| {
            this.w.container(Tag::Tuple, 5);
            this.w.int(node.len as i64);
            this.w.int(node.offset as i64);
            match node.validity {
                Some(frame) => this.w.int(frame as i64),
                None => this.w.none(),
            }
            this.tuple_of(node.buffers.len(), |this| {
                node.buffers
                    .iter()
                    .for_each(|&frame| this.w.int(frame as i64));
                Ok(())
            })?;
            this.tuple_of(node.children.len(), |this| {
                node.children
                    .iter()
                    .try_for_each(|child| this.arrow_node(child))
            })
        })
    }

    /// A tuple of `len` items that `items` writes. The empty tuple is one object that the
    /// walker memoizes like any shared object (a reference after its first use): it is walked
    /// as that object, so that the bytes are the walker's.
    fn tuple_of(&mut self, len: usize, items: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        if len == 0 {
            return self.walk(PyTuple::empty(self.py).as_any(), true);
        }
        self.hashable(|this| {
            this.w.container(Tag::Tuple, len);
            items(this)
        })
    }
}
