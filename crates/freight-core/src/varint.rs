//! LEB128 unsigned varints and zigzag signed integers, the integer encoding of the header and
//! the node tree.

/// Appends `v` as an unsigned LEB128 varint (1 to 10 bytes).
#[inline]
pub fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Number of bytes `put_uvarint` writes for `v`.
#[inline]
pub fn uvarint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Decodes an unsigned LEB128 varint from the start of `buf`; returns the value and the number
/// of bytes read, or None if the varint is truncated or longer than 10 bytes / 64 bits.
#[inline]
pub fn get_uvarint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, &byte) in buf.iter().enumerate().take(10) {
        let low = (byte & 0x7f) as u64;
        if i == 9 && byte > 1 {
            return None; // would overflow 64 bits
        }
        value |= low << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn uvarint_roundtrip(v in any::<u64>()) {
            let mut out = Vec::new();
            put_uvarint(&mut out, v);
            prop_assert_eq!(out.len(), uvarint_len(v));
            prop_assert_eq!(get_uvarint(&out), Some((v, out.len())));
        }

        #[test]
        fn zigzag_roundtrip(v in any::<i64>()) {
            prop_assert_eq!(unzigzag(zigzag(v)), v);
        }

        #[test]
        fn uvarint_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let _ = get_uvarint(&bytes);
        }
    }

    #[test]
    fn small_values_are_one_byte() {
        assert_eq!(uvarint_len(0), 1);
        assert_eq!(uvarint_len(127), 1);
        assert_eq!(uvarint_len(128), 2);
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }
}
