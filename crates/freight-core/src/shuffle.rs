//! The byte-shuffle filter (as blosc has it) for frames of fixed-size items: item-major bytes to
//! byte-plane-major before compression (byte 0 of every item, then byte 1, ...), so that the
//! high bytes of small numbers form long runs lz4 and zstd shrink fast; and back after
//! decompression. The layout is docs/FORMAT.md's ("Compressed frames").

/// `src` (items of `itemsize` bytes; a tail shorter than an item kept as is) into `dst` in
/// byte-plane order.
pub fn shuffle(src: &[u8], itemsize: usize, dst: &mut Vec<u8>) {
    let items = src.len() / itemsize;
    // Every byte of `dst[..src.len()]` is written below: grow it only (a scratch buffer kept
    // between calls), never zero it again.
    if dst.len() < src.len() {
        dst.resize(src.len(), 0);
    }
    dst.truncate(src.len());
    match itemsize {
        2 => transpose::<2>(src, dst, items),
        4 => transpose::<4>(src, dst, items),
        8 => transpose8(src, dst, items),
        _ => {
            for (i, item) in src[..items * itemsize].chunks_exact(itemsize).enumerate() {
                for (byte, &b) in item.iter().enumerate() {
                    dst[byte * items + i] = b;
                }
            }
        }
    }
    dst[items * itemsize..].copy_from_slice(&src[items * itemsize..]);
}

/// `transpose::<8>`, sixteen items at a time in vector registers where the CPU has them (the
/// byte-at-a-time loop was most of an lz4 frame's cost on numbers), eight at a time with
/// word-wide byte transposes otherwise.
fn transpose8(src: &[u8], dst: &mut [u8], items: usize) {
    let (planes, _) = dst.split_at_mut(items * 8);
    let mut planes: Vec<&mut [u8]> = planes.chunks_exact_mut(items.max(1)).take(8).collect();
    let done = planes8::shuffle(src, &mut planes, items);
    let groups = items / 8;
    for g in done / 8..groups {
        let mut x: [u64; 8] = std::array::from_fn(|k| {
            let at = (g * 8 + k) * 8;
            u64::from_le_bytes(src[at..at + 8].try_into().expect("8 bytes"))
        });
        transpose8x8(&mut x);
        for (plane, word) in planes.iter_mut().zip(x) {
            plane[g * 8..g * 8 + 8].copy_from_slice(&word.to_le_bytes());
        }
    }
    for i in groups * 8..items {
        for (b, plane) in planes.iter_mut().enumerate() {
            plane[i] = src[i * 8 + b];
        }
    }
}

/// Sixteen 8-byte items at a time between item-major and plane-major order in SSE2 registers
/// (every x86_64 CPU has them): four rounds of the byte-interleaving "perfect shuffle" (vector i
/// with vector i + 4) turn 16 items into 8 planes of 16 bytes; three more rounds of the same
/// step bring them back. Each function returns how many items it did (a multiple of 16); the
/// callers finish the rest.
#[cfg(target_arch = "x86_64")]
mod planes8 {
    use std::arch::x86_64::{
        __m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_unpackhi_epi8, _mm_unpacklo_epi8,
    };

    #[inline(always)]
    fn round(v: [__m128i; 8]) -> [__m128i; 8] {
        // SAFETY: SSE2 is part of the x86_64 baseline.
        unsafe {
            [
                _mm_unpacklo_epi8(v[0], v[4]),
                _mm_unpackhi_epi8(v[0], v[4]),
                _mm_unpacklo_epi8(v[1], v[5]),
                _mm_unpackhi_epi8(v[1], v[5]),
                _mm_unpacklo_epi8(v[2], v[6]),
                _mm_unpackhi_epi8(v[2], v[6]),
                _mm_unpacklo_epi8(v[3], v[7]),
                _mm_unpackhi_epi8(v[3], v[7]),
            ]
        }
    }

    fn load(bytes: &[u8]) -> __m128i {
        assert!(bytes.len() >= 16);
        // SAFETY: 16 readable bytes (checked); unaligned loads are allowed.
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    }

    fn store(v: __m128i, bytes: &mut [u8]) {
        assert!(bytes.len() >= 16);
        // SAFETY: 16 writable bytes (checked); unaligned stores are allowed.
        unsafe { _mm_storeu_si128(bytes.as_mut_ptr().cast(), v) }
    }

    pub fn shuffle(src: &[u8], planes: &mut [&mut [u8]], items: usize) -> usize {
        let groups = items / 16;
        for g in 0..groups {
            let block = &src[g * 128..g * 128 + 128];
            let mut v: [__m128i; 8] = std::array::from_fn(|k| load(&block[k * 16..]));
            for _ in 0..4 {
                v = round(v);
            }
            for (plane, v) in planes.iter_mut().zip(v) {
                store(v, &mut plane[g * 16..]);
            }
        }
        groups * 16
    }

    pub fn unshuffle(planes: &[&[u8]; 8], dst: &mut [u8], items: usize) -> usize {
        let groups = items / 16;
        for g in 0..groups {
            let mut v: [__m128i; 8] = std::array::from_fn(|b| load(&planes[b][g * 16..]));
            for _ in 0..3 {
                v = round(v);
            }
            let block = &mut dst[g * 128..g * 128 + 128];
            for (k, v) in v.into_iter().enumerate() {
                store(v, &mut block[k * 16..]);
            }
        }
        groups * 16
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod planes8 {
    pub fn shuffle(_: &[u8], _: &mut [&mut [u8]], _: usize) -> usize {
        0
    }
    pub fn unshuffle(_: &[&[u8]; 8], _: &mut [u8], _: usize) -> usize {
        0
    }
}

/// Item-major to byte-plane-major for a fixed item size: reads sequentially, writes K streams.
fn transpose<const K: usize>(src: &[u8], dst: &mut [u8], items: usize) {
    let (planes, _) = dst.split_at_mut(items * K);
    for (i, item) in src[..items * K].chunks_exact(K).enumerate() {
        for byte in 0..K {
            planes[byte * items + i] = item[byte];
        }
    }
}

/// Byte-plane-major back to item-major: reads K streams, writes sequentially.
fn untranspose<const K: usize>(src: &[u8], dst: &mut [u8], items: usize) {
    for (i, item) in dst[..items * K].chunks_exact_mut(K).enumerate() {
        let mut gathered = [0u8; K];
        for (byte, slot) in gathered.iter_mut().enumerate() {
            *slot = src[byte * items + i];
        }
        item.copy_from_slice(&gathered);
    }
}

/// Transposes an 8×8 byte matrix held as 8 little-endian words (row r = word r).
#[inline]
fn transpose8x8(x: &mut [u64; 8]) {
    for i in 0..4 {
        let t = ((x[i] >> 32) ^ x[i + 4]) & 0x0000_0000_FFFF_FFFF;
        x[i] ^= t << 32;
        x[i + 4] ^= t;
    }
    for i in [0, 1, 4, 5] {
        let t = ((x[i] >> 16) ^ x[i + 2]) & 0x0000_FFFF_0000_FFFF;
        x[i] ^= t << 16;
        x[i + 2] ^= t;
    }
    for i in [0, 2, 4, 6] {
        let t = ((x[i] >> 8) ^ x[i + 1]) & 0x00FF_00FF_00FF_00FF;
        x[i] ^= t << 8;
        x[i + 1] ^= t;
    }
}

/// `untranspose::<8>`: sixteen items at a time in vector registers (`planes8`), then eight at a
/// time with word-wide byte transposes.
fn untranspose8(src: &[u8], dst: &mut [u8], items: usize) {
    let groups = items / 8;
    let planes: [&[u8]; 8] = std::array::from_fn(|b| &src[b * items..(b + 1) * items]);
    let done = planes8::unshuffle(&planes, dst, items);
    for g in done / 8..groups {
        let mut x: [u64; 8] = std::array::from_fn(|b| {
            u64::from_le_bytes(planes[b][g * 8..g * 8 + 8].try_into().expect("8 bytes"))
        });
        transpose8x8(&mut x);
        for (k, word) in x.iter().enumerate() {
            let at = (g * 8 + k) * 8;
            dst[at..at + 8].copy_from_slice(&word.to_le_bytes());
        }
    }
    for i in groups * 8..items {
        for (b, plane) in planes.iter().enumerate() {
            dst[i * 8 + b] = plane[i];
        }
    }
}

/// The inverse of [`shuffle`]: byte planes in `src` back to items in `dst` (the same length).
pub fn unshuffle(src: &[u8], itemsize: usize, dst: &mut [u8]) {
    let items = src.len() / itemsize;
    match itemsize {
        2 => untranspose::<2>(src, dst, items),
        4 => untranspose::<4>(src, dst, items),
        8 => untranspose8(src, dst, items),
        _ => {
            for (i, item) in dst[..items * itemsize]
                .chunks_exact_mut(itemsize)
                .enumerate()
            {
                for (byte, b) in item.iter_mut().enumerate() {
                    *b = src[byte * items + i];
                }
            }
        }
    }
    dst[items * itemsize..].copy_from_slice(&src[items * itemsize..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_unshuffle_matches_the_definition() {
        for len in [
            0usize,
            7,
            8,
            63,
            64,
            65,
            127,
            128,
            129,
            136,
            8 * 1000 + 5,
            8 * 123 + 3,
        ] {
            let raw: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            let mut shuffled = Vec::new();
            shuffle(&raw, 8, &mut shuffled);
            let mut fast = vec![0u8; len];
            unshuffle(&shuffled, 8, &mut fast);
            let mut slow = vec![0u8; len];
            let items = len / 8;
            untranspose::<8>(&shuffled, &mut slow, items);
            slow[items * 8..].copy_from_slice(&shuffled[items * 8..]);
            assert_eq!(fast, raw);
            assert_eq!(slow, raw);
            // The word-wide shuffle writes what the byte-at-a-time definition does.
            let mut by_bytes = vec![0u8; len];
            transpose::<8>(&raw, &mut by_bytes, items);
            by_bytes[items * 8..].copy_from_slice(&raw[items * 8..]);
            assert_eq!(shuffled, by_bytes);
        }
    }
}
