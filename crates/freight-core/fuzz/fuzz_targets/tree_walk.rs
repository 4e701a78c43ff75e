//! The node tree reader, without an envelope: the structural walk that inspect and verify run.
#![no_main]

use freight_core::walk::walk_tree;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&counts, tree)) = data.split_first() else {
        return;
    };
    let _ = walk_tree(tree, (counts & 0x0f) as u32, (counts >> 4) as u32);
});
