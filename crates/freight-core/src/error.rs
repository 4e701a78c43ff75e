//! The one error type of the core crate. Every variant says what is wrong in words a user can
//! act on; the bindings map each variant to one Python exception class.

/// Errors raised while writing or reading a freight envelope.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The input does not start with freight's magic bytes.
    #[error(
        "not a freight payload: it does not start with the magic bytes b'\\x89FRT' (got {found:?})"
    )]
    BadMagic { found: Vec<u8> },

    /// The payload was written by a newer (or unknown) format version.
    #[error("freight format version {found} is not supported by this build, which reads version {supported}; upgrade freight on this side")]
    UnsupportedVersion { found: u8, supported: u8 },

    /// The payload ended before a field it declares.
    #[error("truncated freight payload: needed {needed} more bytes for {what} at offset {offset}, but the input ends there")]
    Truncated {
        what: &'static str,
        offset: usize,
        needed: usize,
    },

    /// A field holds a value that no writer produces.
    #[error("corrupt freight payload: {0}")]
    Corrupt(String),

    /// A declared size is over a configured limit.
    #[error("freight payload declares {what} of {declared} bytes, over the limit of {limit}; raise the limit if the payload is trusted")]
    OverLimit {
        what: &'static str,
        declared: u64,
        limit: u64,
    },

    /// A checksum did not match: the bytes changed after they were written.
    #[error("checksum mismatch in {what}: stored {stored:#018x}, computed {computed:#018x}; the payload was corrupted in transit or storage")]
    Checksum {
        what: String,
        stored: u64,
        computed: u64,
    },

    /// A block of a frame does not match its digest in the header (format 1.2).
    #[error("{what} does not match its digest in the header: the payload was corrupted in transit or storage{}", if *.signed { ", or tampered with (its header is signed)" } else { "" })]
    Digest { what: String, signed: bool },

    /// A key was given but the payload carries no signature.
    #[error("the payload is not signed, but a key was given: refusing it (it may have been forged or stripped of its signature); sign payloads with dumps(..., key=...)")]
    Unsigned,

    /// The signature does not match under any of the keys.
    #[error(
        "the payload's signature does not match: it was tampered with, or signed with another key"
    )]
    BadSignature,

    /// A payload given as a list of buffers has none.
    #[error(
        "a payload in parts needs at least one buffer, its header (the output of dumps_frames)"
    )]
    NoHeader,

    /// The first buffer of a payload in parts holds more (or less) than the header.
    #[error("the first buffer must be exactly the header ({expected} bytes) but holds {found} bytes; pass the list dumps_frames returned, unchanged")]
    HeaderPart { expected: usize, found: usize },

    /// A payload in parts has another number of buffers than its header lists.
    #[error("the header lists {frames} frames{} but {found} buffers follow it; pass the list dumps_frames returned, unchanged", if *.signed { " and a signature" } else { "" })]
    PartCount {
        frames: usize,
        signed: bool,
        found: usize,
    },

    /// A frame's stored bytes are not as long as the frame table says.
    #[error("corrupt freight payload: frame {index} holds {found} bytes but the frame table says {declared}")]
    FrameLength {
        index: usize,
        found: u64,
        declared: u64,
    },

    /// A node refers to a frame the payload does not have.
    #[error("corrupt freight payload: a node refers to frame {index} but the payload has {count} frames")]
    NoSuchFrame { index: u32, count: usize },

    /// Two nodes use one frame (writers never do; it would let a small payload expand into many
    /// copies of one frame).
    #[error("corrupt freight payload: frame {index} is used by more than one node")]
    FrameReused { index: u32 },

    /// Nesting deeper than the reader accepts.
    #[error("freight payload nests deeper than {limit} levels")]
    TooDeep { limit: usize },
}

impl Error {
    pub fn corrupt(msg: impl Into<String>) -> Self {
        Error::Corrupt(msg.into())
    }

    /// True for errors that mean "the bytes were changed" rather than "the bytes are malformed".
    pub fn is_integrity(&self) -> bool {
        matches!(
            self,
            Error::Checksum { .. } | Error::Digest { .. } | Error::Unsigned | Error::BadSignature
        )
    }
}

pub type Result<T> = std::result::Result<T, Error>;
