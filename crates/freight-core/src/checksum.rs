//! xxh3-64 checksums, and copies that compute the checksum on the way so that the bytes are read
//! from memory once (the chunk just copied is still in cache when it is hashed).

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// Chunk size of the fused copy: fits in L2 on the machines we measured.
const CHUNK: usize = 256 * 1024;

#[inline]
pub fn hash(data: &[u8]) -> u64 {
    xxh3_64(data)
}

/// Plain copy (kept here so that every large copy of the crate goes through one place).
#[inline]
pub fn copy(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

/// Frames at least this large are copied by two threads (the page faults of a fresh buffer and
/// the copy itself both go faster on two cores than on one).
pub const PARALLEL_MIN: usize = 16 << 20;

/// Copies `src` into `dst` and returns the xxh3-64 of the bytes.
pub fn copy_and_hash(dst: &mut [u8], src: &[u8]) -> u64 {
    assert_eq!(dst.len(), src.len());
    if src.len() <= CHUNK {
        dst.copy_from_slice(src);
        return xxh3_64(dst);
    }
    let mut hasher = Xxh3::new();
    if src.len() >= PARALLEL_MIN && parallelism() > 1 {
        // One thread copies the second half while this one copies and hashes the first half;
        // then this one hashes the second half (xxh3 is one sequential stream: only the copy
        // splits).
        let mid = (src.len() / 2) & !(CHUNK - 1);
        let (d1, d2) = dst.split_at_mut(mid);
        let (s1, s2) = src.split_at(mid);
        std::thread::scope(|scope| {
            let helper = scope.spawn(|| copy(d2, s2));
            copy_hashing(&mut hasher, d1, s1);
            helper.join().expect("copy thread");
        });
        // Hash what was written, not the source: another thread may be changing the source
        // (the GIL is released), and the checksum must describe the bytes stored.
        hasher.update(d2);
        return hasher.digest();
    }
    copy_hashing(&mut hasher, dst, src);
    hasher.digest()
}

fn copy_hashing(hasher: &mut Xxh3, dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.chunks_mut(CHUNK).zip(src.chunks(CHUNK)) {
        d.copy_from_slice(s);
        hasher.update(d);
    }
}

/// Copies `src` into `dst`, on two threads when large.
pub fn copy_parallel(dst: &mut [u8], src: &[u8]) {
    if src.len() >= PARALLEL_MIN && parallelism() > 1 {
        let mid = src.len() / 2;
        let (d1, d2) = dst.split_at_mut(mid);
        let (s1, s2) = src.split_at(mid);
        std::thread::scope(|scope| {
            scope.spawn(|| copy(d2, s2));
            copy(d1, s1);
        });
    } else {
        copy(dst, src);
    }
}

fn parallelism() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fused_copy_hashes_like_plain_hash() {
        for len in [
            0usize,
            1,
            63,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            3 * CHUNK + 17,
            PARALLEL_MIN + 4097,
        ] {
            let src: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut dst = vec![0u8; len];
            assert_eq!(copy_and_hash(&mut dst, &src), hash(&src));
            assert_eq!(dst, src);
        }
    }
}
