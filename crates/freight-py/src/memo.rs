//! A hash map keyed by object address, with a hash suited to pointers (SipHash is needlessly
//! slow here, and addresses are not attacker-chosen).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default)]
pub struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        // Addresses are 16-byte aligned: drop the zero bits, then spread over all 64 bits.
        let h = ((n as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type PtrMap<V> = HashMap<usize, V, BuildHasherDefault<PtrHasher>>;
