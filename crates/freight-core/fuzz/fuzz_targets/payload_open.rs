//! The one entry point of the reading contract, on arbitrary bytes (seeded with the golden
//! payloads): open, verify everything, walk the tree, use every frame.
#![no_main]

use freight_core::{OpenOptions, Parts, Payload};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = OpenOptions {
        verify: data.first().is_some_and(|b| b & 1 == 0),
        ..Default::default()
    };
    let Ok(payload) = Payload::open(Parts::Single(data), &opts) else {
        return;
    };
    let _ = payload.verify();
    let _ = payload.walk();
    let frames = payload.frames();
    for i in 0..frames.len() as u32 {
        // Bounded: a frame may declare up to the default limit; decompress only small ones.
        if frames.get(i).is_ok_and(|f| f.raw_len() <= 1 << 24) {
            let _ = frames.raw(i);
        }
    }
    let _ = frames.verify_rest();
});
