//! A payload of its tree alone (no meta section, no frames: most small values) is laid out by a
//! path of its own in `EnvelopeWriter`, with its prefix inline: it must keep the layout every
//! reader parses.

use freight_core::envelope::{parse_header, HEADER_CHECKSUM_LEN, MAGIC, VERSION};
use freight_core::varint::put_uvarint;
use freight_core::{EnvelopeSpec, EnvelopeWriter, Limits, Tag, TreeWriter};

/// Magic, version, flags, then the header length as a varint of every width the inline prefix
/// must hold.
#[test]
fn a_tree_alone_is_laid_out_as_any_header() {
    for len in [0usize, 1, 127, 128, 16_383, 16_384, 2_097_152] {
        // A tree of one bytes node, so that the header length takes 1 to 4 varint bytes.
        let mut w = TreeWriter::new();
        w.byte_string(Tag::Bytes, &vec![7u8; len]);
        let tree = w.into_bytes();
        let n = tree.len();
        let spec = EnvelopeSpec {
            tree: &tree,
            ..Default::default()
        };
        let mut writer = EnvelopeWriter::new(&spec);
        let mut out = vec![0xAA; writer.total_len()];
        writer.write_contiguous(&mut out, &[], None);
        let mut expected = MAGIC.to_vec();
        expected.extend([VERSION, 0]);
        put_uvarint(&mut expected, n as u64);
        assert_eq!(out.len(), expected.len() + n + HEADER_CHECKSUM_LEN);
        assert_eq!(&out[..expected.len()], &expected[..]);
        let header = parse_header(&out, &Limits::default()).expect("parses");
        assert_eq!(header.tree, expected.len()..expected.len() + n);
    }
}
