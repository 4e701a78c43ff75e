//! Node tags of the tree (one byte before every node). docs/FORMAT.md is the prose version of
//! this table; the numbers are part of format v1 and never change meaning.

macro_rules! node_tags {
    ($($(#[$doc:meta])* $name:ident = $value:expr, memo = $memo:expr;)*) => {
        /// The tag byte that starts every node of the tree.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Tag { $($(#[$doc])* $name = $value,)* }

        impl Tag {
            /// All tags, for tests and tools.
            pub const ALL: &'static [Tag] = &[$(Tag::$name,)*];

            #[inline]
            pub fn from_u8(byte: u8) -> Option<Tag> {
                match byte { $($value => Some(Tag::$name),)* _ => None }
            }

            /// Whether a node with this tag may follow a `Memo` marker (take a memo slot that later
            /// `Ref` nodes point at). Scalars without identity may not.
            #[inline]
            pub fn memoizable(self) -> bool {
                match self { $(Tag::$name => $memo,)* }
            }

            pub fn name(self) -> &'static str {
                match self { $(Tag::$name => stringify!($name),)* }
            }
        }
    };
}

node_tags! {
    None_ = 0x00, memo = false;
    False = 0x01, memo = false;
    True = 0x02, memo = false;
    /// zigzag varint
    Int = 0x03, memo = false;
    /// varint n, n bytes of two's complement little-endian
    BigInt = 0x04, memo = false;
    /// f64 little-endian (bit-exact: NaN payloads and -0.0 kept)
    Float = 0x05, memo = false;
    /// two f64: real, imaginary
    Complex = 0x06, memo = false;
    /// varint n, n bytes UTF-8
    Str = 0x07, memo = true;
    /// varint n, n bytes UTF-8 with lone surrogates (Python's "surrogatepass")
    StrSurrogates = 0x08, memo = true;
    Bytes = 0x09, memo = true;
    ByteArray = 0x0A, memo = true;
    /// varint frame index: a large bytes object stored as a frame
    FrameBytes = 0x0B, memo = true;
    FrameByteArray = 0x0C, memo = true;
    /// varint frame index: a large str stored as a UTF-8 frame ("surrogatepass" allowed)
    FrameStr = 0x0D, memo = true;
    /// varint n, n nodes
    List = 0x10, memo = true;
    Tuple = 0x11, memo = true;
    /// varint n, n (key, value) node pairs
    Dict = 0x12, memo = true;
    Set = 0x13, memo = true;
    FrozenSet = 0x14, memo = true;
    /// varint memo slot: the object that took that slot (see Memo), again
    Ref = 0x15, memo = false;
    /// marker: the next node takes the next memo slot (written only before objects that are
    /// referenced more than once, so unshared objects cost nothing)
    Memo = 0x16, memo = false;
    /// u16 year, u8 month, day, hour, minute, second, varint microsecond, u8 fold, tz node
    DateTime = 0x20, memo = true;
    /// u16 year, u8 month, u8 day
    Date = 0x21, memo = true;
    /// u8 hour, minute, second, varint microsecond, u8 fold, tz node
    Time = 0x22, memo = true;
    /// zigzag days, varint seconds, varint microseconds
    TimeDelta = 0x23, memo = true;
    /// varint n, n ASCII bytes of str(Decimal)
    Decimal = 0x24, memo = true;
    /// 16 bytes (big-endian, as uuid.UUID.bytes), i8 is_safe
    Uuid = 0x25, memo = true;
    /// u8 flavour (0 PosixPath, 1 WindowsPath, 2 PurePosixPath, 3 PureWindowsPath), varint n, UTF-8 (surrogatepass)
    Path = 0x26, memo = true;
    /// tz position only: no tzinfo
    TzNone = 0x27, memo = false;
    /// tz position only: datetime.timezone.utc
    TzUtc = 0x28, memo = false;
    /// tz position only: zigzag offset in microseconds, u8 has_name, [varint n, UTF-8 name]
    TzFixed = 0x29, memo = false;
    /// tz position only: varint n, zoneinfo key, u8 no_cache (1: from ZoneInfo.no_cache)
    TzZoneInfo = 0x2A, memo = false;
    /// dtype node (Str: numpy dtype.str, or a native tree: numpy descr), u8 flags
    /// (1 Fortran order, 2 writeable), varint ndim, ndim varints of shape, varint frame index
    NdArray = 0x30, memo = true;
    /// varint tag index, meta node, varint n, n varint frame indices: a registered serializer
    Ext = 0x31, memo = true;
    /// u8 flavour (0 pickle, 1 cloudpickle), u8 where (0 inline: varint n + bytes,
    /// 1 frame: varint index), varint n + n frame indices of out-of-band buffers,
    /// varint n + n externals (varint byte length + a subtree with its own memo)
    Pickle = 0x32, memo = false;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_roundtrip_and_unknown_bytes_are_rejected() {
        for &tag in Tag::ALL {
            assert_eq!(Tag::from_u8(tag as u8), Some(tag));
        }
        let known: std::collections::HashSet<u8> = Tag::ALL.iter().map(|t| *t as u8).collect();
        for byte in 0..=255u8 {
            assert_eq!(Tag::from_u8(byte).is_some(), known.contains(&byte));
        }
    }
}
