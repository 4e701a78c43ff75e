//! The signature check: a forged signature never verifies; a payload signed here always does,
//! and any one-byte change to it does not.
#![no_main]

use freight_core::sign;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let key = b"fuzz-key-0123456789abcdef";
    let (body, forged) = data.split_at(data.len().saturating_sub(sign::SIGNATURE_LEN));
    let keys: [&[u8]; 1] = [key];
    let genuine = sign::sign(key, &[body]);
    if forged != genuine.as_slice() {
        assert!(!sign::verify(&keys, &[body], forged));
    }
    assert!(sign::verify(&keys, &[body], &genuine));
    if let Some(&first) = body.first() {
        let mut changed = body.to_vec();
        changed[0] = first ^ 1;
        assert!(!sign::verify(&keys, &[&changed], &genuine));
    }
});
