//! Per-frame compression: lz4 or zstd, in independent blocks compressed and decompressed in
//! parallel on all cores, with an optional byte-shuffle filter (as blosc does) for frames of
//! fixed-size items, and the `auto` policy that decides per frame from samples.
//!
//! Stored layout of a compressed frame (docs/FORMAT.md):
//! `varint block_size, varint n_blocks, n × varint compressed block length, the blocks`.
//! Each block holds `block_size` raw bytes (the last one the rest), shuffled first when the
//! frame table says so.

use rayon::prelude::*;

use crate::bits::codec;
use crate::error::{Error, Result};
use crate::reader::Reader;
use crate::shuffle::{shuffle, unshuffle};
use crate::varint::put_uvarint;

/// A compression algorithm and its settings, as a writer chooses it (its id in the frame table
/// is `bits::codec`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Lz4,
    Zstd(i32),
}

impl Algorithm {
    pub fn id(self) -> u8 {
        match self {
            Algorithm::Lz4 => codec::LZ4,
            Algorithm::Zstd(_) => codec::ZSTD,
        }
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Raw bytes per block written by this build (readers accept up to MAX_BLOCK).
pub const BLOCK: usize = 1 << 20;
/// Largest block a reader accepts: bounds the memory one block can claim.
pub const MAX_BLOCK: u64 = 64 << 20;

fn compress_block(algorithm: Algorithm, raw: &[u8], out: &mut Vec<u8>) {
    match algorithm {
        Algorithm::Lz4 => {
            // Grown, never zeroed again: lz4 writes what it returns.
            let bound = lz4_flex::block::get_maximum_output_size(raw.len());
            if out.len() < bound {
                out.resize(bound, 0);
            }
            let n = lz4_flex::block::compress_into(raw, &mut out[..bound])
                .expect("output sized by get_maximum_output_size");
            out.truncate(n);
        }
        Algorithm::Zstd(level) => {
            out.clear();
            out.reserve(zstd::zstd_safe::compress_bound(raw.len()));
            zstd::zstd_safe::compress(out, raw, level).expect("output sized by compress_bound");
        }
    }
}

/// One LZ4 block through liblz4's `LZ4_decompress_safe`, the reference decoder: it never reads
/// past `stored` nor writes past `raw` whatever the input (its "safe" contract, fuzzed upstream).
/// lz4_flex decodes the long runs of equal bytes that byte-shuffled numbers give one byte at a
/// time (matches at offset 1), several times slower than liblz4 on shuffled numbers (measured:
/// docs/ARCHITECTURE.md, "Compression, checksums and signatures").
fn lz4_decompress(stored: &[u8], raw: &mut [u8]) -> std::result::Result<usize, String> {
    let (Ok(stored_len), Ok(capacity)) = (i32::try_from(stored.len()), i32::try_from(raw.len()))
    else {
        return Err("a block of 2 GiB or more".into());
    };
    // SAFETY: both pointers are valid for the lengths given, which fit in an i32 (checked above);
    // LZ4_decompress_safe reads at most `stored_len` bytes and writes at most `capacity` bytes.
    let n = unsafe {
        lz4_sys::LZ4_decompress_safe(
            stored.as_ptr().cast(),
            raw.as_mut_ptr().cast(),
            stored_len,
            capacity,
        )
    };
    usize::try_from(n).map_err(|_| "malformed input".to_string())
}

fn decompress_block(codec_id: u8, stored: &[u8], raw: &mut [u8], index: usize) -> Result<()> {
    let produced = match codec_id {
        codec::LZ4 => lz4_decompress(stored, raw)
            .map_err(|e| Error::corrupt(format!("lz4 block {index} does not decompress: {e}")))?,
        codec::ZSTD => zstd::zstd_safe::decompress(raw, stored).map_err(|code| {
            Error::corrupt(format!(
                "zstd block {index} does not decompress: {}",
                zstd::zstd_safe::get_error_name(code)
            ))
        })?,
        other => return Err(Error::corrupt(format!("unknown codec {other}"))),
    };
    if produced != raw.len() {
        return Err(Error::corrupt(format!(
            "block {index} decompresses to {produced} bytes, not the {} its frame declares",
            raw.len()
        )));
    }
    Ok(())
}

thread_local! {
    /// A thread's (shuffled input, compressed output) buffers, kept between blocks and calls:
    /// fresh ones cost their page faults (and lz4's output its zeroing) every block.
    static COMPRESS_SCRATCH: std::cell::RefCell<(Vec<u8>, Vec<u8>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// One block compressed with this thread's scratch buffers, handed to `keep`.
fn with_compressed_block<R>(
    algorithm: Algorithm,
    block: &[u8],
    shuffle_itemsize: Option<usize>,
    keep: impl FnOnce(&[u8]) -> R,
) -> R {
    COMPRESS_SCRATCH.with(|scratch| {
        let (shuffled, out) = &mut *scratch.borrow_mut();
        let input = match shuffle_itemsize {
            Some(itemsize) => {
                shuffle(block, itemsize, shuffled);
                &shuffled[..]
            }
            None => block,
        };
        compress_block(algorithm, input, out);
        keep(out)
    })
}

fn put_block_table(stored: &mut Vec<u8>, lens: impl ExactSizeIterator<Item = usize>) {
    put_uvarint(stored, BLOCK as u64);
    put_uvarint(stored, lens.len() as u64);
    for len in lens {
        put_uvarint(stored, len as u64);
    }
}

/// Compresses a frame into its stored layout (blocks in parallel; a frame of one block on the
/// calling thread, where a hand-off to the pool would cost more than it saves).
pub fn compress(algorithm: Algorithm, raw: &[u8], shuffle_itemsize: Option<usize>) -> Vec<u8> {
    if raw.is_empty() {
        let mut stored = Vec::with_capacity(4);
        put_block_table(&mut stored, std::iter::empty());
        return stored;
    }
    if raw.len() <= BLOCK {
        return with_compressed_block(algorithm, raw, shuffle_itemsize, |block| {
            let mut stored = Vec::with_capacity(16 + block.len());
            put_block_table(&mut stored, [block.len()].into_iter());
            stored.extend_from_slice(block);
            stored
        });
    }
    let blocks: Vec<Vec<u8>> = crate::parallel::run(|| {
        raw.par_chunks(BLOCK)
            .map(|block| with_compressed_block(algorithm, block, shuffle_itemsize, <[u8]>::to_vec))
            .collect()
    });
    let mut stored =
        Vec::with_capacity(16 + blocks.len() * 4 + blocks.iter().map(Vec::len).sum::<usize>());
    put_block_table(&mut stored, blocks.iter().map(Vec::len));
    for block in &blocks {
        stored.extend_from_slice(block);
    }
    stored
}

/// The block table of a stored frame: the block size and each block's stored bytes, every size
/// checked against the frame's `raw_len` and stored length.
fn blocks(stored: &[u8], raw_len: usize) -> Result<(usize, Vec<&[u8]>)> {
    let mut r = Reader::new(stored);
    let block = r.uvarint("a block size")?;
    if block == 0 || block > MAX_BLOCK {
        return Err(Error::corrupt(format!(
            "block size {block} is out of range"
        )));
    }
    let block = block as usize;
    let n = r.count(1, "the block table")?;
    if n != raw_len.div_ceil(block) {
        return Err(Error::corrupt(format!(
            "{n} blocks of {block} bytes cannot hold the {raw_len} bytes the frame declares"
        )));
    }
    let mut lens = Vec::with_capacity(n);
    for _ in 0..n {
        lens.push(r.uvarint("a block length")?);
    }
    let body = &stored[r.position()..];
    if lens.iter().try_fold(0u64, |acc, &l| acc.checked_add(l)) != Some(body.len() as u64) {
        return Err(Error::corrupt(
            "the block lengths do not add up to the frame's stored length",
        ));
    }
    let mut inputs = Vec::with_capacity(n);
    let mut at = 0usize;
    for &len in &lens {
        inputs.push(&body[at..at + len as usize]);
        at += len as usize;
    }
    Ok((block, inputs))
}

/// Checks a stored frame's block table without decompressing anything.
pub fn check_layout(stored: &[u8], raw_len: usize) -> Result<()> {
    blocks(stored, raw_len).map(|_| ())
}

/// Decompresses a stored frame into `raw` (exactly its declared raw length), blocks in parallel.
/// Every size is checked before use; a block that decompresses to another size is an error.
pub fn decompress(
    codec_id: u8,
    stored: &[u8],
    shuffle_itemsize: Option<usize>,
    raw: &mut [u8],
) -> Result<()> {
    let (block, inputs) = blocks(stored, raw.len())?;
    let one = |index: usize, input: &[u8], out: &mut [u8]| match shuffle_itemsize {
        Some(itemsize) => SCRATCH.with(|scratch| {
            // One scratch block per thread, kept between calls: a fresh 1 MiB buffer per
            // block would cost its page faults every time.
            let mut scratch = scratch.borrow_mut();
            if scratch.len() < out.len() {
                scratch.resize(out.len(), 0);
            }
            let scratch = &mut scratch[..out.len()];
            decompress_block(codec_id, input, scratch, index)?;
            unshuffle(scratch, itemsize, out);
            Ok(())
        }),
        None => decompress_block(codec_id, input, out, index),
    };
    if inputs.len() <= 1 {
        // One block: on the calling thread (a hand-off to the pool costs more than it saves).
        return match inputs.first() {
            Some(input) => one(0, input, raw),
            None => Ok(()),
        };
    }
    crate::parallel::run(|| {
        inputs
            .into_par_iter()
            .zip(raw.par_chunks_mut(block))
            .enumerate()
            .try_for_each(|(index, (input, out))| one(index, input, out))
    })
}

/// What `auto` does with a frame, decided from samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Raw,
    Compress { shuffle: bool },
}

/// Frames below this are never compressed by `auto`: even its cheapest probe (three lz4 samples)
/// would be a noticeable share of writing them raw.
pub const AUTO_MIN: usize = 1 << 20;
/// Bytes of each of the `SAMPLES` evenly spaced samples `decide` compresses.
const SAMPLE: usize = 4 * 1024;
const SAMPLES: usize = 3;

/// The link speed `auto` weighs compression against unless told otherwise: 1 GB/s.
pub const DEFAULT_TRANSPORT_SPEED: u64 = 1_000_000_000;

/// `auto`'s cost model: nanoseconds per raw byte that lz4 takes on one core, from what the samples
/// compress to, never from a clock (a timed decision made the same value come out at very different
/// sizes from one run to the next). Measured once with `examples/lz4_cost.rs` (1 MiB inputs, one
/// core, this project's 2-core x86_64 CI machine, 2026-11): byte-shuffle 1.0 ns/B, then lz4 on
/// shuffled numbers (long runs) 0.05-0.4 ns/B; unshuffled, lz4 costs ~0.4 ns/B on data it cannot
/// shrink (random bytes 0.42, random float64 0.60) and far more in between, where it finds many
/// short matches (int64 in 0..1000: 1.54 ns/B at ratio 0.39; text-like: 3.6 ns/B at 0.62).
const SHUFFLED_NS_PER_BYTE: f64 = 1.3;
const PLAIN_BASE_NS_PER_BYTE: f64 = 0.4;
/// Times r(1-r) (r the compressed ratio): the hump of short matches between the extremes.
const PLAIN_MATCH_NS_PER_BYTE: f64 = 6.0;
/// Cores the model assumes compression runs on (frames are compressed in 1 MiB blocks in
/// parallel): fixed, so that a frame's decision does not depend on the machine writing it.
const ASSUMED_CORES: f64 = 2.0;

/// What lz4 makes of samples of a frame, with and without shuffle (sizes only).
#[derive(Default)]
struct Samples {
    total: usize,
    plain: usize,
    /// With shuffle (when the frame has an item size).
    shuffled: usize,
}

impl Samples {
    /// Adds sample `i` of `SAMPLES` evenly spaced ones.
    fn add(
        &mut self,
        raw: &[u8],
        itemsize: Option<usize>,
        i: usize,
        bufs: &mut (Vec<u8>, Vec<u8>),
    ) {
        let len = SAMPLE.min(raw.len());
        let step = (raw.len() - len) / SAMPLES;
        let part = &raw[step / 2 + i * step..][..len];
        let (out, shuffled) = bufs;
        self.total += len;
        compress_block(Algorithm::Lz4, part, out);
        self.plain += out.len();
        if let Some(itemsize) = itemsize {
            shuffle(part, itemsize, shuffled);
            compress_block(Algorithm::Lz4, shuffled, out);
            self.shuffled += out.len();
        }
    }

    /// Nanoseconds of link time compressing saves, less the nanoseconds it takes (by the cost
    /// model), per byte of the frame, with or without shuffle.
    fn gain(&self, shuffled: bool, transport_speed: u64) -> f64 {
        let size = if shuffled { self.shuffled } else { self.plain };
        let ratio = size as f64 / self.total as f64;
        let saved = (1.0 - ratio).max(0.0) * 1e9 / transport_speed.max(1) as f64;
        let cost = if shuffled {
            SHUFFLED_NS_PER_BYTE
        } else {
            PLAIN_BASE_NS_PER_BYTE + PLAIN_MATCH_NS_PER_BYTE * ratio * (1.0 - ratio).max(0.0)
        };
        saved - cost / ASSUMED_CORES
    }

    /// The better variant (shuffle or not) and its gain; only variants that shrink the samples
    /// to `AUTO_RATIO` or less count.
    fn best(&self, itemsize: Option<usize>, transport_speed: u64) -> Option<(bool, f64)> {
        let limit = AUTO_RATIO * self.total as f64;
        let mut best: Option<(bool, f64)> = None;
        for (shuffled, size) in [(false, self.plain), (true, self.shuffled)] {
            if shuffled && itemsize.is_none() || size as f64 > limit {
                continue;
            }
            let gain = self.gain(shuffled, transport_speed);
            if best.is_none_or(|(_, g)| gain > g) {
                best = Some((shuffled, gain));
            }
        }
        best.filter(|&(_, gain)| gain > 0.0)
    }
}

/// Says what `auto` does with a frame, from lz4 samples: compress when the bytes saved, sent at
/// `transport_speed` (bytes per second), take longer to send than compressing takes by the fixed
/// cost model above, and the samples shrink to 90% or less. Random float64 shrinks only a little
/// with shuffle (its exponent bytes): not worth it at the default link speed; integers in a small
/// range shrink to a small fraction: worth it. The middle sample decides alone when even it is not
/// worth compressing (a third of the probe on incompressible data). Sizes only: the same bytes
/// always get the same decision.
pub fn decide(
    raw: &[u8],
    itemsize: Option<usize>,
    min_size: usize,
    transport_speed: u64,
) -> Decision {
    if raw.len() < min_size.max(1) {
        return Decision::Raw;
    }
    let mut bufs = (Vec::new(), Vec::new());
    let mut s = Samples::default();
    s.add(raw, itemsize, SAMPLES / 2, &mut bufs);
    let several = raw.len() >= SAMPLES * SAMPLE;
    if several && s.best(itemsize, transport_speed).is_none() {
        return Decision::Raw;
    }
    for i in (0..SAMPLES).filter(|&i| i != SAMPLES / 2 && several) {
        s.add(raw, itemsize, i, &mut bufs);
    }
    match s.best(itemsize, transport_speed) {
        Some((shuffle, _)) => Decision::Compress { shuffle },
        None => Decision::Raw,
    }
}

/// Compression is never kept unless the samples shrink to at most this fraction.
pub const AUTO_RATIO: f64 = 0.9;

/// Whether shuffling helps this frame (samples compared with lz4); for explicit codecs.
pub fn shuffle_helps(raw: &[u8], itemsize: usize) -> bool {
    let mut s = Samples::default();
    let mut bufs = (Vec::new(), Vec::new());
    for i in 0..SAMPLES {
        s.add(raw, Some(itemsize), i, &mut bufs);
    }
    s.shuffled < s.plain
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn numeric(n: usize) -> Vec<u8> {
        (0..n as u64)
            .flat_map(|i| (i % 1000).to_le_bytes())
            .collect()
    }

    #[test]
    fn every_codec_and_shuffle_round_trips_every_size() {
        for len in [
            0usize,
            1,
            7,
            8,
            100,
            BLOCK - 1,
            BLOCK,
            BLOCK + 13,
            3 * BLOCK + 5,
        ] {
            let raw: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            for codec in [Algorithm::Lz4, Algorithm::Zstd(3), Algorithm::Zstd(-1)] {
                for itemsize in [None, Some(2), Some(8), Some(3)] {
                    let stored = compress(codec, &raw, itemsize);
                    let mut back = vec![0u8; len];
                    decompress(codec.id(), &stored, itemsize, &mut back).unwrap();
                    assert_eq!(back, raw, "{codec:?} {itemsize:?} {len}");
                }
            }
        }
    }

    #[test]
    fn shuffle_makes_numeric_data_smaller() {
        let raw = numeric(1 << 17);
        let plain = compress(Algorithm::Lz4, &raw, None).len();
        let shuffled = compress(Algorithm::Lz4, &raw, Some(8)).len();
        assert!(shuffled < plain, "{shuffled} >= {plain}");
        assert!(shuffle_helps(&raw, 8));
    }

    const GBPS: u64 = DEFAULT_TRANSPORT_SPEED;

    #[test]
    fn auto_skips_small_and_random_frames() {
        assert_eq!(decide(&[0u8; 100], None, AUTO_MIN, GBPS), Decision::Raw);
        let mut x = 0x12345678u64;
        let random: Vec<u8> = (0..1 << 20)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(decide(&random, Some(8), AUTO_MIN, GBPS), Decision::Raw);
        assert!(matches!(
            decide(&numeric(1 << 20), Some(8), AUTO_MIN, GBPS),
            Decision::Compress { .. }
        ));
        // Barely compressible (random float64: the exponents shrink with shuffle) is not worth
        // it at 1 GB/s, but is over a slow link.
        let floats: Vec<u8> = (0..1u64 << 17)
            .flat_map(|i| {
                (1.0 + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 12) as f64 / (1u64 << 52) as f64)
                    .to_le_bytes()
            })
            .collect();
        assert_eq!(decide(&floats, Some(8), AUTO_MIN, GBPS), Decision::Raw);
        let slow = decide(&floats, Some(8), AUTO_MIN, 1_000_000); // 1 MB/s
        assert_eq!(slow, Decision::Compress { shuffle: true });
        // Half noise, half zeros: the same decision every time (it was timed, and flipped).
        let half: Vec<u8> = random[..1 << 19]
            .iter()
            .copied()
            .chain(std::iter::repeat_n(0u8, 1 << 19))
            .collect();
        let first = decide(&half, None, AUTO_MIN, GBPS);
        assert!((0..20).all(|_| decide(&half, None, AUTO_MIN, GBPS) == first));
    }

    #[test]
    fn lying_sizes_are_errors() {
        let raw = numeric(1000);
        let stored = compress(Algorithm::Lz4, &raw, None);
        // Declared raw length larger than what the blocks hold.
        let mut big = vec![0u8; raw.len() + 1];
        assert!(decompress(codec::LZ4, &stored, None, &mut big).is_err());
        let mut small = vec![0u8; raw.len() - 1];
        assert!(decompress(codec::LZ4, &stored, None, &mut small).is_err());
        assert!(decompress(codec::ZSTD, &stored, None, &mut vec![0u8; raw.len()]).is_err());
    }

    proptest! {
        #[test]
        fn corrupt_stored_frames_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..3000), flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4)) {
            for codec in [Algorithm::Lz4, Algorithm::Zstd(1)] {
                let mut stored = compress(codec, &raw, Some(4));
                for (at, flip) in &flips {
                    let i = at.index(stored.len());
                    stored[i] ^= flip;
                }
                let mut back = vec![0u8; raw.len()];
                let _ = decompress(codec.id(), &stored, Some(4), &mut back);
            }
        }
    }
}
