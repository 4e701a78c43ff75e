//! Block digests (format 1.2): `Scheme::check` of any bytes against any table never panics; a
//! frame's own table checks whole and from any block on; `copy_and_digest` copies exactly and
//! writes the table `digest` writes; a changed byte is reported in its block.
#![no_main]

use freight_core::digest::{kind, Scheme, BLOCK_LOG2_RANGE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((head, rest)) = input.split_first_chunk::<4>() else {
        return;
    };
    let [which, log2, first, cut] = *head;
    let span = BLOCK_LOG2_RANGE.end() - BLOCK_LOG2_RANGE.start() + 1;
    // Small blocks mostly, so that inputs of a few KiB span several of them.
    let block_log2 = BLOCK_LOG2_RANGE.start() + if log2 & 0x80 == 0 { 0 } else { log2 % span };
    let scheme = Scheme {
        kind: if which & 1 == 0 {
            kind::XXH3
        } else {
            kind::SHA256
        },
        block_log2,
    };
    // Any bytes as data and table, from any block: an answer, never a panic.
    let cut = (cut as usize * rest.len() / 255).min(rest.len());
    let (data, table) = rest.split_at(cut);
    let _ = scheme.check(data, first as usize, table);
    let _ = scheme.check(table, first as usize, data);

    // The data's own table.
    let mut want = vec![0u8; scheme.table_len(rest.len() as u64) as usize];
    scheme.digest(rest, &mut want);
    assert_eq!(scheme.check(rest, 0, &want), Ok(()));
    let mut copy = vec![0u8; rest.len()];
    let mut again = vec![0u8; want.len()];
    scheme.copy_and_digest(&mut copy, rest, &mut again);
    assert_eq!(copy, rest);
    assert_eq!(again, want);
    let blocks = scheme.blocks(rest.len() as u64) as usize;
    if blocks == 0 {
        return;
    }
    let b = scheme.block();
    let from = first as usize % blocks;
    assert_eq!(scheme.check(&rest[from * b..], from, &want), Ok(()));
    // A changed byte: reported in its block, whole or from its block on.
    let pos = (first as usize * 7919 + cut) % rest.len();
    let mut bad = rest.to_vec();
    bad[pos] ^= which | 1;
    assert_eq!(scheme.check(&bad, 0, &want), Err(pos / b));
    let at = pos / b;
    assert_eq!(scheme.check(&bad[at * b..], at, &want), Err(at));
    // A table one digest short is refused.
    let short = &want[..want.len() - scheme.digest_len()];
    assert!(scheme.check(rest, 0, short).is_err());
});
