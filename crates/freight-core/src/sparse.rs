//! Checks of compressed sparse index arrays (CSR/CSC/BSR: `indptr` and `indices`) read from a
//! payload, before a sparse library's kernels index with them unchecked. scipy's own
//! `check_format(full_check=True)` skips the order check of `indptr` when the last pointer is 0
//! (it prunes to nnz = 0 first), so `indptr = [0, 768, ..., 0]` passed it and its C++ kernels
//! then wrote out of bounds: the heap corruption the fuzzing campaign found.

/// Why a compressed index structure is invalid, or `Ok` when every kernel can trust it:
/// `indptr` has `major + 1` entries, starts at 0, never decreases and ends at `indices.len()`;
/// every index lies in `0..minor`. Both arrays are native-endian i32, or i64 when `wide`.
pub fn check_compressed(
    indptr: &[u8],
    indices: &[u8],
    wide: bool,
    major: u64,
    minor: u64,
) -> Result<(), String> {
    let width = if wide { 8 } else { 4 };
    if !indptr.len().is_multiple_of(width) || !indices.len().is_multiple_of(width) {
        return Err("index arrays are not whole numbers of items".into());
    }
    let read = |bytes: &[u8]| -> i64 {
        if wide {
            i64::from_ne_bytes(bytes.try_into().expect("8 bytes"))
        } else {
            i32::from_ne_bytes(bytes.try_into().expect("4 bytes")) as i64
        }
    };
    let n_ptr = (indptr.len() / width) as u64;
    if Some(n_ptr) != major.checked_add(1) {
        return Err(format!(
            "indptr has {n_ptr} entries for {major} rows (or columns); it needs {}",
            major.saturating_add(1)
        ));
    }
    let nnz = (indices.len() / width) as i64;
    let mut previous = 0i64;
    for (i, item) in indptr.chunks_exact(width).enumerate() {
        let value = read(item);
        if i == 0 && value != 0 {
            return Err(format!("indptr starts at {value}, not 0"));
        }
        if value < previous {
            return Err(format!(
                "indptr decreases at entry {i} ({previous} -> {value})"
            ));
        }
        previous = value;
    }
    if previous != nnz {
        return Err(format!(
            "indptr ends at {previous} but there are {nnz} indices"
        ));
    }
    let minor = i64::try_from(minor).unwrap_or(i64::MAX);
    if let Some((i, value)) = indices
        .chunks_exact(width)
        .map(read)
        .enumerate()
        .find(|&(_, v)| v < 0 || v >= minor)
    {
        return Err(format!(
            "index {value} at position {i} is outside 0..{minor}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes32(values: &[i32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    #[test]
    fn valid_structures_pass_and_forged_ones_do_not() {
        let ok = check_compressed(&bytes32(&[0, 2, 2, 3]), &bytes32(&[0, 4, 1]), false, 3, 5);
        assert_eq!(ok, Ok(()));
        let cases: [(&[i32], &[i32]); 6] = [
            (&[0, 768, 2048, 0], &[]), // the fuzzer's crasher: scipy's check let it through
            (&[1, 2, 2, 3], &[0, 4, 1]), // does not start at 0
            (&[0, 2, 1, 3], &[0, 4, 1]), // decreases
            (&[0, 2, 2, 4], &[0, 4, 1]), // ends past the indices
            (&[0, 2, 2, 3], &[0, 5, 1]), // an index out of bounds
            (&[0, 2, 3], &[0, 4, 1]),  // too few pointers
        ];
        for (indptr, indices) in cases {
            assert!(
                check_compressed(&bytes32(indptr), &bytes32(indices), false, 3, 5).is_err(),
                "{indptr:?} {indices:?}"
            );
        }
        assert!(check_compressed(&bytes32(&[0, 1]), &bytes32(&[-1]), false, 1, 5).is_err());
        let wide: Vec<u8> = [0i64, 1].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let idx: Vec<u8> = 3i64.to_ne_bytes().to_vec();
        assert_eq!(check_compressed(&wide, &idx, true, 1, 4), Ok(()));
    }
}
