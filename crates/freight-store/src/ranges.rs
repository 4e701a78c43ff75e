//! Ranged reads of one stored value: its first bytes with its metadata (one request: what a lazy
//! reader or `info` opens with), and the frames of a lazy read, pinned to the version whose
//! header was read (a value replaced meanwhile is refused, never mixed), coalesced and split in
//! parallel pieces, either returned as buffers or written straight where they lie in the
//! caller's buffer of the object's length (one copy, from the network into place).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::{GetOptions, GetRange, GetResult, ObjectStore, ObjectStoreExt};

use crate::error::{Error, Result};
use crate::store::{block_on, Meta, Store, RANGE, RANGES_IN_FLIGHT};

/// Requests of a lazy read are at least this long: a read is split in `RANGES_IN_FLIGHT` equal
/// pieces (all in flight at once: one stream of a loopback S3 server moved 65-90 MB/s, and each
/// request costs a round trip, so 16 pieces of 2 MiB for 32 MiB were slower than 8 of 4 MiB).
const LAZY_PIECE: u64 = 1 << 20;
/// Ranges of a lazy read closer than this are read in one request (the bytes between are
/// fewer than a request costs in latency on S3; frames are at most 64 bytes apart).
const COALESCE: u64 = 64 << 10;

impl Store {
    /// The first `len` bytes of a value (fewer if it is shorter) and its metadata, from one
    /// ranged GET (its answer carries the object's size and version): a lazy reader's header
    /// costs one round trip, not a HEAD and then a GET.
    pub fn get_head(&self, key: &str, len: u64) -> Result<(Bytes, Meta)> {
        let path = self.path(key)?;
        block_on(async {
            let inner = self.inner()?;
            if len == 0 {
                return Ok((Bytes::new(), inner.head(&path).await?));
            }
            let options = GetOptions {
                range: Some(GetRange::Bounded(0..len)),
                ..Default::default()
            };
            match inner.get_opts(&path, options).await {
                Ok(got) => {
                    let meta = got.meta.clone();
                    Ok((got.bytes().await?, meta))
                }
                // An empty object has no byte 0 to start a range at (S3 answers 416).
                Err(e @ object_store::Error::NotFound { .. }) => Err(e),
                Err(e) => match inner.head(&path).await {
                    Ok(meta) if meta.size == 0 => Ok((Bytes::new(), meta)),
                    _ => Err(e),
                },
            }
        })
        .map(|(bytes, meta)| (bytes, self.meta(key, &meta)))
        .map_err(|e| self.err("info", key, e))
    }

    /// Bytes of several ranges of one version of a value, for a lazy reader: `etag` is the
    /// version its header came from, and a value replaced since is refused (`Changed`), never
    /// mixed with the old one (each request asks for that version and its answer is checked).
    /// Ranges closer than `COALESCE` go in one request, long ones are split in parallel pieces,
    /// `RANGES_IN_FLIGHT` requests at a time. Returns one buffer per range, in order.
    pub fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        etag: Option<&str>,
    ) -> Result<Vec<Bytes>> {
        let path = self.path(key)?;
        let requests = coalesce(ranges);
        let changed = AtomicBool::new(false);
        let fetched = block_on(async {
            let inner = self.inner()?;
            let out = futures::stream::iter(requests.iter().cloned())
                .map(|range| {
                    let (path, changed) = (&path, &changed);
                    async move {
                        match get_pinned(inner.as_ref(), path, range, etag, changed).await? {
                            Some(got) => got.bytes().await,
                            None => Ok(Bytes::new()),
                        }
                    }
                })
                .buffered(RANGES_IN_FLIGHT)
                .try_collect::<Vec<_>>()
                .await;
            settle(inner.as_ref(), &path, etag, &changed, out).await
        });
        let fetched = self.pinned_result(key, fetched)?;
        // Each asked-for range out of the requests that hold it.
        let mut out = Vec::with_capacity(ranges.len());
        for range in ranges {
            let mut parts = Vec::new();
            for (request, bytes) in requests.iter().zip(&fetched) {
                let start = range.start.max(request.start);
                let end = range.end.min(request.end);
                if start < end {
                    let (a, b) = (
                        (start - request.start) as usize,
                        (end - request.start) as usize,
                    );
                    if b > bytes.len() {
                        return Err(self.changed(key));
                    }
                    parts.push(bytes.slice(a..b));
                }
            }
            out.push(match parts.len() {
                0 => Bytes::new(),
                1 => parts.pop().expect("one part"),
                _ => Bytes::from(parts.concat()),
            });
        }
        Ok(out)
    }

    /// Reads `ranges` of one version of a value (as `get_ranges`) into `dest`, a buffer of at
    /// least the object's length, each byte at its offset in the object: every piece is copied
    /// from the network into place as it arrives (no buffer per piece, no joining of pieces).
    /// The bytes between coalesced ranges are written too (the object's own bytes).
    pub fn get_ranges_into(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        etag: Option<&str>,
        dest: &mut [u8],
    ) -> Result<()> {
        let path = self.path(key)?;
        let requests = coalesce(ranges);
        if let Some(last) = requests.last().filter(|r| r.end > dest.len() as u64) {
            return Err(Error::Backend {
                url: self.url.clone(),
                op: "load",
                key: key.to_owned(),
                message: format!(
                    "bytes up to {} asked into a buffer of {}",
                    last.end,
                    dest.len()
                ),
                hint: "",
            });
        }
        // One disjoint slice of `dest` per request (coalesced requests are sorted and disjoint).
        let mut pieces = Vec::with_capacity(requests.len());
        let (mut rest, mut at) = (dest, 0u64);
        for r in &requests {
            let (_, tail) = rest.split_at_mut((r.start - at) as usize);
            let (piece, tail) = tail.split_at_mut((r.end - r.start) as usize);
            pieces.push((r.clone(), piece));
            (rest, at) = (tail, r.end);
        }
        let changed = AtomicBool::new(false);
        let short = AtomicBool::new(false);
        let done = block_on(async {
            let inner = self.inner()?;
            let out = futures::stream::iter(pieces)
                .map(|(range, piece)| {
                    let (path, changed, short) = (&path, &changed, &short);
                    async move {
                        let Some(got) =
                            get_pinned(inner.as_ref(), path, range, etag, changed).await?
                        else {
                            return Ok(());
                        };
                        let mut stream = got.into_stream();
                        let mut pos = 0;
                        while let Some(chunk) = stream.try_next().await? {
                            let Some(into) = piece.get_mut(pos..pos + chunk.len()) else {
                                short.store(true, Ordering::Relaxed);
                                return Ok(());
                            };
                            into.copy_from_slice(&chunk);
                            pos += chunk.len();
                        }
                        if pos != piece.len() {
                            short.store(true, Ordering::Relaxed);
                        }
                        Ok(())
                    }
                })
                .buffer_unordered(RANGES_IN_FLIGHT)
                .try_collect::<Vec<()>>()
                .await;
            settle(inner.as_ref(), &path, etag, &changed, out).await
        });
        self.pinned_result(key, done)?;
        if short.load(Ordering::Relaxed) {
            // An answer of another length than asked: not the version the header described.
            return Err(self.changed(key));
        }
        Ok(())
    }

    fn changed(&self, key: &str) -> Error {
        Error::Changed {
            url: self.url.clone(),
            key: key.to_owned(),
        }
    }

    /// A pinned read's outcome as the caller sees it: `None` (replaced) is `Changed`.
    fn pinned_result<T>(&self, key: &str, got: object_store::Result<Option<T>>) -> Result<T> {
        got.map_err(|e| self.err("load", key, e))?
            .ok_or_else(|| self.changed(key))
    }
}

/// One ranged GET of version `etag` of `path`; None (and `changed` set) when the server has
/// another version now.
async fn get_pinned(
    inner: &dyn ObjectStore,
    path: &object_store::path::Path,
    range: Range<u64>,
    etag: Option<&str>,
    changed: &AtomicBool,
) -> object_store::Result<Option<GetResult>> {
    let options = GetOptions {
        range: Some(GetRange::Bounded(range)),
        if_match: etag.map(str::to_owned),
        ..Default::default()
    };
    match inner.get_opts(path, options).await {
        Ok(got) if etag.is_some() && got.meta.e_tag.as_deref() != etag => {
            changed.store(true, Ordering::Relaxed);
            Ok(None)
        }
        Ok(got) => Ok(Some(got)),
        Err(object_store::Error::Precondition { .. }) => {
            changed.store(true, Ordering::Relaxed);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The outcome of a pinned read's requests: None when the value was replaced.
async fn settle<T>(
    inner: &dyn ObjectStore,
    path: &object_store::path::Path,
    etag: Option<&str>,
    changed: &AtomicBool,
    out: object_store::Result<T>,
) -> object_store::Result<Option<T>> {
    if changed.load(Ordering::Relaxed) {
        return Ok(None);
    }
    match out {
        Ok(out) => Ok(Some(out)),
        // Some servers check the range before the condition (a shorter new value answers 416):
        // with a version pinned, a failure is a replacement when the value is gone or another
        // version now.
        Err(e) if etag.is_some() => match inner.head(path).await {
            Ok(meta) if meta.e_tag.as_deref() == etag => Err(e),
            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(_) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// The requests that read `ranges`: sorted, merged when closer than `COALESCE`, and split in
/// pieces of at least `LAZY_PIECE` bytes, about `RANGES_IN_FLIGHT` of them in all, so that a
/// long read goes out as parallel requests in one round.
fn coalesce(ranges: &[Range<u64>]) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges.iter().filter(|r| !r.is_empty()).cloned().collect();
    sorted.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match merged.last_mut() {
            Some(last) if r.start <= last.end + COALESCE => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    let total: u64 = merged.iter().map(|r| r.end - r.start).sum();
    let piece = total
        .div_ceil(RANGES_IN_FLIGHT as u64)
        .clamp(LAZY_PIECE, RANGE);
    merged
        .into_iter()
        .flat_map(|r| {
            (r.start..r.end)
                .step_by(piece as usize)
                .map(move |s| s..(s + piece).min(r.end))
        })
        .collect()
}

#[cfg(test)]
mod coalesce_tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one range is a case here
    fn near_ranges_merge_and_long_ones_split() {
        assert_eq!(coalesce(&[10..20, 0..5, 30..40]), vec![0..40]);
        assert_eq!(
            coalesce(&[0..5, COALESCE + 10..COALESCE + 20]),
            vec![0..5, COALESCE + 10..COALESCE + 20]
        );
        let piece = LAZY_PIECE;
        assert_eq!(coalesce(&[0..piece + 1]), vec![0..piece, piece..piece + 1]);
        // 32 MiB: eight requests of 4 MiB, one round of RANGES_IN_FLIGHT.
        let big = coalesce(&[0..32 << 20]);
        assert_eq!(big.len(), 8);
        assert!(big.iter().all(|r| r.end - r.start == 4 << 20));
        assert_eq!(coalesce(&[5..5]), Vec::<Range<u64>>::new());
        // Overlapping ranges merge: the requests stay disjoint (get_ranges_into splits its
        // buffer by them).
        assert_eq!(coalesce(&[0..10, 5..20]), vec![0..20]);
    }
}
