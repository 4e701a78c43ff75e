//! The compressed sparse index check (scipy's CSR/CSC/BSR structures) on arbitrary arrays: it
//! never panics, and what it accepts really is in bounds.
#![no_main]

use freight_core::sparse::check_compressed;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let wide = data[0] & 1 == 1;
    let width = if wide { 8 } else { 4 };
    let major = (data[1] % 16) as u64;
    let minor = data[2] as u64;
    let rest = &data[3..];
    let split = (((major as usize) + 1) * width).min(rest.len());
    let (indptr, indices) = rest.split_at(split);
    let indices = &indices[..indices.len() / width * width];
    if check_compressed(indptr, indices, wide, major, minor).is_ok() {
        let read = |b: &[u8]| -> i64 {
            if wide {
                i64::from_ne_bytes(b.try_into().unwrap())
            } else {
                i32::from_ne_bytes(b.try_into().unwrap()) as i64
            }
        };
        let ptrs: Vec<i64> = indptr.chunks_exact(width).map(read).collect();
        for row in ptrs.windows(2) {
            for i in row[0]..row[1] {
                let at = i as usize * width;
                let index = read(&indices[at..at + width]);
                assert!((0..minor as i64).contains(&index));
            }
        }
    }
});
