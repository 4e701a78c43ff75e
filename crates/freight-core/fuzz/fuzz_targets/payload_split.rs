//! The `dumps_frames` layout: the input is cut into parts (each part's length from one byte),
//! opened with and without keys.
#![no_main]

use freight_core::{OpenOptions, Parts, Payload};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&n, mut rest)) = data.split_first() else {
        return;
    };
    let mut parts = Vec::new();
    for _ in 0..(n % 8) {
        let Some((&len, tail)) = rest.split_first() else {
            break;
        };
        let len = (len as usize).min(tail.len());
        parts.push(&tail[..len]);
        rest = &tail[len..];
    }
    parts.push(rest);
    let keys = vec![b"fuzz-key".to_vec()];
    let with_keys = OpenOptions {
        keys: &keys,
        verify: true,
        ..Default::default()
    };
    let _ = Payload::open(Parts::Split(parts.clone()), &with_keys);
    if let Ok(payload) = Payload::open(Parts::Split(parts), &OpenOptions::default()) {
        let _ = payload.verify();
        let _ = payload.check_signature(&keys);
        for i in 0..payload.frames().len() as u32 {
            if payload.frames().get(i).is_ok_and(|f| f.raw_len() <= 1 << 24) {
                let _ = payload.frames().raw(i);
            }
        }
    }
});
