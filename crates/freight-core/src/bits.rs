//! The one table of the wire format's flag bits and codec ids. Writers, readers, `inspect` and
//! the bindings all take them from here (docs/FORMAT.md describes the same values in prose).

/// Bits of the preamble's flags byte.
pub mod flags {
    /// Some node runs pickle (or an unsafe serializer) when decoded.
    pub const NEEDS_PICKLE: u8 = 1 << 0;
    /// A frame table is present.
    pub const FRAMES: u8 = 1 << 1;
    /// A meta section (tags used, producer versions) is present.
    pub const META: u8 = 1 << 2;
    /// A 32-byte HMAC-SHA256 of every byte before it ends the payload (see sign.rs).
    pub const SIGNED: u8 = 1 << 3;
    /// Frames smaller than `envelope::PACK_BELOW` start at multiples of 16 instead of 64
    /// (format 1.1: every writer since sets it; readers before it refuse the payload).
    pub const PACKED: u8 = 1 << 4;
    /// With SIGNED: the HMAC-SHA256 follows the header checksum and covers the header only; every
    /// frame carries SHA-256 block digests (`frame_flags::DIGESTS`) that the header authenticates,
    /// so a reader can authenticate one frame, or one block of one, without the rest (format
    /// 1.2, lazy reads). Without it, SIGNED means the 1.0 trailer over the whole payload.
    pub const HEAD_SIGNED: u8 = 1 << 5;
    pub const KNOWN: u8 = NEEDS_PICKLE | FRAMES | META | SIGNED | PACKED | HEAD_SIGNED;

    /// Each bit with the name `inspect` reports it under.
    pub const NAMES: [(u8, &str); 6] = [
        (NEEDS_PICKLE, "needs_pickle"),
        (FRAMES, "frames"),
        (META, "meta"),
        (SIGNED, "signed"),
        (PACKED, "packed"),
        (HEAD_SIGNED, "head_signed"),
    ];

    /// The names of the bits set in `bits`, in bit order.
    pub fn names(bits: u8) -> Vec<&'static str> {
        NAMES
            .iter()
            .filter(|(bit, _)| bits & bit != 0)
            .map(|&(_, name)| name)
            .collect()
    }
}

/// Bits of a frame table entry's flags byte.
pub mod frame_flags {
    /// An xxh3-64 checksum of the stored bytes follows the lengths.
    pub const CHECKSUM: u8 = 1 << 0;
    /// Bytes were shuffled by item (item size follows) before the codec compressed them.
    pub const SHUFFLE: u8 = 1 << 1;
    /// The checksum is a block checksum (checksum.rs), not plain xxh3-64 of the frame.
    pub const BLOCK_CHECKSUM: u8 = 1 << 2;
    /// A table of block digests follows (format 1.2): `u8` digest kind, `u8` log2 of the block
    /// size, then one digest per block of the stored bytes, so that any block can be checked on
    /// its own (a lazy read of part of a frame).
    pub const DIGESTS: u8 = 1 << 3;
    pub const KNOWN: u8 = CHECKSUM | SHUFFLE | BLOCK_CHECKSUM | DIGESTS;
}

/// Bits of an NdArray node's flags byte.
pub mod array_flags {
    /// The frame holds the array in Fortran (column-major) order.
    pub const FORTRAN: u8 = 1 << 0;
    /// The array was writeable when it was written (it comes back writeable).
    pub const WRITEABLE: u8 = 1 << 1;
    pub const KNOWN: u8 = FORTRAN | WRITEABLE;
}

/// Frame codec ids (see compress.rs for the stored layout of compressed frames).
pub mod codec {
    pub const NONE: u8 = 0;
    pub const LZ4: u8 = 1;
    pub const ZSTD: u8 = 2;
    /// The largest id this build decodes.
    pub const MAX: u8 = ZSTD;

    /// The name `inspect` reports a codec id under.
    pub fn name(id: u8) -> &'static str {
        match id {
            NONE => "none",
            LZ4 => "lz4",
            ZSTD => "zstd",
            _ => "unknown",
        }
    }
}
