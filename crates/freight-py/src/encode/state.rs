//! What one walk produces besides the node tree: the frames (and the memory they point at),
//! the serializer tags, and whether the payload needs pickle.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::buffer::{Owner, RawBuffer};
use crate::errors::{Error, Result};
use freight_core::ptrmap::PtrMap;

/// Memory a frame points at, kept alive until the payload is written.
pub enum FrameSource {
    Buffer(Arc<RawBuffer>),
    Object {
        obj: Py<PyAny>,
        ptr: usize,
        len: usize,
    },
    /// A buffer of an Arrow exporter's arrays (see `encode::arrow`).
    Arrow(arrow_buffer::Buffer),
}

impl FrameSource {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            FrameSource::Buffer(buf) => buf.as_slice(),
            FrameSource::Object { ptr, len, .. } => {
                if *len == 0 {
                    return &[];
                }
                // SAFETY: `obj` is an immutable bytes/str that owns `len` bytes at `ptr`.
                unsafe { std::slice::from_raw_parts(*ptr as *const u8, *len) }
            }
            FrameSource::Arrow(buffer) => buffer.as_slice(),
        }
    }

    pub fn owner(&self, py: Python<'_>) -> Owner {
        match self {
            FrameSource::Buffer(buf) => Owner::Buffer(buf.clone()),
            FrameSource::Object { obj, .. } => Owner::Object(obj.clone_ref(py)),
            FrameSource::Arrow(buffer) => Owner::Arrow(buffer.clone()),
        }
    }
}

/// What one payload's walk produced besides the tree: frames, tags, flags.
#[derive(Default)]
pub struct EncodeState {
    /// What registered serializers returned, by object: when a native attempt falls back to
    /// pickle, the second pass reuses these instead of calling the serializer again.
    pub ext_cache: PtrMap<(Py<PyAny>, Py<PyAny>)>,
    pub frames: Vec<FrameSource>,
    /// Item size of each frame's data when it is made of fixed-size items (numpy arrays), for
    /// the byte-shuffle filter; 0 when unknown.
    pub itemsizes: Vec<u32>,
    pub tags: Vec<String>,
    pub needs_pickle: bool,
    pub cloudpickle: bool,
    pub pickled: bool,
    /// An NdArray node was written: the payload records numpy's version.
    pub arrays: bool,
    /// The payload's island pickler, from its first pickle island on (see islands.rs).
    pub session: Option<crate::encode::islands::IslandSession>,
}

impl EncodeState {
    pub fn add_frame(&mut self, source: FrameSource) -> Result<u32> {
        self.add_frame_of_items(source, 0)
    }

    pub fn add_frame_of_items(&mut self, source: FrameSource, itemsize: u32) -> Result<u32> {
        let index = u32::try_from(self.frames.len())
            .map_err(|_| Error::encode("a payload holds at most 2**32 frames".to_owned()))?;
        self.frames.push(source);
        self.itemsizes.push(itemsize);
        Ok(index)
    }

    pub(crate) fn tag_index(&mut self, tag: &str) -> u32 {
        match self.tags.iter().position(|t| t == tag) {
            Some(i) => i as u32,
            None => {
                self.tags.push(tag.to_owned());
                (self.tags.len() - 1) as u32
            }
        }
    }
}
