//! Memo compaction (`freight_core::compact_memo`): markers no reference uses are dropped and the
//! slots renumbered, across the trees of one memo scope, whichever references the writer marked.

use freight_core::{Tag, TreeWriter};
use proptest::prelude::*;

#[test]
fn unused_memo_markers_are_dropped_and_slots_renumbered() {
    // [a, b, b] where a and b were both marked (both "may be shared"): only b is referenced.
    let mut w = TreeWriter::new();
    w.container(Tag::List, 3);
    w.memo(0, false);
    w.container(Tag::List, 0);
    w.memo(1, false);
    w.container(Tag::Dict, 0);
    w.reference(1);
    let out = freight_core::compact_memo(vec![w]).pop().unwrap();
    let mut want = TreeWriter::new();
    want.container(Tag::List, 3);
    want.container(Tag::List, 0);
    want.memo(0, false);
    want.container(Tag::Dict, 0);
    want.reference(0);
    assert_eq!(out, want.into_bytes());
    // Across trees of one scope: a slot marked in the first, referenced from the second.
    let mut first = TreeWriter::new();
    first.memo(0, false);
    first.container(Tag::List, 0);
    let mut second = TreeWriter::new();
    second.container(Tag::List, 2);
    second.memo(1, false);
    second.container(Tag::List, 0);
    second.reference(0);
    let out = freight_core::compact_memo(vec![first.clone(), second]);
    assert_eq!(
        out[0],
        first.into_bytes(),
        "slot 0 is used: its marker stays"
    );
    let mut want = TreeWriter::new();
    want.container(Tag::List, 2);
    want.container(Tag::List, 0);
    want.reference(0);
    assert_eq!(out[1], want.into_bytes());
    // Nothing referenced: no marker left; a rolled-back marker is forgotten.
    let mut w = TreeWriter::new();
    w.container(Tag::List, 1);
    let at = w.len();
    w.memo(0, false);
    w.truncate(at);
    w.memo(0, false);
    w.container(Tag::List, 0);
    let mut want = TreeWriter::new();
    want.container(Tag::List, 1);
    want.container(Tag::List, 0);
    assert_eq!(
        freight_core::compact_memo(vec![w]).pop().unwrap(),
        want.into_bytes()
    );
    // A kept marker stays without a reference, and the slots after it keep their numbers.
    let mut w = TreeWriter::new();
    w.memo(0, true);
    w.container(Tag::List, 2);
    w.memo(1, false);
    w.container(Tag::List, 0);
    w.reference(1);
    let written = w.as_bytes().to_vec();
    assert_eq!(w.finish(), written);
}

#[test]
fn compaction_is_the_same_on_both_sides_of_64_slots() {
    // Up to 64 slots "every slot used" is told from a bit mask; past it, from the slot table.
    // Slot 1 unused: the marker goes and the later references shift down; all used: unchanged.
    for slots in [3u32, 64, 65, 70] {
        for skip in [None, Some(1u32)] {
            let (mut w, mut want) = (TreeWriter::new(), TreeWriter::new());
            let n = 2 * slots as usize;
            w.container(Tag::List, n);
            want.container(Tag::List, n);
            for slot in 0..slots {
                w.memo(slot, false);
                w.container(Tag::List, 0);
                if skip != Some(slot) {
                    want.memo(0, false);
                }
                want.container(Tag::List, 0);
            }
            for slot in 0..slots {
                let used = skip != Some(slot);
                // A used slot is referenced; an unused one's place is taken by an empty list.
                if used {
                    w.reference(slot);
                    let renumbered = match skip {
                        Some(s) if slot > s => slot - 1,
                        _ => slot,
                    };
                    want.reference(renumbered);
                } else {
                    w.container(Tag::List, 0);
                    want.container(Tag::List, 0);
                }
            }
            let out = freight_core::compact_memo(vec![w]).pop().unwrap();
            assert_eq!(out, want.into_bytes(), "{slots} slots, skipping {skip:?}");
        }
    }
}

/// One step of a memo scope's writing: a marked object, or a reference to an earlier one.
#[derive(Debug, Clone)]
enum MemoStep {
    Mark { kept: bool },
    Ref(prop::sample::Index),
}

proptest! {
    /// Compaction against a model: a marker stays when a reference or `kept` uses its slot,
    /// slots are renumbered in order, across one or two trees of a scope, whether or not the
    /// writer skipped marking references whose numbers cannot change.
    #[test]
    fn compaction_matches_its_model(
        steps in prop::collection::vec(
            prop_oneof![any::<bool>().prop_map(|kept| MemoStep::Mark { kept }),
                        any::<prop::sample::Index>().prop_map(MemoStep::Ref)],
            0..200),
        split in any::<prop::sample::Index>(),
    ) {
        // What each step is, with references resolved to a marked slot.
        let mut plan: Vec<(bool, u32, bool)> = Vec::new(); // (is_ref, slot, kept)
        let mut marked = 0u32;
        for step in &steps {
            match step {
                MemoStep::Mark { kept } => {
                    plan.push((false, marked, *kept));
                    marked += 1;
                }
                MemoStep::Ref(i) if marked > 0 => plan.push((true, i.index(marked as usize) as u32, false)),
                MemoStep::Ref(_) => {}
            }
        }
        let used: Vec<bool> = (0..marked)
            .map(|s| plan.iter().any(|&(r, slot, kept)| slot == s && (r || kept)))
            .collect();
        let number = |s: u32| used[..s as usize].iter().filter(|&&u| u).count() as u32;
        let cut = split.index(plan.len() + 1);
        let (mut trees, mut want) = (vec![TreeWriter::new(), TreeWriter::new()], vec![TreeWriter::new(), TreeWriter::new()]);
        for (i, &(is_ref, slot, kept)) in plan.iter().enumerate() {
            let t = usize::from(i >= cut);
            if is_ref {
                trees[t].reference(slot);
                want[t].reference(number(slot));
            } else {
                trees[t].memo(slot, kept);
                if used[slot as usize] {
                    want[t].memo(number(slot), kept);
                }
                trees[t].container(Tag::List, 0);
                want[t].container(Tag::List, 0);
            }
        }
        let out = freight_core::compact_memo(trees);
        let want: Vec<Vec<u8>> = want.into_iter().map(TreeWriter::into_bytes).collect();
        prop_assert_eq!(out, want);
    }
}
