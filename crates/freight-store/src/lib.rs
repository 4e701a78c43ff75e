//! freight-store: where payloads are kept. A `Store` is one object_store backend (a local
//! folder, memory, S3) under a key prefix, with atomic writes that stream large values, ranged
//! and parallel reads, memory-mapped local reads, and errors that name the store and the key.
//! No Python here: the bindings release the GIL around every call.

mod error;
mod keys;
mod local;
mod open;
mod ranges;
mod store;

pub use error::{Error, Result};
pub use open::Options;
pub use store::{no_progress, Backend, Meta, Progress, Store, Stored, PART, SINGLE_PUT_MAX};
