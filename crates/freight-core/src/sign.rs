//! Signed payloads: HMAC-SHA256 over every byte before the 32-byte trailer, compared in
//! constant time. docs/SECURITY.md says what this protects and what it does not.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const SIGNATURE_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// The signature of `parts` (hashed in order, as if concatenated).
pub fn sign(key: &[u8], parts: &[&[u8]]) -> [u8; SIGNATURE_LEN] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC accepts keys of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// Whether `signature` is the signature of `parts` under any of `keys` (constant-time compare
/// per key, so that timing reveals nothing about the expected signature).
pub fn verify(keys: &[&[u8]], parts: &[&[u8]], signature: &[u8]) -> bool {
    keys.iter().any(|key| {
        let mut mac = HmacSha256::new_from_slice(key).expect("HMAC accepts keys of any length");
        for part in parts {
            mac.update(part);
        }
        mac.verify_slice(signature).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4231_case_2() {
        let sig = sign(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(sig[..4], [0x5b, 0xdc, 0xc1, 0x46]);
        assert!(verify(
            &[b"wrong", b"Jefe"],
            &[b"what do ya want for nothing?"],
            &sig
        ));
        assert!(!verify(
            &[b"wrong"],
            &[b"what do ya want for nothing?"],
            &sig
        ));
    }
}
