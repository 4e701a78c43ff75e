//! A Python-free walk over a node tree: checks its structure (tags, lengths, memo references,
//! frame indices, depth) and counts what is inside. `inspect` uses it, and the property tests
//! use it to show that no byte string makes the reader panic.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::reader::{PickleDataRef, Reader};
use crate::tags::Tag;

/// What a tree holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TreeSummary {
    pub nodes: u64,
    pub max_depth: usize,
    /// Node count per tag name.
    pub tags: BTreeMap<&'static str, u64>,
    pub pickle_nodes: u64,
    pub ext_tags: Vec<u32>,
}

/// Deepest nesting the walk follows (the same as the Python decoder); its stack grows on the heap
/// as needed, so untrusted deep payloads cannot overflow it.
pub const WALK_DEPTH_LIMIT: usize = 200_000;

struct Walker {
    summary: TreeSummary,
    memo_slots: u64,
    frame_count: u32,
    tag_count: u32,
}

/// Walks a whole tree. `frame_count` and `tag_count` bound the indices nodes may use.
pub fn walk_tree(tree: &[u8], frame_count: u32, tag_count: u32) -> Result<TreeSummary> {
    let mut walker = Walker {
        summary: TreeSummary::default(),
        memo_slots: 0,
        frame_count,
        tag_count,
    };
    let mut r = Reader::new(tree);
    walker.node(&mut r, 0)?;
    r.expect_end("root node")?;
    Ok(walker.summary)
}

impl Walker {
    fn frame(&self, index: u32) -> Result<()> {
        if index >= self.frame_count {
            return Err(Error::corrupt(format!(
                "node refers to frame {index} but the payload has {} frames",
                self.frame_count
            )));
        }
        Ok(())
    }

    fn node(&mut self, r: &mut Reader<'_>, depth: usize) -> Result<()> {
        if depth > WALK_DEPTH_LIMIT {
            return Err(Error::TooDeep {
                limit: WALK_DEPTH_LIMIT,
            });
        }
        stacker::maybe_grow(64 * 1024, 4 << 20, || self.node_inner(r, depth))
    }

    fn node_inner(&mut self, r: &mut Reader<'_>, depth: usize) -> Result<()> {
        let tag = r.tag()?;
        self.summary.nodes += 1;
        self.summary.max_depth = self.summary.max_depth.max(depth);
        *self.summary.tags.entry(tag.name()).or_default() += 1;
        match tag {
            Tag::Memo => {
                // The slot is taken before the node's children, as the decoder does.
                self.memo_slots += 1;
                let at = r.position();
                let next = r.clone().tag()?;
                if !next.memoizable() {
                    return Err(Error::corrupt(format!(
                        "memo marker before a {} node at offset {at}",
                        next.name()
                    )));
                }
                self.summary.nodes -= 1;
                return self.node(r, depth);
            }
            Tag::None_ | Tag::False | Tag::True | Tag::TzNone | Tag::TzUtc => {}
            Tag::Int => {
                r.uvarint("an int")?;
            }
            Tag::BigInt
            | Tag::Str
            | Tag::StrSurrogates
            | Tag::Bytes
            | Tag::ByteArray
            | Tag::Decimal => {
                r.byte_string(tag.name())?;
            }
            Tag::TzZoneInfo => {
                r.tz_zoneinfo()?;
            }
            Tag::Float => {
                r.f64_le("a float")?;
            }
            Tag::Complex => {
                r.f64_le("a complex")?;
                r.f64_le("a complex")?;
            }
            Tag::FrameBytes | Tag::FrameByteArray | Tag::FrameStr => {
                let index = r.index("a frame index")?;
                self.frame(index)?;
            }
            Tag::List | Tag::Tuple | Tag::Set | Tag::FrozenSet => {
                let n = r.count(1, "a container")?;
                for _ in 0..n {
                    self.node(r, depth + 1)?;
                }
            }
            Tag::Dict => {
                let n = r.count(2, "a dict")?;
                for _ in 0..n {
                    self.node(r, depth + 1)?;
                    self.node(r, depth + 1)?;
                }
            }
            Tag::Ref => {
                let slot = r.uvarint("a memo slot")?;
                if slot >= self.memo_slots {
                    return Err(Error::corrupt(format!(
                        "reference to memo slot {slot} before it was filled"
                    )));
                }
            }
            Tag::DateTime => {
                r.datetime()?;
                self.node(r, depth + 1)?;
            }
            Tag::Time => {
                r.time()?;
                self.node(r, depth + 1)?;
            }
            Tag::Date => {
                r.date()?;
            }
            Tag::TimeDelta => {
                r.timedelta()?;
            }
            Tag::TzFixed => {
                r.tz_fixed()?;
            }
            Tag::Uuid => {
                r.uuid()?;
            }
            Tag::Path => {
                r.path()?;
            }
            Tag::NdArray => {
                self.node(r, depth + 1)?;
                let (_, _, frame) = r.ndarray_tail()?;
                self.frame(frame)?;
            }
            Tag::Ext => {
                let tag_index = r.index("a tag index")?;
                if tag_index >= self.tag_count {
                    return Err(Error::corrupt(format!(
                        "node refers to tag {tag_index} but the payload lists {}",
                        self.tag_count
                    )));
                }
                self.summary.ext_tags.push(tag_index);
                self.node(r, depth + 1)?;
                for frame in r.frame_list()? {
                    self.frame(frame)?;
                }
            }
            Tag::Pickle => {
                self.summary.pickle_nodes += 1;
                let node = r.pickle()?;
                if let PickleDataRef::Frame(frame) = node.data {
                    self.frame(frame)?;
                }
                for &frame in &node.buffers {
                    self.frame(frame)?;
                }
                for external in node.externals {
                    let saved = self.memo_slots;
                    self.memo_slots = 0;
                    let mut sub = Reader::new(external);
                    self.node(&mut sub, depth + 1)?;
                    sub.expect_end("pickle external")?;
                    self.memo_slots = saved;
                }
            }
        }
        Ok(())
    }
}
