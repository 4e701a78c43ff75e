//! Checks of variable-length string arrays (Arrow's `string` and `large_string` layouts) read
//! from a payload, before any library indexes into them: offsets in bounds and non-decreasing,
//! every value valid UTF-8. Arrow's own full validation does the same at a third of the speed
//! (this one validates the whole data range at once, then checks that each offset falls on a
//! character boundary, which together mean every value is valid on its own).

/// Whether `len` values starting at value `start`, with `offsets` (little-endian i32, or i64 when
/// `wide`) into `data`, form a valid string array.
pub fn string_array_valid(
    offsets: &[u8],
    data: &[u8],
    wide: bool,
    start: usize,
    len: usize,
) -> bool {
    let Some(o) = Offsets::new(offsets, wide, start, len) else {
        return false;
    };
    let (width, count) = (o.width, start + len + 1);
    let read = |i: usize| o.read(i);
    let (first, last) = (read(start), read(start + len));
    if first < 0 || last < first || last as u128 > data.len() as u128 {
        return false;
    }
    let (first, last) = (first as usize, last as usize);
    let range = &data[first..last];
    // ASCII (most text columns) is valid UTF-8 and every byte of it starts a character: one
    // vectorised pass decides, and the per-offset character check below is skipped.
    let ascii = on_all_cores_is_ascii(range);
    if !ascii && simdutf8::basic::from_utf8(range).is_err() {
        return false;
    }
    // Non-decreasing from `first` to `last` (both checked above) keeps every offset within
    // them. No early exit, so the comparison vectorises.
    let used = &offsets[start * width..count * width];
    if on_all_cores_decreasing(used, wide) {
        return false;
    }
    if !ascii {
        for i in start + 1..start + len {
            // A continuation byte (0b10xx_xxxx) at an offset would split a character.
            let o = read(i) as usize;
            if o < last && data[o] & 0xC0 == 0x80 {
                return false;
            }
        }
    }
    true
}

/// A large column's passes (over 8 MiB, as for checksums: `checksum::PARALLEL_MIN`) run on all
/// cores in pieces of this size: both are bound by memory, and one core does not saturate it
/// (10M strings of 9 bytes: offsets and ASCII checked in 4.0 ms on one core of the development
/// VM, 2.3-3.1 ms on two).
const PIECE: usize = 1 << 20;

/// `is_ascii`, split over the pool when `data` is large.
fn on_all_cores_is_ascii(data: &[u8]) -> bool {
    use rayon::prelude::*;
    if data.len() < crate::checksum::PARALLEL_MIN {
        return is_ascii(data);
    }
    crate::parallel::run(|| data.par_chunks(PIECE).all(is_ascii))
}

/// `decreasing`, split over the pool when `used` is large: each piece also reads the first
/// offset of the next, so every adjacent pair is compared in some piece.
fn on_all_cores_decreasing(used: &[u8], wide: bool) -> bool {
    use rayon::prelude::*;
    if used.len() < crate::checksum::PARALLEL_MIN {
        return decreasing(used, wide);
    }
    let width = if wide { 8 } else { 4 };
    let piece = PIECE / width * width;
    let pieces = used.len().div_ceil(piece);
    crate::parallel::run(|| {
        (0..pieces).into_par_iter().any(|k| {
            let from = k * piece;
            let to = (from + piece + width).min(used.len());
            decreasing(&used[from..to], wide)
        })
    })
}

/// Whether any offset in `used` (i32, or i64 when `wide`) is smaller than the one before it.
/// With AVX2 where the CPU has it (the build targets baseline x86-64: SSE2): the pass reads all
/// the offsets, 400 KB for 100k strings, and twice the lanes halve its instructions.
fn decreasing(used: &[u8], wide: bool) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { decreasing_avx2(used, wide) };
    }
    decreasing_portable(used, wide)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn decreasing_avx2(used: &[u8], wide: bool) -> bool {
    decreasing_portable(used, wide)
}

#[inline(always)]
fn decreasing_portable(used: &[u8], wide: bool) -> bool {
    if wide {
        pairs::<8>(used, |c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
    } else {
        pairs::<4>(used, |c| {
            i32::from_le_bytes(c.try_into().expect("4 bytes")) as i64
        })
    }
}

/// Whether any offset in `used` (of `W` bytes each) is smaller than the one before it.
#[inline(always)]
fn pairs<const W: usize>(used: &[u8], read: impl Fn(&[u8]) -> i64) -> bool {
    used.chunks_exact(W)
        .zip(used[W..].chunks_exact(W))
        .fold(false, |bad, (a, b)| bad | (read(b) < read(a)))
}

/// The little-endian offsets (i32, or i64 when wide) of `len` values from value `start`.
struct Offsets<'a> {
    bytes: &'a [u8],
    width: usize,
}

impl<'a> Offsets<'a> {
    /// None when the buffer holds fewer than the `len + 1` offsets needed (or they overflow).
    fn new(bytes: &'a [u8], wide: bool, start: usize, len: usize) -> Option<Self> {
        let width = if wide { 8 } else { 4 };
        let needed = start.checked_add(len)?.checked_add(1)?.checked_mul(width)?;
        (bytes.len() >= needed).then_some(Self { bytes, width })
    }

    fn read(&self, i: usize) -> i64 {
        let at = &self.bytes[i * self.width..(i + 1) * self.width];
        if self.width == 8 {
            i64::from_le_bytes(at.try_into().expect("8 bytes"))
        } else {
            i32::from_le_bytes(at.try_into().expect("4 bytes")) as i64
        }
    }
}

/// `string_array_valid` for an array with null slots, whose bytes Arrow allows to be anything:
/// offsets in bounds and non-decreasing everywhere, UTF-8 checked only where `is_valid(i)` (the
/// index into the array, from 0) says a value is present.
pub fn string_array_valid_masked(
    offsets: &[u8],
    data: &[u8],
    wide: bool,
    start: usize,
    len: usize,
    is_valid: impl Fn(usize) -> bool,
) -> bool {
    if string_array_valid(offsets, data, wide, start, len) {
        return true;
    }
    // Rare: not valid as a whole. Offsets alone, then each present value on its own.
    let Some(o) = Offsets::new(offsets, wide, start, len) else {
        return false;
    };
    let read = |i: usize| o.read(i);
    let mut previous = read(start);
    if previous < 0 {
        return false;
    }
    for i in 0..len {
        let next = read(start + i + 1);
        if next < previous || next as u128 > data.len() as u128 {
            return false;
        }
        if is_valid(i)
            && simdutf8::basic::from_utf8(&data[previous as usize..next as usize]).is_err()
        {
            return false;
        }
        previous = next;
    }
    true
}

/// Whether `len` views from view `start` of a string_view array (16 bytes each: length,
/// then up to 12 inline bytes padded with zeros, or a 4-byte prefix, data buffer index and
/// offset) are valid: every value in bounds of its data buffer, its prefix equal to its first
/// bytes, and valid UTF-8. Null slots are checked too: readers (polars' string kernels) read
/// every view whatever the validity says. The common case, ASCII inline values and ASCII data
/// buffers, is decided in vectorised passes; other values are checked one by one.
pub fn string_views_valid(views: &[u8], data: &[&[u8]], start: usize, len: usize) -> bool {
    let Some(range) = start
        .checked_add(len)
        .and_then(|end| Some(start.checked_mul(16)?..end.checked_mul(16)?))
    else {
        return false;
    };
    let Some(views) = views.get(range) else {
        return false;
    };
    let ascii_data: Vec<bool> = data.iter().map(|d| is_ascii(d)).collect();
    // Inline values: their 12 bytes (zero padded) OR-ed together, long views contributing 0.
    let inline_bits = views.chunks_exact(16).fold(0u128, |acc, v| {
        let view = u128::from_le_bytes(v.try_into().expect("16 bytes"));
        acc | if (view as u32) <= 12 { view >> 32 } else { 0 }
    });
    let inline_ascii = inline_bits & 0x8080_8080_8080_8080_8080_8080 == 0;
    for v in views.chunks_exact(16) {
        let view = u128::from_le_bytes(v.try_into().expect("16 bytes"));
        let n = view as u32 as usize;
        if n <= 12 {
            // Padding must be zero (Arrow's rule: equal values have equal views).
            if (view >> 32) >> (8 * n) != 0
                || (!inline_ascii && simdutf8::basic::from_utf8(&v[4..4 + n]).is_err())
            {
                return false;
            }
            continue;
        }
        let buffer = u32::from_le_bytes(v[8..12].try_into().expect("4 bytes")) as usize;
        let offset = u32::from_le_bytes(v[12..16].try_into().expect("4 bytes")) as usize;
        let Some(value) = data
            .get(buffer)
            .and_then(|d| d.get(offset..offset.checked_add(n)?))
        else {
            return false;
        };
        if value[..4] != v[4..8]
            || (!ascii_data[buffer] && simdutf8::basic::from_utf8(value).is_err())
        {
            return false;
        }
    }
    true
}

/// Whether every byte is below 0x80: one OR over the values (AVX2 where the CPU has it, as for
/// `decreasing`).
fn is_ascii(data: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { is_ascii_avx2(data) };
    }
    is_ascii_portable(data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn is_ascii_avx2(data: &[u8]) -> bool {
    is_ascii_portable(data)
}

#[inline(always)]
fn is_ascii_portable(data: &[u8]) -> bool {
    data.iter().fold(0u8, |acc, &b| acc | b) < 0x80
}

#[cfg(test)]
mod tests {
    use super::{decreasing, decreasing_portable, is_ascii, is_ascii_portable, string_array_valid};

    #[test]
    fn the_vectorised_passes_agree_with_the_portable_ones_at_every_length_and_position() {
        for len in 0..200usize {
            let mut data = vec![b'a'; len];
            assert!(is_ascii(&data) && is_ascii_portable(&data));
            for at in 0..len {
                data[at] = 0x80;
                assert!(!is_ascii(&data) && !is_ascii_portable(&data), "{len} {at}");
                data[at] = b'a';
            }
            // an array's offsets are never empty (one more than its values)
            for wide in [false, true].into_iter().filter(|_| len > 0) {
                let offsets: Vec<i64> = (0..len as i64).collect();
                let bytes = |v: &[i64]| -> Vec<u8> {
                    v.iter()
                        .flat_map(|&o| {
                            if wide {
                                o.to_le_bytes().to_vec()
                            } else {
                                (o as i32).to_le_bytes().to_vec()
                            }
                        })
                        .collect()
                };
                assert!(!decreasing(&bytes(&offsets), wide));
                for at in 1..len {
                    let mut v = offsets.clone();
                    v[at] = v[at - 1] - 1;
                    let b = bytes(&v);
                    assert!(
                        decreasing(&b, wide) && decreasing_portable(&b, wide),
                        "{len} {at}"
                    );
                }
            }
        }
    }

    fn offsets32(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|o| o.to_le_bytes()).collect()
    }

    fn offsets64(v: &[i64]) -> Vec<u8> {
        v.iter().flat_map(|o| o.to_le_bytes()).collect()
    }

    #[test]
    fn accepts_valid_arrays_and_slices() {
        let data = "abécd".as_bytes(); // é is two bytes: 2..4
        assert!(string_array_valid(
            &offsets32(&[0, 2, 4, 6]),
            data,
            false,
            0,
            3
        ));
        assert!(string_array_valid(
            &offsets64(&[0, 2, 4, 6]),
            data,
            true,
            1,
            2
        ));
        assert!(string_array_valid(&offsets32(&[0]), b"", false, 0, 0));
        // Empty values at the end of non-ASCII data (an offset equal to the data's length).
        assert!(string_array_valid(
            &offsets32(&[0, 4, 4, 4]),
            "abé".as_bytes(),
            false,
            0,
            3
        ));
        assert!(string_array_valid(
            &offsets32(&[3, 3, 3]),
            b"xyz",
            false,
            0,
            2
        ));
    }

    #[test]
    fn refuses_every_malformation() {
        let data = "abécd".as_bytes();
        // An offset inside é: each half is invalid UTF-8 although the whole range is valid.
        assert!(!string_array_valid(
            &offsets32(&[0, 3, 6]),
            data,
            false,
            0,
            2
        ));
        // Decreasing, negative, beyond the data, too few offsets for the slice.
        assert!(!string_array_valid(
            &offsets32(&[0, 4, 2, 6]),
            data,
            false,
            0,
            3
        ));
        assert!(!string_array_valid(&offsets32(&[-1, 2]), data, false, 0, 1));
        assert!(!string_array_valid(&offsets32(&[0, 7]), data, false, 0, 1));
        assert!(!string_array_valid(&offsets32(&[0, 2]), data, false, 1, 1));
        assert!(!string_array_valid(
            &offsets32(&[0, 2]),
            data,
            false,
            usize::MAX,
            1
        ));
        // Decreasing in the middle of a long ASCII array (the vectorised comparison).
        let mut offs: Vec<i32> = (0..100).collect();
        offs[57] = 3;
        assert!(!string_array_valid(
            &offsets32(&offs),
            &[b'a'; 99],
            false,
            0,
            99
        ));
        let offs: Vec<i64> = (0..100).map(|i| if i == 80 { 2 } else { i }).collect();
        assert!(!string_array_valid(
            &offsets64(&offs),
            &[b'a'; 99],
            true,
            0,
            99
        ));
        // Invalid UTF-8.
        assert!(!string_array_valid(
            &offsets32(&[0, 2]),
            &[0xff, 0x41],
            false,
            0,
            1
        ));
    }

    fn view(value: &[u8], buffer: u32, offset: u32) -> Vec<u8> {
        let mut v = (value.len() as u32).to_le_bytes().to_vec();
        if value.len() <= 12 {
            v.extend_from_slice(value);
            v.resize(16, 0);
        } else {
            v.extend_from_slice(&value[..4]);
            v.extend_from_slice(&buffer.to_le_bytes());
            v.extend_from_slice(&offset.to_le_bytes());
        }
        v
    }

    #[test]
    fn null_slots_may_hold_anything_but_offsets_in_order() {
        use super::string_array_valid_masked;
        let data = b"ab\xff\xfecd";
        let offsets = offsets32(&[0, 2, 4, 6]);
        assert!(string_array_valid_masked(
            &offsets,
            data,
            false,
            0,
            3,
            |i| i != 1
        ));
        assert!(!string_array_valid_masked(
            &offsets,
            data,
            false,
            0,
            3,
            |_| true
        ));
        let decreasing = offsets32(&[0, 4, 2, 6]);
        assert!(!string_array_valid_masked(
            &decreasing,
            data,
            false,
            0,
            3,
            |i| i != 1
        ));
        assert!(!string_array_valid_masked(
            &offsets32(&[0, 2, 9]),
            data,
            false,
            0,
            2,
            |i| i != 1
        ));
    }

    #[test]
    fn string_views() {
        use super::string_views_valid;
        let data = "a long value here, é included".as_bytes();
        let mut views = view(b"short", 0, 0);
        views.extend(view("héllo".as_bytes(), 0, 0));
        views.extend(view(&data[2..19], 0, 2));
        views.extend(view(data, 0, 0));
        assert!(string_views_valid(&views, &[data], 0, 4));
        assert!(string_views_valid(&views, &[data], 1, 3));
        // Out of range: too few views, a missing buffer, beyond the buffer, a wrong prefix.
        assert!(!string_views_valid(&views, &[data], 2, 3));
        assert!(!string_views_valid(&view(data, 1, 0), &[data], 0, 1));
        assert!(!string_views_valid(
            &view(&data[..20], 0, 20),
            &[data],
            0,
            1
        ));
        let mut bad = view(&data[..20], 0, 0);
        bad[4] = b'X';
        assert!(!string_views_valid(&bad, &[data], 0, 1));
        // Invalid UTF-8, inline and in a buffer (the value splits é).
        assert!(!string_views_valid(&view(&[0xff, b'a'], 0, 0), &[], 0, 1));
        let split = 20; // inside é (bytes 19 and 20)
        assert!(!string_views_valid(
            &view(&data[..split], 0, 0),
            &[data],
            0,
            1
        ));
        assert!(!string_views_valid(&views, &[data], usize::MAX, 2));
        // Padding after an inline value must be zero.
        let mut padded = view(b"ab", 0, 0);
        padded[10] = 1;
        assert!(!string_views_valid(&padded, &[], 0, 1));
    }

    #[test]
    fn a_large_column_split_over_cores_is_refused_at_any_piece_boundary() {
        // 3M one-byte strings: 12 MB of offsets and 3 MB of text, past the parallel bound.
        let len = 3_000_000usize;
        let offsets: Vec<u8> = (0..=len as i32).flat_map(|o| o.to_le_bytes()).collect();
        let text = vec![b'a'; len];
        assert!(string_array_valid(&offsets, &text, false, 0, len));
        let piece_values = super::PIECE / 4;
        // a decrease across each of the first pieces' boundaries, and one inside a piece
        for at in [
            piece_values,
            piece_values + 1,
            2 * piece_values,
            5 * piece_values / 2,
        ] {
            let mut bad = offsets.clone();
            bad[at * 4..at * 4 + 4].copy_from_slice(&0i32.to_le_bytes());
            assert!(
                !string_array_valid(&bad, &text, false, 0, len),
                "decrease at {at}"
            );
        }
        // a non-ASCII byte in a later piece of a text past the bound (10 MB)
        let long = 10usize << 20;
        let long_offsets: Vec<u8> = [0i32, long as i32]
            .iter()
            .flat_map(|o| o.to_le_bytes())
            .collect();
        let mut long_text = vec![b'a'; long];
        assert!(string_array_valid(&long_offsets, &long_text, false, 0, 1));
        long_text[9 * super::PIECE + 7] = 0xFF;
        assert!(!string_array_valid(&long_offsets, &long_text, false, 0, 1));
    }
}
