//! The signature check: a forged signature never verifies; a payload signed here always does,
//! and any one-byte change to it does not. Then the header signature of format 1.2: a payload
//! signed here (frames cut from the input, each sealed by SHA-256 block digests) opens with the
//! key in both layouts and verifies, and any one-byte change to it is refused by the open, by
//! `verify` or by the frame's use, even with `verify` off.
#![no_main]

use freight_core::envelope::{EnvelopeSpec, EnvelopeWriter, FrameLayout};
use freight_core::{sign, OpenOptions, Parts, Payload, Tag, TreeWriter};
use libfuzzer_sys::fuzz_target;

const KEY: &[u8] = b"fuzz-key-0123456789abcdef";

/// Opens with the key, verifies and uses every frame: whether all of it succeeded.
fn accepted(parts: Parts<&[u8]>, verify: bool) -> bool {
    let keys = vec![KEY.to_vec()];
    let opts = OpenOptions {
        keys: &keys,
        verify,
        ..Default::default()
    };
    let Ok(payload) = Payload::open(parts, &opts) else {
        return false;
    };
    let used = (0..payload.frames().len() as u32).all(|i| payload.frames().raw(i).is_ok());
    // `verify` (which checks every frame whatever the option said) only when the frames passed,
    // so that a use with verify off is what is checked first.
    used && payload.verify().is_ok()
}

fuzz_target!(|data: &[u8]| {
    let (body, forged) = data.split_at(data.len().saturating_sub(sign::SIGNATURE_LEN));
    let keys: [&[u8]; 1] = [KEY];
    let genuine = sign::sign(KEY, &[body]);
    if forged != genuine.as_slice() {
        assert!(!sign::verify(&keys, &[body], forged));
    }
    assert!(sign::verify(&keys, &[body], &genuine));
    if let Some(&first) = body.first() {
        let mut changed = body.to_vec();
        changed[0] = first ^ 1;
        assert!(!sign::verify(&keys, &[&changed], &genuine));
    }

    // A head-signed payload: up to 3 frames cut from the input (the first byte says where).
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let cuts = [rest.len() * (shape & 3) as usize / 4, rest.len() * 3 / 4];
    let frames: Vec<&[u8]> = vec![&rest[..cuts[0]], &rest[cuts[0]..cuts[1]], &rest[cuts[1]..]];
    let mut tree = TreeWriter::new();
    tree.container(Tag::List, frames.len());
    for i in 0..frames.len() as u32 {
        tree.frame_ref(Tag::FrameBytes, i);
    }
    let spec = EnvelopeSpec {
        frames: frames
            .iter()
            .map(|f| FrameLayout::raw(f.len() as u64))
            .collect(),
        signed: true,
        tree: tree.as_bytes(),
        ..Default::default()
    };
    let mut writer = EnvelopeWriter::new(&spec);
    let mut single = vec![0u8; writer.total_len()];
    writer.write_contiguous(&mut single, &frames, Some(KEY));
    let header_len = writer.header_len();
    let split = |buf: &[u8]| -> Vec<Vec<u8>> {
        let offsets = writer.frame_offsets();
        let mut parts = vec![buf[..header_len].to_vec()];
        for (start, f) in offsets.iter().zip(&frames) {
            parts.push(buf[*start..*start + f.len()].to_vec());
        }
        parts
    };
    assert!(accepted(Parts::Single(&single), true));
    let parts = split(&single);
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    assert!(accepted(Parts::Split(refs), false));

    // One byte changed (past the magic bytes and version, which say what the bytes are).
    if single.len() <= 5 {
        return;
    }
    let pos = 5 + (shape as usize * 2654435761 + rest.len()) % (single.len() - 5);
    let mut bad = single.clone();
    bad[pos] ^= shape | 1;
    for verify in [true, false] {
        assert!(!accepted(Parts::Single(&bad), verify), "byte {pos} changed");
        // The same change in the list layout, where it falls in the header or a frame.
        let parts = split(&bad);
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let in_padding = pos >= header_len
            && !writer
                .frame_offsets()
                .iter()
                .zip(&frames)
                .any(|(s, f)| (*s..*s + f.len()).contains(&pos));
        if !in_padding {
            assert!(
                !accepted(Parts::Split(refs), verify),
                "byte {pos} changed (list)"
            );
        }
    }
});
