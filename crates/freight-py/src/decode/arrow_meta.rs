//! The Arrow metadata `(schema, batches)` of an Ext node read straight from the tree into an
//! `ArrowMeta` (see `crate::arrow`), for serializers that declare `arrow_meta`. Only the exact
//! form the walker writes is read here: a Tuple of a Bytes and a List of array nodes, each a
//! Tuple `(length, offset, validity, buffers, children)` of non-negative Ints, None, and Tuples.
//! Memo markers may precede the schema bytes and the empty tuples (shared objects), and
//! references may point at those; they fill and read the decoder's memo as `node` would.
//! Anything else (earlier versions' dicts, a forged shape) gives None with nothing consumed,
//! and the node is decoded into Python objects as before, where its errors are reported.

use freight_core::{Reader, Tag};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::arrow::{ArrowMeta, RawNode};
use crate::decode::tree::TreeDecoder;
use crate::errors::Result;

/// Deeper array nodes than this are left to the general path (which refuses them past 128).
const MAX_DEPTH: usize = 64;

/// A parse in progress: the memo slots its markers took, filled only if it succeeds.
struct Parse<'t, 'c, 'py> {
    decoder: &'t TreeDecoder<'c, 'py>,
    memo: Vec<Py<PyAny>>,
}

impl<'py> Parse<'_, '_, 'py> {
    fn slot(&self, index: u64) -> Option<Bound<'py, PyAny>> {
        let py = self.decoder.py;
        let index = usize::try_from(index).ok()?;
        let base = self.decoder.memo_len();
        match index.checked_sub(base) {
            None => self.decoder.memo_get(index).map(|o| o.bind(py).clone()),
            Some(i) => self.memo.get(i).map(|o| o.bind(py).clone()),
        }
    }

    fn size(r: &mut Reader<'_>) -> Option<usize> {
        match r.tag().ok()? {
            Tag::Int => usize::try_from(r.ivarint("an int").ok()?).ok(),
            _ => None,
        }
    }

    /// A tuple's item count, for a Tuple node or a reference to (or memoized) empty tuple.
    fn tuple(&mut self, r: &mut Reader<'_>) -> Option<usize> {
        match r.tag().ok()? {
            Tag::Tuple => r.count(1, "a tuple").ok(),
            Tag::Memo => {
                if r.tag().ok()? != Tag::Tuple || r.count(1, "a tuple").ok()? != 0 {
                    return None;
                }
                self.memo
                    .push(PyTuple::empty(self.decoder.py).into_any().unbind());
                Some(0)
            }
            Tag::Ref => {
                let obj = self.slot(r.uvarint("a memo slot").ok()?)?;
                let t = obj.cast::<PyTuple>().ok()?;
                t.is_empty().then_some(0)
            }
            _ => None,
        }
    }

    fn schema(&mut self, r: &mut Reader<'_>) -> Option<Vec<u8>> {
        match r.tag().ok()? {
            Tag::Bytes => Some(r.byte_string("bytes").ok()?.to_vec()),
            Tag::Memo => {
                if r.tag().ok()? != Tag::Bytes {
                    return None;
                }
                let data = r.byte_string("bytes").ok()?;
                self.memo
                    .push(PyBytes::new(self.decoder.py, data).into_any().unbind());
                Some(data.to_vec())
            }
            Tag::Ref => {
                let obj = self.slot(r.uvarint("a memo slot").ok()?)?;
                Some(obj.cast::<PyBytes>().ok()?.as_bytes().to_vec())
            }
            _ => None,
        }
    }

    fn node(&mut self, r: &mut Reader<'_>, depth: usize) -> Option<RawNode> {
        if depth > MAX_DEPTH || self.tuple(r)? != 5 {
            return None;
        }
        let len = Self::size(r)?;
        let offset = Self::size(r)?;
        let validity = match r.clone().tag().ok()? {
            Tag::None_ => {
                r.tag().ok()?;
                None
            }
            _ => Some(Self::size(r)?),
        };
        let n = self.tuple(r)?;
        let buffers = (0..n).map(|_| Self::size(r)).collect::<Option<Vec<_>>>()?;
        let n = self.tuple(r)?;
        let children = (0..n)
            .map(|_| self.node(r, depth + 1))
            .collect::<Option<Vec<_>>>()?;
        Some(RawNode {
            len,
            offset,
            validity,
            buffers,
            children,
        })
    }

    fn meta(&mut self, r: &mut Reader<'_>) -> Option<ArrowMeta> {
        if self.tuple(r)? != 2 {
            return None;
        }
        let schema = self.schema(r)?;
        if r.tag().ok()? != Tag::List {
            return None;
        }
        let n = r.count(1, "a list").ok()?;
        let batches = (0..n)
            .map(|_| self.node(r, 0))
            .collect::<Option<Vec<_>>>()?;
        Some(ArrowMeta { schema, batches })
    }
}

impl<'py> TreeDecoder<'_, 'py> {
    /// The Arrow metadata at `r` as an `ArrowMeta`, when it has the walker's form (see the
    /// module's note); None, with `r` and the memo untouched, otherwise.
    pub(crate) fn arrow_meta(&mut self, r: &mut Reader<'_>) -> Result<Option<Bound<'py, PyAny>>> {
        let mut probe = r.clone();
        let mut parse = Parse {
            decoder: self,
            memo: Vec::new(),
        };
        let Some(meta) = parse.meta(&mut probe) else {
            return Ok(None);
        };
        let memo = parse.memo;
        let obj = Bound::new(self.py, meta)?.into_any();
        for filled in memo {
            self.memo_push(filled);
        }
        *r = probe;
        Ok(Some(obj))
    }
}
