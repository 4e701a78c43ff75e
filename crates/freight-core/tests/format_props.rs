//! Property tests of the wire format: trees and envelopes written by the writer are read back
//! exactly; truncated, mutated or random bytes give an error, never a panic, and never pass
//! verification.

use freight_core::envelope::{self, EnvelopeSpec, EnvelopeWriter, FrameLayout, Limits};
use freight_core::walk::walk_tree;
use freight_core::{DateTimeFields, OpenOptions, Parts, Payload, Tag, TreeWriter};
use proptest::prelude::*;

/// A node of a tree, enough to exercise every reader path.
#[derive(Debug, Clone)]
enum Node {
    None,
    Bool(bool),
    Int(i64),
    Big(Vec<u8>),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Node>),
    Tuple(Vec<Node>),
    Dict(Vec<(Node, Node)>),
    DateTime(u16, u8, u32),
    Frame(u32),
}

fn node() -> impl Strategy<Value = Node> {
    let leaf = prop_oneof![
        Just(Node::None),
        any::<bool>().prop_map(Node::Bool),
        any::<i64>().prop_map(Node::Int),
        proptest::collection::vec(any::<u8>(), 9..40).prop_map(Node::Big),
        any::<f64>().prop_map(Node::Float),
        ".{0,20}".prop_map(Node::Str),
        proptest::collection::vec(any::<u8>(), 0..50).prop_map(Node::Bytes),
        (1u16..9999, 1u8..12, 0u32..999_999).prop_map(|(y, m, us)| Node::DateTime(y, m, us)),
        (0u32..4).prop_map(Node::Frame),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Node::List),
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Node::Tuple),
            proptest::collection::vec((inner.clone(), inner), 0..6).prop_map(Node::Dict),
        ]
    })
}

fn count(node: &Node) -> u64 {
    match node {
        Node::List(items) | Node::Tuple(items) => 1 + items.iter().map(count).sum::<u64>(),
        Node::Dict(pairs) => 1 + pairs.iter().map(|(k, v)| count(k) + count(v)).sum::<u64>(),
        Node::DateTime(..) => 2, // the datetime and its tz node
        _ => 1,
    }
}

fn write(w: &mut TreeWriter, node: &Node) {
    match node {
        Node::None => w.none(),
        Node::Bool(b) => w.bool(*b),
        Node::Int(v) => w.int(*v),
        Node::Big(bytes) => w.big_int(bytes),
        Node::Float(v) => w.float(*v),
        Node::Str(s) => w.byte_string(Tag::Str, s.as_bytes()),
        Node::Bytes(b) => w.byte_string(Tag::Bytes, b),
        Node::List(items) => {
            w.container(Tag::List, items.len());
            items.iter().for_each(|n| write(w, n));
        }
        Node::Tuple(items) => {
            w.container(Tag::Tuple, items.len());
            items.iter().for_each(|n| write(w, n));
        }
        Node::Dict(pairs) => {
            w.container(Tag::Dict, pairs.len());
            for (k, v) in pairs {
                write(w, k);
                write(w, v);
            }
        }
        Node::DateTime(year, month, us) => {
            w.datetime(&DateTimeFields {
                year: *year,
                month: *month,
                day: 1,
                microsecond: *us,
                ..Default::default()
            });
            w.tz_utc();
        }
        Node::Frame(index) => w.frame_ref(Tag::FrameBytes, *index),
    }
}

fn envelope(tree: &[u8], frames: &[Vec<u8>], checksums: bool, tags: &[&str]) -> Vec<u8> {
    let spec = EnvelopeSpec {
        needs_pickle: false,
        tags: tags.to_vec(),
        versions: vec![("python", "3.11")],
        frames: frames
            .iter()
            .map(|f| FrameLayout::raw(f.len() as u64))
            .collect(),
        checksums,
        signed: false,
        tree,
    };
    let mut writer = EnvelopeWriter::new(&spec);
    let mut out = vec![0xAA; writer.total_len()];
    let sources: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    writer.write_contiguous(&mut out, &sources, None);
    out
}

/// Parses and fully verifies a contiguous payload.
fn read_all(buf: &[u8]) -> freight_core::Result<(Vec<Vec<u8>>, u64)> {
    let opts = OpenOptions {
        verify: true,
        ..Default::default()
    };
    let payload = Payload::open(Parts::Single(buf), &opts)?;
    payload.verify()?;
    let frames = (0..payload.frames().len() as u32)
        .map(|i| payload.frames().raw(i).map(|f| f.to_vec()))
        .collect::<freight_core::Result<_>>()?;
    Ok((frames, payload.walk()?.nodes))
}

fn frames_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 4..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn trees_and_envelopes_roundtrip(root in node(), frames in frames_strategy(), checksums in any::<bool>()) {
        let mut w = TreeWriter::new();
        write(&mut w, &root);
        let payload = envelope(w.as_bytes(), &frames, checksums, &["a.tag"]);
        let (read_frames, nodes) = read_all(&payload).unwrap();
        prop_assert_eq!(read_frames, frames);
        prop_assert_eq!(nodes, count(&root));
        // Frames start 64-byte aligned, small ones (packed) 16-byte aligned.
        let header = envelope::parse_header(&payload, &Limits::default()).unwrap();
        for range in envelope::locate_frames(&header, &payload).unwrap() {
            let small = (range.len() as u64) < envelope::PACK_BELOW;
            let align = if small { envelope::PACKED_ALIGN } else { envelope::ALIGN };
            prop_assert_eq!(range.start % align, 0);
        }
    }

    #[test]
    fn any_single_byte_change_is_caught(root in node(), frames in frames_strategy(), pos in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let mut w = TreeWriter::new();
        write(&mut w, &root);
        let mut payload = envelope(w.as_bytes(), &frames, true, &[]);
        let i = pos.index(payload.len());
        payload[i] ^= flip;
        prop_assert!(read_all(&payload).is_err(), "a change at byte {} went unnoticed", i);
    }

    #[test]
    fn truncation_is_an_error(root in node(), frames in frames_strategy(), cut in any::<prop::sample::Index>()) {
        let mut w = TreeWriter::new();
        write(&mut w, &root);
        let payload = envelope(w.as_bytes(), &frames, false, &[]);
        let n = cut.index(payload.len());
        prop_assert!(read_all(&payload[..n]).is_err());
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = read_all(&bytes);
        let _ = walk_tree(&bytes, 4, 4);
        let mut with_magic = envelope::MAGIC.to_vec();
        with_magic.push(envelope::VERSION);
        with_magic.extend_from_slice(&bytes);
        let _ = read_all(&with_magic);
    }
}

#[test]
fn small_payloads_are_small() {
    let mut w = TreeWriter::new();
    w.int(1);
    let payload = envelope(w.as_bytes(), &[], true, &[]);
    // versions are in this helper's spec; without them dumps(1) is 17 bytes (pickle: 5).
    let spec = EnvelopeSpec {
        tree: w.as_bytes(),
        ..Default::default()
    };
    let mut writer = EnvelopeWriter::new(&spec);
    assert_eq!(writer.total_len(), 17);
    assert!(payload.len() > 17);
    let mut out = vec![0; writer.total_len()];
    writer.write_contiguous(&mut out, &[], None);
    assert!(read_all(&out).is_ok());
}

#[test]
fn newer_versions_are_named_in_the_error() {
    let mut w = TreeWriter::new();
    w.none();
    let mut payload = envelope(w.as_bytes(), &[], true, &[]);
    payload[4] = 2;
    let err = read_all(&payload).unwrap_err();
    assert_eq!(
        err,
        freight_core::Error::UnsupportedVersion {
            found: 2,
            supported: 1
        }
    );
    assert!(err.to_string().contains("version 2"));
}

#[test]
fn huge_declared_counts_are_refused_before_allocating() {
    // A list claiming 2**60 items in a 20-byte tree.
    let mut tree = vec![Tag::List as u8];
    freight_core::varint::put_uvarint(&mut tree, 1 << 60);
    let payload = envelope(&tree, &[], true, &[]);
    let err = read_all(&payload).unwrap_err();
    assert!(err.to_string().contains("declares"), "{err}");
}

#[test]
fn memo_references_must_point_backwards() {
    let mut w = TreeWriter::new();
    w.container(Tag::List, 2);
    w.memo(0, false);
    w.container(Tag::List, 0);
    w.reference(0);
    assert!(walk_tree(w.as_bytes(), 0, 0).is_ok());
    let mut bad = TreeWriter::new();
    bad.container(Tag::List, 1);
    bad.reference(0);
    assert!(walk_tree(bad.as_bytes(), 0, 0).is_err());
}

#[test]
fn deep_trees_are_walked_without_overflowing_the_stack() {
    // 150,000 nested one-item lists: deeper than any default thread stack allows by recursion.
    let depth = 150_000;
    let mut tree = Vec::with_capacity(depth * 2 + 1);
    for _ in 0..depth {
        tree.push(Tag::List as u8);
        tree.push(1);
    }
    tree.push(Tag::None_ as u8);
    let summary = std::thread::spawn(move || walk_tree(&tree, 0, 0))
        .join()
        .expect("no stack overflow")
        .unwrap();
    assert_eq!(summary.max_depth, depth);
}

#[test]
fn the_parts_of_a_layout_are_the_contiguous_bytes() {
    // Frames of every size class (packed small ones, 64-byte aligned large ones, empty), signed
    // and not: the parts a store streams are exactly what `dumps` writes in one buffer.
    let frames: Vec<Vec<u8>> = [0usize, 3, 100, 5000, 70_000, 1]
        .iter()
        .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
        .collect();
    let sources: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    for signed in [false, true] {
        let spec = EnvelopeSpec {
            needs_pickle: false,
            tags: vec![],
            versions: vec![("numpy", "2.3.0")],
            frames: frames
                .iter()
                .map(|f| FrameLayout::raw(f.len() as u64))
                .collect(),
            checksums: true,
            signed,
            tree: &[Tag::None_ as u8],
        };
        let key: Option<&[u8]> = signed.then_some(b"key");
        let mut contiguous = EnvelopeWriter::new(&spec);
        let mut want = vec![0u8; contiguous.total_len()];
        contiguous.write_contiguous(&mut want, &sources, key);
        let mut streamed = EnvelopeWriter::new(&spec);
        streamed.seal_frames(&sources);
        let mut header = vec![0u8; streamed.header_len()];
        streamed.write_header(&mut header, key);
        let mut got: Vec<u8> = Vec::new();
        for part in streamed.parts() {
            got.extend_from_slice(match part {
                envelope::Part::Header => &header,
                envelope::Part::Padding(n) => &envelope::ZEROS[..n],
                envelope::Part::Frame(i) => sources[i],
            });
        }
        assert_eq!(got, want, "signed: {signed}");
    }
}

/// Frames of `lens` bytes, each filled from `seed` (cheap: a multiplicative sequence).
fn filled(lens: &[usize], seed: u32) -> Vec<Vec<u8>> {
    lens.iter()
        .enumerate()
        .map(|(i, &n)| {
            let mut x = seed.wrapping_mul(2654435761).wrapping_add(i as u32) | 1;
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect()
        })
        .collect()
}

/// A payload of `frames` (one FrameBytes node each) with checksums, signed with `key` if given:
/// its contiguous bytes and its list layout.
fn digested(frames: &[Vec<u8>], key: Option<&[u8]>) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut w = TreeWriter::new();
    w.container(Tag::List, frames.len());
    for i in 0..frames.len() as u32 {
        w.frame_ref(Tag::FrameBytes, i);
    }
    let spec = EnvelopeSpec {
        frames: frames
            .iter()
            .map(|f| FrameLayout::raw(f.len() as u64))
            .collect(),
        checksums: true,
        signed: key.is_some(),
        tree: w.as_bytes(),
        ..Default::default()
    };
    let mut writer = EnvelopeWriter::new(&spec);
    let mut out = vec![0xAA; writer.total_len()];
    let sources: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    writer.write_contiguous(&mut out, &sources, key);
    let mut parts = vec![out[..writer.header_len()].to_vec()];
    parts.extend(frames.iter().cloned());
    (out, parts)
}

/// Opens with `keys` and `verify`, then `Payload::verify` and every frame's use.
fn open_and_verify<B: AsRef<[u8]> + Clone>(
    parts: Parts<B>,
    keys: &[Vec<u8>],
    verify: bool,
) -> freight_core::Result<Vec<Vec<u8>>> {
    let opts = OpenOptions {
        keys,
        verify,
        ..Default::default()
    };
    let payload = Payload::open(parts, &opts)?;
    let used = (0..payload.frames().len() as u32)
        .map(|i| payload.frames().raw(i).map(|f| f.to_vec()))
        .collect::<freight_core::Result<Vec<_>>>();
    payload.verify()?;
    used
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Frames around the digest block sizes (64 KiB xxh3 past 1 MiB unsigned, 256 KiB SHA-256
    /// signed), signed and not: both layouts open (with the key when signed) and verify, every
    /// frame is sealed as the format says, and a byte flipped anywhere in any frame is caught by
    /// `Payload::verify` (by the use of the frame too, with the key even when verify is off),
    /// naming the block it lies in when the frame has digests.
    #[test]
    fn digested_payloads_open_verify_and_catch_any_changed_frame_byte(
        lens in proptest::collection::vec(prop_oneof![
            0usize..300,
            (1usize << 18) - 2..(1 << 18) + 2,
            (1usize << 20) - 1..(1 << 20) + 3 * (1 << 16) + 2,
        ], 1..4),
        seed in any::<u32>(),
        signed in any::<bool>(),
        which in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        use freight_core::digest::{kind, Scheme};
        let frames = filled(&lens, seed);
        let key: &[u8] = b"property-key";
        let keys = if signed { vec![key.to_vec()] } else { vec![] };
        let (single, parts) = digested(&frames, signed.then_some(key));
        prop_assert_eq!(open_and_verify(Parts::Single(single.as_slice()), &keys, true)?, frames.clone());
        prop_assert_eq!(open_and_verify(Parts::Split(parts.clone()), &keys, false)?, frames.clone());
        let header = envelope::parse_header(&single, &Limits::default()).unwrap();
        prop_assert_eq!(header.head_signed(), signed);
        for (info, frame) in header.frames.iter().zip(&frames) {
            let want = if signed {
                Some(Scheme::SHA256)
            } else if frame.len() > 1 << 20 {
                Some(Scheme::XXH3)
            } else {
                None
            };
            prop_assert_eq!(info.digests.map(|d| d.scheme), want);
            prop_assert_eq!(info.checksum.is_some(), want.is_none());
        }

        // One byte of one frame changed, in each layout.
        let nonempty: Vec<usize> = (0..frames.len()).filter(|&i| !frames[i].is_empty()).collect();
        prop_assume!(!nonempty.is_empty());
        let i = nonempty[which.index(nonempty.len())];
        let pos = at.index(frames[i].len());
        let info = header.frames[i];
        let ranges = envelope::locate_frames(&header, &single).unwrap();
        let mut bad_single = single.clone();
        bad_single[ranges[i].start + pos] ^= flip;
        let mut bad_parts = parts.clone();
        bad_parts[1 + i][pos] ^= flip;
        let opts = OpenOptions { keys: &keys, verify: false, ..Default::default() };
        for parts in [Parts::Single(bad_single), Parts::Split(bad_parts)] {
            let payload = Payload::open(parts, &opts).unwrap();
            let err = payload.verify().unwrap_err();
            prop_assert!(err.is_integrity(), "{}", err);
            if let Some(d) = info.digests {
                let block = pos >> d.scheme.block_log2;
                prop_assert_eq!(
                    &err,
                    &freight_core::Error::Digest {
                        what: format!("block {block} of frame {i}"),
                        signed: d.scheme.kind == kind::SHA256,
                    }
                );
            }
            // With the key, the frame's use checks it even with verify off.
            let used = payload.frames().raw(i as u32);
            prop_assert_eq!(used.is_err(), signed);
        }
    }
}

proptest! {
    /// A payload of its tree alone is written by `TreeOnly` exactly as `EnvelopeWriter` lays out
    /// the same spec, and reads back.
    #[test]
    fn a_tree_alone_is_laid_out_as_any_envelope(tree in prop::collection::vec(any::<u8>(), 0..300), needs_pickle in any::<bool>()) {
        let spec = EnvelopeSpec {
            needs_pickle,
            tags: vec![],
            versions: vec![],
            frames: vec![],
            checksums: false,
            signed: false,
            tree: &tree,
        };
        let writer = EnvelopeWriter::new(&spec);
        let mut want = vec![0u8; writer.header_len()];
        writer.write_header(&mut want, None);
        let payload = freight_core::envelope::TreeOnly::new(&tree, needs_pickle);
        let mut got = vec![0u8; payload.len()];
        payload.write(&mut got);
        prop_assert_eq!(&got, &want);
    }
}
