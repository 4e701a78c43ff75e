//! `TreeWriter`: appends nodes of the tree. The bindings call one method per node; they never
//! write bytes or offsets themselves.

use smallvec::SmallVec;

use crate::tags::Tag;
use crate::varint::{put_uvarint, zigzag};

/// Calendar fields shared by datetime, date and time nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DateTimeFields {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub microsecond: u32,
    pub fold: u8,
}

/// Where a pickle node keeps its pickle stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickleData<'a> {
    Inline(&'a [u8]),
    Frame(u32),
}

#[derive(Debug, Default, Clone)]
pub struct TreeWriter {
    buf: Vec<u8>,
    /// Where each memo marker and reference was written, in writing order (see `compact_memo`).
    /// Four are held inline: a small value's (a root dict's kept marker, a few keys) cost a
    /// heap allocation and its free, ~200 of a 10-key dict's ~5.6k-instruction `dumps`.
    marks: SmallVec<[MemoMark; 4]>,
    /// One bit per memo slot that a reference or a kept marker uses (see `compact_memo`).
    used: SmallVec<[u64; 1]>,
    /// Every slot below this one is used, so compaction keeps their markers and the numbers of
    /// the slots after them: a reference to a slot up to this one is final as written and needs
    /// no mark. Records (the same keys referenced in every dict) then mark nothing past their
    /// first dicts: 10k of them made 50k marks, 1.2 MB written and read back for nothing.
    used_below: u32,
}

/// A memo marker (`is_ref == false`) or a reference written at `buf[start..end]`.
#[derive(Debug, Clone, Copy)]
struct MemoMark {
    start: usize,
    end: usize,
    slot: u32,
    is_ref: bool,
}

impl TreeWriter {
    pub fn new() -> Self {
        Self {
            buf: Vec::with_capacity(64),
            ..Self::default()
        }
    }

    /// Empties the writer for another tree, keeping its buffer's capacity.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.marks.clear();
        self.used.clear();
        self.used_below = 0;
    }

    /// The buffer's capacity (what a writer kept for reuse holds on to).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            buf: Vec::with_capacity(capacity),
            ..Self::default()
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Drops everything written after `len` (used to roll back a subtree). The slots its
    /// references used stay used: their markers are kept, which costs a byte each and changes
    /// no value (a rollback is rare: a datetime whose tzinfo has no native form).
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
        while self.marks.last().is_some_and(|m| m.start >= len) {
            self.marks.pop();
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The bytes as written. A tree with memo markers must go through `compact_memo` instead,
    /// unless every slot it marks is referenced.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    #[inline]
    fn tag(&mut self, tag: Tag) {
        self.buf.push(tag as u8);
    }

    #[inline]
    fn uvarint(&mut self, v: u64) {
        put_uvarint(&mut self.buf, v);
    }

    #[inline]
    fn len_prefixed(&mut self, data: &[u8]) {
        self.uvarint(data.len() as u64);
        self.buf.extend_from_slice(data);
    }

    #[inline]
    pub fn none(&mut self) {
        self.tag(Tag::None_);
    }

    #[inline]
    pub fn bool(&mut self, v: bool) {
        self.tag(if v { Tag::True } else { Tag::False });
    }

    #[inline]
    pub fn int(&mut self, v: i64) {
        self.tag(Tag::Int);
        self.uvarint(zigzag(v));
    }

    /// An int outside i64, as two's complement little-endian bytes.
    pub fn big_int(&mut self, twos_complement_le: &[u8]) {
        self.tag(Tag::BigInt);
        self.len_prefixed(twos_complement_le);
    }

    #[inline]
    pub fn float(&mut self, v: f64) {
        self.tag(Tag::Float);
        self.buf.extend_from_slice(&v.to_bits().to_le_bytes());
    }

    pub fn complex(&mut self, real: f64, imag: f64) {
        self.tag(Tag::Complex);
        self.buf.extend_from_slice(&real.to_bits().to_le_bytes());
        self.buf.extend_from_slice(&imag.to_bits().to_le_bytes());
    }

    /// Str, StrSurrogates, Bytes, ByteArray or Decimal: a tag and a length-prefixed byte string.
    #[inline]
    pub fn byte_string(&mut self, tag: Tag, data: &[u8]) {
        debug_assert!(matches!(
            tag,
            Tag::Str | Tag::StrSurrogates | Tag::Bytes | Tag::ByteArray | Tag::Decimal
        ));
        self.tag(tag);
        self.len_prefixed(data);
    }

    /// FrameBytes, FrameByteArray or FrameStr: a tag and a frame index.
    pub fn frame_ref(&mut self, tag: Tag, frame: u32) {
        debug_assert!(matches!(
            tag,
            Tag::FrameBytes | Tag::FrameByteArray | Tag::FrameStr
        ));
        self.tag(tag);
        self.uvarint(frame as u64);
    }

    /// List, Tuple, Dict, Set or FrozenSet of `n` items (pairs for Dict); the items follow.
    #[inline]
    pub fn container(&mut self, tag: Tag, n: usize) {
        debug_assert!(matches!(
            tag,
            Tag::List | Tag::Tuple | Tag::Dict | Tag::Set | Tag::FrozenSet
        ));
        self.tag(tag);
        self.uvarint(n as u64);
    }

    /// Marks the next node as taking memo slot `slot` (the next one in this memo scope). The
    /// marker is provisional, dropped by `compact_memo` unless a reference to `slot` is written,
    /// or `kept`: for markers an encoder writes whatever the program state (a root object, which
    /// may contain itself), keeping them costs nothing in determinism and saves renumbering every
    /// reference after them.
    #[inline]
    pub fn memo(&mut self, slot: u32, kept: bool) {
        let start = self.buf.len();
        self.tag(Tag::Memo);
        self.marks.push(MemoMark {
            start,
            end: self.buf.len(),
            slot,
            is_ref: false,
        });
        if kept {
            self.use_slot(slot);
        }
    }

    /// A reference to the object that took memo slot `slot`.
    #[inline]
    pub fn reference(&mut self, slot: u32) {
        let start = self.buf.len();
        self.tag(Tag::Ref);
        self.uvarint(slot as u64);
        if slot < self.used_below {
            return; // used already, as every slot before it: final as written
        }
        if slot > self.used_below {
            // A slot below may yet go unused, and this one be renumbered: compaction must find it.
            self.marks.push(MemoMark {
                start,
                end: self.buf.len(),
                slot,
                is_ref: true,
            });
        }
        self.use_slot(slot);
    }

    #[inline]
    fn use_slot(&mut self, slot: u32) {
        let word = slot as usize / 64;
        if word >= self.used.len() {
            self.used.resize(word + 1, 0);
        }
        self.used[word] |= 1 << (slot % 64);
        while self.is_used(self.used_below) {
            self.used_below += 1;
        }
    }

    #[inline]
    fn is_used(&self, slot: u32) -> bool {
        self.used
            .get(slot as usize / 64)
            .is_some_and(|word| word >> (slot % 64) & 1 == 1)
    }

    fn clock(&mut self, f: &DateTimeFields) {
        self.buf.extend_from_slice(&[f.hour, f.minute, f.second]);
        self.uvarint(f.microsecond as u64);
        self.buf.push(f.fold);
    }

    /// A datetime; its tz node must follow.
    pub fn datetime(&mut self, f: &DateTimeFields) {
        self.tag(Tag::DateTime);
        self.buf.extend_from_slice(&f.year.to_le_bytes());
        self.buf.extend_from_slice(&[f.month, f.day]);
        self.clock(f);
    }

    pub fn date(&mut self, f: &DateTimeFields) {
        self.tag(Tag::Date);
        self.buf.extend_from_slice(&f.year.to_le_bytes());
        self.buf.extend_from_slice(&[f.month, f.day]);
    }

    /// A time; its tz node must follow.
    pub fn time(&mut self, f: &DateTimeFields) {
        self.tag(Tag::Time);
        self.clock(f);
    }

    pub fn timedelta(&mut self, days: i32, seconds: u32, microseconds: u32) {
        self.tag(Tag::TimeDelta);
        self.uvarint(zigzag(days as i64));
        self.uvarint(seconds as u64);
        self.uvarint(microseconds as u64);
    }

    pub fn tz_none(&mut self) {
        self.tag(Tag::TzNone);
    }

    pub fn tz_utc(&mut self) {
        self.tag(Tag::TzUtc);
    }

    pub fn tz_fixed(&mut self, offset_us: i64, name: Option<&[u8]>) {
        self.tag(Tag::TzFixed);
        self.uvarint(zigzag(offset_us));
        match name {
            Some(name) => {
                self.buf.push(1);
                self.len_prefixed(name);
            }
            None => self.buf.push(0),
        }
    }

    /// A `zoneinfo.ZoneInfo`: its key, and whether it came from `ZoneInfo.no_cache` (pickle keeps
    /// that too: cached and uncached zones compare differently in datetime arithmetic).
    pub fn tz_zoneinfo(&mut self, key: &[u8], no_cache: bool) {
        self.tag(Tag::TzZoneInfo);
        self.len_prefixed(key);
        self.buf.push(no_cache as u8);
    }

    pub fn uuid(&mut self, bytes: &[u8; 16], is_safe: i8) {
        self.tag(Tag::Uuid);
        self.buf.extend_from_slice(bytes);
        self.buf.push(is_safe as u8);
    }

    pub fn path(&mut self, flavour: u8, text: &[u8]) {
        self.tag(Tag::Path);
        self.buf.push(flavour);
        self.len_prefixed(text);
    }

    /// Starts an ndarray node; the dtype node follows, then `ndarray_end`.
    pub fn ndarray_begin(&mut self) {
        self.tag(Tag::NdArray);
    }

    pub fn ndarray_end(&mut self, flags: u8, shape: &[u64], frame: u32) {
        self.buf.push(flags);
        self.uvarint(shape.len() as u64);
        for &dim in shape {
            self.uvarint(dim);
        }
        self.uvarint(frame as u64);
    }

    /// Starts an ext node for registered tag `tag_index`; the meta node follows, then `ext_end`.
    pub fn ext_begin(&mut self, tag_index: u32) {
        self.tag(Tag::Ext);
        self.uvarint(tag_index as u64);
    }

    pub fn ext_end(&mut self, frames: &[u32]) {
        self.uvarint(frames.len() as u64);
        for &frame in frames {
            self.uvarint(frame as u64);
        }
    }

    /// A whole pickle node. `externals` are subtrees written by their own `TreeWriter`.
    pub fn pickle(
        &mut self,
        cloudpickle: bool,
        data: PickleData<'_>,
        buffers: &[u32],
        externals: &[Vec<u8>],
    ) {
        self.pickle_node(cloudpickle as u8, data, buffers, externals);
    }

    /// A pickle node of flavour 2: one stream of the payload's pickler session (a pickle island
    /// written where the walker met it; the payload's islands share one pickler memo).
    pub fn pickle_session(&mut self, data: PickleData<'_>, buffers: &[u32], externals: &[Vec<u8>]) {
        self.pickle_node(2, data, buffers, externals);
    }

    fn pickle_node(
        &mut self,
        flavour: u8,
        data: PickleData<'_>,
        buffers: &[u32],
        externals: &[Vec<u8>],
    ) {
        self.tag(Tag::Pickle);
        self.buf.push(flavour);
        match data {
            PickleData::Inline(bytes) => {
                self.buf.push(0);
                self.len_prefixed(bytes);
            }
            PickleData::Frame(index) => {
                self.buf.push(1);
                self.uvarint(index as u64);
            }
        }
        self.uvarint(buffers.len() as u64);
        for &frame in buffers {
            self.uvarint(frame as u64);
        }
        self.uvarint(externals.len() as u64);
        for external in externals {
            self.len_prefixed(external);
        }
    }
}

/// The final bytes of trees that share one memo scope (in the order a decoder reads them): memo
/// markers of slots that no reference uses are dropped and the others renumbered in order.
///
/// An encoder marks every object that *may* be referenced twice (one whose reference count says
/// something else holds it), which depends on what the rest of the program holds, not on the
/// value; keeping only the slots a reference actually uses makes the bytes depend on the value
/// alone, with aliasing kept exactly.
pub fn compact_memo(mut trees: Vec<TreeWriter>) -> Vec<Vec<u8>> {
    compact_in_place(&mut trees);
    trees.into_iter().map(|t| t.buf).collect()
}

impl TreeWriter {
    /// The finished bytes of a tree that is its own memo scope (see `compact_memo`).
    pub fn finish(mut self) -> Vec<u8> {
        compact_in_place(std::slice::from_mut(&mut self));
        self.buf
    }
}

/// `compact_memo` without allocating: markers only go and slot numbers only shrink, so each
/// tree is rewritten over itself, front to back (a memmove of the spans between marks).
fn compact_in_place(trees: &mut [TreeWriter]) {
    let Some(slots) = trees
        .iter()
        .flat_map(|t| t.marks.iter().filter(|m| !m.is_ref))
        .map(|m| m.slot as usize + 1)
        .max()
    else {
        return; // no memo marker at all: nothing to do
    };
    // The slots used anywhere in the scope (a reference in one tree may use a slot another marks).
    let mut used: SmallVec<[u64; 1]> = SmallVec::from_elem(0, slots.div_ceil(64));
    for tree in trees.iter() {
        for (all, &word) in used.iter_mut().zip(&tree.used) {
            *all |= word;
        }
    }
    if slots % 64 != 0 {
        *used.last_mut().expect("slots > 0") &= u64::MAX >> (64 - slots % 64);
    }
    let count: usize = used.iter().map(|w| w.count_ones() as usize).sum();
    if count == slots {
        // Every slot used (a root container's kept marker, keys referenced in order): the bytes
        // are final, and no table is built (a third of a 10-key dict's compaction once).
        return;
    }
    // The new number of each slot, None where no reference uses it (all of them when nothing
    // is referenced: the common case of objects merely held elsewhere).
    let mut renumbered: Vec<Option<u32>> = Vec::new();
    if count > 0 {
        let mut next = 0u32;
        renumbered = (0..slots)
            .map(|slot| {
                (used[slot / 64] >> (slot % 64) & 1 == 1).then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
    }
    for tree in trees.iter_mut() {
        let Some(first) = tree.marks.first() else {
            continue;
        };
        let buf = &mut tree.buf;
        let (mut write, mut read) = (first.start, first.start);
        for mark in &tree.marks {
            buf.copy_within(read..mark.start, write);
            write += mark.start - read;
            read = mark.end;
            // Slots beyond the scope's markers (none in a well-formed walk) keep their number.
            let slot = renumbered.get(mark.slot as usize).copied().flatten();
            match (mark.is_ref, slot) {
                (false, None) => {}
                (false, Some(_)) => {
                    buf[write] = Tag::Memo as u8;
                    write += 1;
                }
                (true, slot) => {
                    buf[write] = Tag::Ref as u8;
                    write += 1;
                    let mut v = slot.unwrap_or(mark.slot);
                    while v >= 0x80 {
                        buf[write] = (v as u8 & 0x7F) | 0x80;
                        v >>= 7;
                        write += 1;
                    }
                    buf[write] = v as u8;
                    write += 1;
                }
            }
        }
        let end = buf.len();
        buf.copy_within(read..end, write);
        buf.truncate(write + (end - read));
        tree.marks.clear();
    }
}
