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
    /// Pickle nodes of the payload's pickler session (flavour 2): each may refer to objects an
    /// earlier one pickled, so they are decoded in tree order, never alone.
    pub session_pickle_nodes: u64,
    pub ext_tags: Vec<u32>,
}

/// Deepest nesting the walk follows (the same as the Python decoder); its stack grows on the heap
/// as needed, so untrusted deep payloads cannot overflow it.
pub const WALK_DEPTH_LIMIT: usize = 200_000;

#[derive(Default)]
struct Walker {
    summary: TreeSummary,
    memo_slots: u64,
    frame_count: u32,
    tag_count: u32,
    /// The tree offset of the container whose entries `index` asks for.
    target: Option<usize>,
    found: Option<Container>,
    /// Frames used since the current entry began (while indexing).
    frames_used: Vec<u32>,
    /// Memo slots filled before the current entry: a reference below it is to an object that
    /// lies outside the entry.
    floor: u64,
    outside: Vec<u64>,
    /// Where each memo slot's node lies (its marker included), while indexing.
    slots: Vec<std::ops::Range<usize>>,
    /// Inside a pickle external (its own memo numbering, in its own buffer).
    in_external: usize,
}

/// Walks a whole tree. `frame_count` and `tag_count` bound the indices nodes may use.
pub fn walk_tree(tree: &[u8], frame_count: u32, tag_count: u32) -> Result<TreeSummary> {
    let mut walker = Walker {
        frame_count,
        tag_count,
        ..Default::default()
    };
    let mut r = Reader::new(tree);
    walker.node(&mut r, 0)?;
    r.expect_end("root node")?;
    Ok(walker.summary)
}

/// A node of the tree, as a lazy reader sees it: where it lies, the memo slots filled before it
/// (a decoder of this node alone starts its memo there), the frames it and its children use,
/// and the memo slots it refers to that are filled outside it (a decoder of it alone fills those
/// first, from `Container::slots`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpan {
    /// The node's bytes in the tree, its memo marker included.
    pub range: std::ops::Range<usize>,
    pub memo_base: u64,
    pub frames: Vec<u32>,
    pub outside: Vec<u64>,
    /// It holds a Pickle node of the payload's pickler session: decoding it alone could miss
    /// what earlier islands pickled (a lazy reader decodes the whole value for it).
    pub session: bool,
}

/// A container's entries: (key, value) for a dict, (None, item) for a list or tuple; and where
/// every memo slot of the tree lies (its node's span, marker included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub tag: Tag,
    pub entries: Vec<(Option<NodeSpan>, NodeSpan)>,
    pub slots: Vec<std::ops::Range<usize>>,
}

/// The tree offset of the node a span holds, past its memo marker.
pub fn node_start(tree: &[u8], span_start: usize) -> usize {
    if tree.get(span_start) == Some(&(Tag::Memo as u8)) {
        span_start + 1
    } else {
        span_start
    }
}

/// The entries of the container node at tree offset `at` (after any memo marker): None when the
/// node there is not a dict, list or tuple. The whole tree is walked (and so checked) to count
/// the memo slots before each entry.
pub fn container_at(
    tree: &[u8],
    at: usize,
    frame_count: u32,
    tag_count: u32,
) -> Result<Option<Container>> {
    let mut walker = Walker {
        frame_count,
        tag_count,
        target: Some(at),
        ..Default::default()
    };
    let mut r = Reader::new(tree);
    walker.node(&mut r, 0)?;
    r.expect_end("root node")?;
    Ok(walker.found.map(|mut found| {
        found.slots = walker.slots;
        found
    }))
}

/// The span of the node at `range` of the tree, whose memo slots start at `memo_base` (a memo
/// slot's node, from `Container::slots`): the frames it uses and the slots it refers to outside.
pub fn span_of(
    tree: &[u8],
    range: std::ops::Range<usize>,
    memo_base: u64,
    frame_count: u32,
    tag_count: u32,
) -> Result<NodeSpan> {
    walk_node(tree, range, memo_base, frame_count, tag_count).map(|(span, _)| span)
}

/// `span_of`, with what the node holds (its serializer tags and pickle nodes: what the safe
/// loading options judge when the node is decoded alone).
pub fn walk_node(
    tree: &[u8],
    range: std::ops::Range<usize>,
    memo_base: u64,
    frame_count: u32,
    tag_count: u32,
) -> Result<(NodeSpan, TreeSummary)> {
    let Some(bytes) = tree.get(range.clone()) else {
        return Err(Error::corrupt("a node span lies outside the tree"));
    };
    let mut walker = Walker {
        frame_count,
        tag_count,
        memo_slots: memo_base,
        floor: memo_base,
        ..Default::default()
    };
    let mut r = Reader::new(bytes);
    walker.node(&mut r, 0)?;
    r.expect_end("node")?;
    walker.outside.sort_unstable();
    walker.outside.dedup();
    let span = NodeSpan {
        range,
        memo_base,
        frames: walker.frames_used,
        outside: walker.outside,
        session: walker.summary.session_pickle_nodes > 0,
    };
    Ok((span, walker.summary))
}

/// The span of the child node `r` is at (`r` reads the tree from offset `at`), which it moves
/// past: its structure is walked to find its end, then `span_of` resolves its references.
fn child_span(
    tree: &[u8],
    at: usize,
    r: &mut Reader<'_>,
    memo_base: u64,
    frame_count: u32,
    tag_count: u32,
) -> Result<NodeSpan> {
    let start = at + r.position();
    let mut skip = Walker {
        frame_count,
        tag_count,
        memo_slots: u64::MAX / 2,
        ..Default::default()
    };
    skip.node(r, 1)?;
    span_of(
        tree,
        start..at + r.position(),
        memo_base,
        frame_count,
        tag_count,
    )
}

/// The parts of the NdArray node at tree offset `at`: the span of its dtype node (whose memo
/// slots start at `memo_base`: the array's own marker, if any, is counted in it), its flags,
/// shape and frame.
pub fn ndarray_at(
    tree: &[u8],
    at: usize,
    memo_base: u64,
    frame_count: u32,
    tag_count: u32,
) -> Result<(NodeSpan, u8, Vec<u64>, u32)> {
    let mut r = Reader::new(tree.get(at..).unwrap_or(&[]));
    if r.tag()? != Tag::NdArray {
        return Err(Error::corrupt(format!("no array node at tree offset {at}")));
    }
    let dtype = child_span(tree, at, &mut r, memo_base, frame_count, tag_count)?;
    let (flags, shape, frame) = r.ndarray_tail()?;
    Ok((dtype, flags, shape, frame))
}

/// The parts of the Ext node at tree offset `at`: its tag index, the span of its meta node
/// (memo slots from `memo_base`), and its frame list.
pub fn ext_at(
    tree: &[u8],
    at: usize,
    memo_base: u64,
    frame_count: u32,
    tag_count: u32,
) -> Result<(u32, NodeSpan, Vec<u32>)> {
    let mut r = Reader::new(tree.get(at..).unwrap_or(&[]));
    if r.tag()? != Tag::Ext {
        return Err(Error::corrupt(format!(
            "no serializer node at tree offset {at}"
        )));
    }
    let tag_index = r.index("a tag index")?;
    let meta = child_span(tree, at, &mut r, memo_base, frame_count, tag_count)?;
    let frames = r.frame_list()?;
    Ok((tag_index, meta, frames))
}

impl Walker {
    fn frame(&mut self, index: u32) -> Result<()> {
        if index >= self.frame_count {
            return Err(Error::corrupt(format!(
                "node refers to frame {index} but the payload has {} frames",
                self.frame_count
            )));
        }
        self.frames_used.push(index);
        Ok(())
    }

    /// Walks one entry of the target container, recording its span.
    fn entry(&mut self, r: &mut Reader<'_>, depth: usize) -> Result<NodeSpan> {
        let frames = std::mem::take(&mut self.frames_used);
        let outside = std::mem::take(&mut self.outside);
        let floor = self.floor;
        let start = r.position();
        self.floor = self.memo_slots;
        let memo_base = self.memo_slots;
        let sessions = self.summary.session_pickle_nodes;
        self.node(r, depth)?;
        let mut span = NodeSpan {
            range: start..r.position(),
            memo_base,
            frames: std::mem::replace(&mut self.frames_used, frames),
            outside: std::mem::replace(&mut self.outside, outside),
            session: self.summary.session_pickle_nodes > sessions,
        };
        span.outside.sort_unstable();
        span.outside.dedup();
        self.frames_used.extend_from_slice(&span.frames);
        self.floor = floor;
        Ok(span)
    }

    /// The entries of the target container (`n` of them; `dict`: key and value pairs).
    fn record(&mut self, r: &mut Reader<'_>, tag: Tag, n: usize, depth: usize) -> Result<()> {
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let key = if tag == Tag::Dict {
                Some(self.entry(r, depth + 1)?)
            } else {
                None
            };
            entries.push((key, self.entry(r, depth + 1)?));
        }
        self.found = Some(Container {
            tag,
            entries,
            slots: Vec::new(),
        });
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
        let at = r.position();
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
                let slot = self.slots.len();
                let record = self.target.is_some() && self.in_external == 0;
                if record {
                    // `at` is the marked node's offset here: the marker is the byte before.
                    self.slots.push(at - 1..at - 1);
                }
                self.node(r, depth)?;
                if record {
                    self.slots[slot].end = r.position();
                }
                return Ok(());
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
                if self.target == Some(at) && matches!(tag, Tag::List | Tag::Tuple) {
                    return self.record(r, tag, n, depth);
                }
                for _ in 0..n {
                    self.node(r, depth + 1)?;
                }
            }
            Tag::Dict => {
                let n = r.count(2, "a dict")?;
                if self.target == Some(at) {
                    return self.record(r, tag, n, depth);
                }
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
                if slot < self.floor && self.in_external == 0 {
                    self.outside.push(slot);
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
                self.summary.session_pickle_nodes += u64::from(node.session);
                if let PickleDataRef::Frame(frame) = node.data {
                    self.frame(frame)?;
                }
                for &frame in &node.buffers {
                    self.frame(frame)?;
                }
                for external in node.externals {
                    // Externals number their memo slots on their own.
                    let saved = (self.memo_slots, self.floor);
                    (self.memo_slots, self.floor) = (0, 0);
                    self.in_external += 1;
                    let mut sub = Reader::new(external);
                    let walked = self.node(&mut sub, depth + 1);
                    self.in_external -= 1;
                    walked?;
                    sub.expect_end("pickle external")?;
                    (self.memo_slots, self.floor) = saved;
                }
            }
        }
        Ok(())
    }
}
