//! Each codec's block decoder (lz4, zstd), with and without the byte unshuffle: arbitrary stored
//! bytes, declared raw length and item size.
#![no_main]

use freight_core::bits::codec;
use freight_core::compress;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let id = if data[0] & 1 == 0 { codec::LZ4 } else { codec::ZSTD };
    let shuffle = match data[1] % 5 {
        0 => None,
        1 => Some(2),
        2 => Some(4),
        3 => Some(8),
        _ => Some(3 + (data[1] as usize >> 3)),
    };
    // Raw lengths up to 4 MiB: enough for several blocks, bounded memory per run.
    let raw_len = (u16::from_le_bytes([data[2], data[3]]) as usize) << (data[0] >> 4).min(6);
    let mut raw = vec![0u8; raw_len];
    let _ = compress::decompress(id, &data[4..], shuffle, &mut raw);
    let _ = compress::check_layout(&data[4..], raw_len);
});
