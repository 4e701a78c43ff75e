//! Frame checksums (xxh3-64) and the copies that compute them on the way.
//!
//! A frame up to `CHECKSUM_BLOCK` bytes is checksummed with plain xxh3-64. A larger one (flag
//! BLOCK_CHECKSUM in its frame-table entry) is checksummed as the xxh3-64 of the little-endian
//! xxh3-64 digests of its 1 MiB blocks: the blocks hash on all cores, in the same pass as their
//! copy, so checking a large frame costs almost nothing over copying it.

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

/// Block size of block checksums (part of the format).
pub const CHECKSUM_BLOCK: usize = 1 << 20;

/// Frames at least this large are copied on all cores.
pub const PARALLEL_MIN: usize = 4 << 20;

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
    let digests: Vec<u64> = data.par_chunks(CHECKSUM_BLOCK).map(xxh3_64).collect();
    combine(&digests)
}

/// Copies `src` into `dst` and returns the checksum of the bytes written.
pub fn copy_and_checksum(dst: &mut [u8], src: &[u8], block: bool) -> u64 {
    assert_eq!(dst.len(), src.len());
    if !block {
        dst.copy_from_slice(src);
        return xxh3_64(dst);
    }
    // Hash what was written, block by block while it is in cache: another thread may be
    // changing the source (the GIL is released), and the checksum must describe the stored bytes.
    let digests: Vec<u64> = dst
        .par_chunks_mut(CHECKSUM_BLOCK)
        .zip(src.par_chunks(CHECKSUM_BLOCK))
        .map(|(d, s)| {
            d.copy_from_slice(s);
            xxh3_64(d)
        })
        .collect();
    combine(&digests)
}

/// Copies `src` into `dst`, on all cores when large.
pub fn copy_parallel(dst: &mut [u8], src: &[u8]) {
    if src.len() >= PARALLEL_MIN {
        dst.par_chunks_mut(CHECKSUM_BLOCK)
            .zip(src.par_chunks(CHECKSUM_BLOCK))
            .for_each(|(d, s)| d.copy_from_slice(s));
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
