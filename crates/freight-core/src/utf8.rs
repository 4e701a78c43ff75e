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
    let width = if wide { 8 } else { 4 };
    let Some(count) = start.checked_add(len).and_then(|n| n.checked_add(1)) else {
        return false;
    };
    let Some(needed) = count.checked_mul(width) else {
        return false;
    };
    if offsets.len() < needed {
        return false;
    }
    let read = |i: usize| -> i64 {
        let at = &offsets[i * width..(i + 1) * width];
        if wide {
            i64::from_le_bytes(at.try_into().expect("8 bytes"))
        } else {
            i32::from_le_bytes(at.try_into().expect("4 bytes")) as i64
        }
    };
    let (first, last) = (read(start), read(start + len));
    if first < 0 || last < first || last as u128 > data.len() as u128 {
        return false;
    }
    let (first, last) = (first as usize, last as usize);
    if std::str::from_utf8(&data[first..last]).is_err() {
        return false;
    }
    let mut previous = first;
    for i in start + 1..=start + len {
        let o = read(i);
        if o < previous as i64 || o > last as i64 {
            return false;
        }
        let o = o as usize;
        // A continuation byte (0b10xx_xxxx) at an offset would split a character.
        if o < last && data[o] & 0xC0 == 0x80 {
            return false;
        }
        previous = o;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::string_array_valid;

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
        // Invalid UTF-8.
        assert!(!string_array_valid(
            &offsets32(&[0, 2]),
            &[0xff, 0x41],
            false,
            0,
            1
        ));
    }
}
