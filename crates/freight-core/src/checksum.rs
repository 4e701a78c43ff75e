//! Frame checksums (xxh3-64) and the copies that compute them on the way.
//!
//! A frame up to `CHECKSUM_BLOCK` bytes is checksummed with plain xxh3-64. A larger one (flag
//! BLOCK_CHECKSUM in its frame-table entry) is checksummed as the xxh3-64 of the little-endian
//! xxh3-64 digests of its 1 MiB blocks: the blocks hash on all cores, in the same pass as their
//! copy, so checking a large frame costs almost nothing over copying it.

use rayon::prelude::*;

/// xxh3-64 with seed 0. twox-hash picks AVX2 at run time where the CPU has it (wheels are built
/// for baseline x86-64, where a compile-time choice would be SSE2): wider vectors hash large
/// frames faster, and hashing is most of what verifying a frame costs.
#[inline]
fn xxh3_64(data: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(data)
}

/// Block size of block checksums (part of the format).
pub const CHECKSUM_BLOCK: usize = 1 << 20;

/// Frames at least this large are copied and hashed on all cores: below it, waking the pool's
/// threads costs more than it saves when other work runs between calls.
pub const PARALLEL_MIN: usize = 8 << 20;

#[inline]
pub fn hash(data: &[u8]) -> u64 {
    xxh3_64(data)
}

/// Whether a frame of `len` stored bytes gets a block checksum.
#[inline]
pub fn block_mode(len: usize) -> bool {
    len > CHECKSUM_BLOCK
}

fn combine(digests: &[u64]) -> u64 {
    let bytes: Vec<u8> = digests.iter().flat_map(|d| d.to_le_bytes()).collect();
    xxh3_64(&bytes)
}

/// The checksum of a frame's stored bytes (`block`: from its frame-table flag).
pub fn frame_checksum(data: &[u8], block: bool) -> u64 {
    if !block {
        return xxh3_64(data);
    }
    let digests: Vec<u64> = if data.len() >= PARALLEL_MIN {
        crate::parallel::run(|| data.par_chunks(CHECKSUM_BLOCK).map(xxh3_64).collect())
    } else {
        data.chunks(CHECKSUM_BLOCK).map(xxh3_64).collect()
    };
    combine(&digests)
}

/// Copies `src` into `dst` and returns the checksum of the bytes written.
pub fn copy_and_checksum(dst: &mut [u8], src: &[u8], block: bool) -> u64 {
    assert_eq!(dst.len(), src.len());
    if !block {
        return copy_then_hash(dst, src);
    }
    // Hash what was written, block by block while it is in cache: another thread may be
    // changing the source (the GIL is released), and the checksum must describe the stored bytes.
    let digests: Vec<u64> = if src.len() >= PARALLEL_MIN {
        crate::parallel::run(|| {
            dst.par_chunks_mut(CHECKSUM_BLOCK)
                .zip(src.par_chunks(CHECKSUM_BLOCK))
                .map(|(d, s)| copy_then_hash(d, s))
                .collect()
        })
    } else {
        dst.chunks_mut(CHECKSUM_BLOCK)
            .zip(src.chunks(CHECKSUM_BLOCK))
            .map(|(d, s)| copy_then_hash(d, s))
            .collect()
    };
    combine(&digests)
}

/// Bytes copied before they are hashed, while still in the nearest cache.
const FUSED_CHUNK: usize = 32 << 10;

/// The xxh3-64 of `src` copied into `dst`, hashed from `dst` a chunk at a time right after the
/// chunk is copied (the bytes are read from L1/L2 instead of a second pass over the frame;
/// streaming xxh3 gives the same digest as one call).
fn copy_then_hash(dst: &mut [u8], src: &[u8]) -> u64 {
    if src.len() <= FUSED_CHUNK {
        dst.copy_from_slice(src);
        return xxh3_64(dst);
    }
    let mut hasher = twox_hash::XxHash3_64::with_seed(0);
    for (d, s) in dst.chunks_mut(FUSED_CHUNK).zip(src.chunks(FUSED_CHUNK)) {
        d.copy_from_slice(s);
        std::hash::Hasher::write(&mut hasher, d);
    }
    std::hash::Hasher::finish(&hasher)
}

/// Copies `src` into `dst`, on all cores when large.
pub fn copy_parallel(dst: &mut [u8], src: &[u8]) {
    if src.len() >= PARALLEL_MIN {
        crate::parallel::run(|| {
            dst.par_chunks_mut(CHECKSUM_BLOCK)
                .zip(src.par_chunks(CHECKSUM_BLOCK))
                .for_each(|(d, s)| d.copy_from_slice(s))
        });
    } else {
        dst.copy_from_slice(src);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fused_copies_checksum_like_the_plain_functions() {
        for len in [
            0usize,
            1,
            63,
            CHECKSUM_BLOCK - 1,
            CHECKSUM_BLOCK,
            CHECKSUM_BLOCK + 1,
            5 * CHECKSUM_BLOCK + 17,
        ] {
            let src: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let block = block_mode(len);
            let mut dst = vec![0u8; len];
            assert_eq!(
                copy_and_checksum(&mut dst, &src, block),
                frame_checksum(&src, block)
            );
            assert_eq!(dst, src);
            let mut dst = vec![0u8; len];
            copy_parallel(&mut dst, &src);
            assert_eq!(dst, src);
        }
    }

    #[test]
    fn block_checksums_see_every_byte() {
        let mut data = vec![7u8; 3 * CHECKSUM_BLOCK];
        let sum = frame_checksum(&data, true);
        data[2 * CHECKSUM_BLOCK + 5] ^= 1;
        assert_ne!(frame_checksum(&data, true), sum);
    }
}

#[cfg(test)]
mod known_answers {
    /// xxh3-64 digests from the reference implementation (xxhash-rust, which earlier versions of
    /// freight used) over `i * 31 % 251` bytes: every length class of the algorithm, so a change
    /// of hash crate cannot silently change what payloads store.
    #[test]
    fn xxh3_matches_the_reference() {
        let data: Vec<u8> = (0..(3usize << 20) + 7)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        let expected: [(usize, u64); 12] = [
            (0, 0x2d06800538d394c2),
            (1, 0xc44bdff4074eecdb),
            (3, 0x3698b80191e625f9),
            (16, 0x8626370b70d8ac70),
            (17, 0xaa7a5f479409a664),
            (128, 0x040e97756280237a),
            (129, 0xf0f4dc98ce461dfd),
            (240, 0x8acecb90be72b9c3),
            (241, 0x82d3ebf50a3e9c42),
            (1024, 0xcbdff56b050f2c1c),
            (65541, 0x8319e81e5d002709),
            (3145735, 0x9d4f78fd9c119612),
        ];
        for (len, digest) in expected {
            assert_eq!(super::hash(&data[..len]), digest, "length {len}");
        }
    }
}
