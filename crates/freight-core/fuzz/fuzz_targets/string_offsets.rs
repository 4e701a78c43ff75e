//! The Arrow string-array check (`utf8::string_array_valid`, which pyarrow payloads rely on
//! instead of Arrow's full validation) on arbitrary offsets and data: it never panics, and what
//! it accepts really is in bounds, in order and valid UTF-8 value by value.
#![no_main]

use freight_core::utf8::string_array_valid;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let wide = data[0] & 1 == 1;
    let width = if wide { 8 } else { 4 };
    let start = (data[1] % 8) as usize;
    let len = (data[2] % 32) as usize;
    let rest = &data[4..];
    let split =
        (((start + len + 1) * width).saturating_sub(data[3] as usize % 3 * width)).min(rest.len());
    let (offsets, values) = rest.split_at(split);
    if string_array_valid(offsets, values, wide, start, len) {
        let read = |i: usize| -> i64 {
            let at = &offsets[i * width..(i + 1) * width];
            if wide {
                i64::from_le_bytes(at.try_into().unwrap())
            } else {
                i32::from_le_bytes(at.try_into().unwrap()) as i64
            }
        };
        for i in start..start + len {
            let (a, b) = (read(i), read(i + 1));
            assert!(0 <= a && a <= b && b as usize <= values.len());
            assert!(std::str::from_utf8(&values[a as usize..b as usize]).is_ok());
        }
    }
});
