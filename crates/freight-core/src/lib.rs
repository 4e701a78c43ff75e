//! freight-core: freight's wire format in pure Rust (no Python).
//!
//! - [`payload`]: the reading contract: `Payload::open` (signature, header, frame table,
//!   lengths) and `Frames` (use once, verify once, copy and checksum in one pass, decompress).
//! - [`envelope`]: preamble, header, frame table, header checksum, 64-byte aligned frames.
//! - [`bits`]: the one table of flag bits and codec ids.
//! - [`writer`] / [`reader`]: the node tree, written and read one node at a time.
//! - [`walk`]: a Python-free structural check of a tree (used by `inspect` and the tests).
//! - [`checksum`], [`memory`]: xxh3-64 (fused with copies) and huge-page advice.
//! - [`fork`], [`parallel`]: values that belong to one process (rebuilt in a forked child) and
//!   the thread pool built on them.
//! - [`ptrmap`]: maps keyed by object address, for the encoder's memo.
//! - [`utf8`]: checks of string arrays read from payloads (Arrow's layouts).
//! - [`sparse`]: checks of compressed sparse index arrays read from payloads (CSR/CSC/BSR).
//!
//! Every length, count and index read from a payload is checked against the bytes that remain
//! before it is used, so no input can make the reader allocate more than the input justifies.

pub mod bits;
pub mod checksum;
pub mod compress;
pub mod digest;
pub mod envelope;
pub mod error;
pub mod fork;
pub mod memory;
pub mod parallel;
pub mod payload;
pub mod ptrmap;
pub mod reader;
pub mod shuffle;
pub mod sign;
pub mod sparse;
pub mod tags;
pub mod utf8;
pub mod varint;
pub mod walk;
pub mod writer;

pub use envelope::{EnvelopeSpec, EnvelopeWriter, FrameInfo, FrameLayout, Header, Limits};
pub use error::{Error, Result};
pub use payload::{builtins_tree, Frame, Frames, OpenOptions, Parts, Payload};
pub use reader::{PickleDataRef, PickleNode, Reader};
pub use tags::Tag;
pub use writer::{compact_memo, DateTimeFields, PickleData, TreeWriter};
