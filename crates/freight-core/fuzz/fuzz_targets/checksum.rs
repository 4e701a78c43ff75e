//! Block checksums: the fused copy-and-checksum must agree with the checksum of the bytes, in
//! both modes, and copy exactly.
#![no_main]

use freight_core::checksum;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for block in [false, true] {
        let mut copy = vec![0u8; data.len()];
        let fused = checksum::copy_and_checksum(&mut copy, data, block);
        assert_eq!(copy, data);
        assert_eq!(fused, checksum::frame_checksum(data, block));
    }
});
