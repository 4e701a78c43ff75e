//! Block digests (format 1.2, frame flag DIGESTS): one digest per block of a frame's stored
//! bytes, kept in the header, so that a reader can check one block (a slice of an array read
//! from S3) without the rest of the frame. Unsigned payloads use xxh3-64 (a guard against
//! damage); signed payloads use SHA-256, authenticated by the header's HMAC, so that each block
//! fetched is authenticated too (xxh3 is not collision-resistant: an attacker could forge a
//! block with the same xxh3).

use rayon::prelude::*;
use sha2::{Digest as _, Sha256};

use crate::checksum;

/// Digest kinds (the table's first byte).
pub mod kind {
    pub const XXH3: u8 = 0;
    pub const SHA256: u8 = 1;
}

/// Block size of the xxh3 digests unsigned writers use: a slice of an array reads at most one
/// block on each side of it (a 1,000-row slice of float64 reads well under 1 MiB), for 8 header
/// bytes per 64 KiB (0.012%).
pub const XXH3_BLOCK_LOG2: u8 = 16;
/// Block size of the SHA-256 digests signed writers use: 32 header bytes per 256 KiB (0.012%).
pub const SHA256_BLOCK_LOG2: u8 = 18;
/// Block sizes a reader accepts (64 KiB to 64 MiB as log2): bounds the table and the work per
/// block.
pub const BLOCK_LOG2_RANGE: std::ops::RangeInclusive<u8> = 12..=26;

/// How a frame's blocks are digested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheme {
    pub kind: u8,
    pub block_log2: u8,
}

impl Scheme {
    pub const XXH3: Scheme = Scheme {
        kind: kind::XXH3,
        block_log2: XXH3_BLOCK_LOG2,
    };
    pub const SHA256: Scheme = Scheme {
        kind: kind::SHA256,
        block_log2: SHA256_BLOCK_LOG2,
    };

    pub fn block(self) -> usize {
        1usize << self.block_log2
    }

    /// Bytes of one digest.
    pub fn digest_len(self) -> usize {
        if self.kind == kind::SHA256 {
            32
        } else {
            8
        }
    }

    /// Blocks of a frame of `stored_len` bytes (an empty frame has none).
    pub fn blocks(self, stored_len: u64) -> u64 {
        stored_len.div_ceil(self.block() as u64)
    }

    /// Bytes of the digest table of a frame of `stored_len` bytes.
    pub fn table_len(self, stored_len: u64) -> u64 {
        self.blocks(stored_len) * self.digest_len() as u64
    }

    fn digest_into(self, block: &[u8], out: &mut [u8]) {
        if self.kind == kind::SHA256 {
            out.copy_from_slice(&Sha256::digest(block));
        } else {
            out.copy_from_slice(&checksum::hash(block).to_le_bytes());
        }
    }

    /// The digests of `data`'s blocks, written into `out` (`table_len(data.len())` bytes), on all
    /// cores when `data` is large.
    pub fn digest(self, data: &[u8], out: &mut [u8]) {
        let (block, len) = (self.block(), self.digest_len());
        debug_assert_eq!(out.len() as u64, self.table_len(data.len() as u64));
        let each = |(chunk, out): (&[u8], &mut [u8])| self.digest_into(chunk, out);
        if data.len() >= checksum::PARALLEL_MIN {
            crate::parallel::run(|| {
                data.par_chunks(block)
                    .zip(out.par_chunks_mut(len))
                    .for_each(each)
            });
        } else {
            data.chunks(block).zip(out.chunks_mut(len)).for_each(each);
        }
    }

    /// Copies `src` into `dst` and writes the digests of the bytes written into `out`, each block
    /// hashed right after its copy (while it is in cache), on all cores when large.
    pub fn copy_and_digest(self, dst: &mut [u8], src: &[u8], out: &mut [u8]) {
        assert_eq!(dst.len(), src.len());
        let (block, len) = (self.block(), self.digest_len());
        let each = |((d, s), out): ((&mut [u8], &[u8]), &mut [u8])| {
            d.copy_from_slice(s);
            self.digest_into(d, out);
        };
        if src.len() >= checksum::PARALLEL_MIN {
            crate::parallel::run(|| {
                dst.par_chunks_mut(block)
                    .zip(src.par_chunks(block))
                    .zip(out.par_chunks_mut(len))
                    .for_each(each)
            });
        } else {
            dst.chunks_mut(block)
                .zip(src.chunks(block))
                .zip(out.chunks_mut(len))
                .for_each(each);
        }
    }

    /// Checks `data`, which starts at block `first` of its frame, against `table` (the frame's
    /// whole digest table): the index of the first block that does not match, if any. `data`
    /// must start on a block boundary and end on one or at the frame's end.
    pub fn check(self, data: &[u8], first: usize, table: &[u8]) -> Result<(), usize> {
        let (block, len) = (self.block(), self.digest_len());
        let expected = first
            .checked_mul(len)
            .and_then(|at| table.get(at..))
            .unwrap_or(&[]);
        if expected.len() < data.len().div_ceil(block) * len {
            // Blocks past the table: the first one the table has no digest for.
            return Err(first.saturating_add(expected.len() / len));
        }
        let bad = |(i, (chunk, want)): (usize, (&[u8], &[u8]))| {
            let mut got = [0u8; 32];
            self.digest_into(chunk, &mut got[..len]);
            (got[..len] != *want).then_some(first + i)
        };
        let found = if data.len() >= checksum::PARALLEL_MIN {
            crate::parallel::run(|| {
                data.par_chunks(block)
                    .zip(expected.par_chunks(len))
                    .enumerate()
                    .filter_map(bad)
                    .min()
            })
        } else {
            data.chunks(block)
                .zip(expected.chunks(len))
                .enumerate()
                .find_map(bad)
        };
        found.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_block_is_checked_on_its_own() {
        for scheme in [Scheme::XXH3, Scheme::SHA256] {
            let data: Vec<u8> = (0..5 * scheme.block() + 17)
                .map(|i| (i * 31 % 251) as u8)
                .collect();
            let mut table = vec![0u8; scheme.table_len(data.len() as u64) as usize];
            scheme.digest(&data, &mut table);
            let mut copy = vec![0u8; data.len()];
            let mut again = vec![0u8; table.len()];
            scheme.copy_and_digest(&mut copy, &data, &mut again);
            assert_eq!((copy.as_slice(), &again), (data.as_slice(), &table));
            assert_eq!(scheme.check(&data, 0, &table), Ok(()));
            // Blocks 2..4 alone, and the short last block alone.
            let b = scheme.block();
            assert_eq!(scheme.check(&data[2 * b..4 * b], 2, &table), Ok(()));
            assert_eq!(scheme.check(&data[5 * b..], 5, &table), Ok(()));
            let mut bad = data.clone();
            bad[3 * b + 1] ^= 1;
            assert_eq!(scheme.check(&bad, 0, &table), Err(3));
            assert_eq!(scheme.check(&bad[2 * b..4 * b], 2, &table), Err(3));
            // Data beyond the table is refused.
            assert_eq!(scheme.check(&data[5 * b..], 6, &table), Err(6));
        }
    }
}
