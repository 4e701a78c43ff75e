//! The decode side: `input` opens a payload (through freight-core's `Payload::open`) and
//! resolves its tags, `tree` rebuilds the object graph, and `stdlib`, `numpy`, `serializer`
//! and `pickle_source` decode the node kinds that need Python (each an `impl TreeDecoder`).
//! Nothing here imports the encode side.

pub mod input;
mod numpy;
pub mod pickle_source;
mod serializer;
mod stdlib;
pub mod tree;

use std::rc::Rc;

use pyo3::prelude::*;

pub use input::{DecodeCtx, DecodeOptions};
use tree::TreeDecoder;

use crate::errors::Result;

/// Decodes an opened payload into its object, then verifies the frames no node used.
pub fn decode<'py>(py: Python<'py>, ctx: Rc<DecodeCtx>) -> Result<Bound<'py, PyAny>> {
    let obj = {
        let mut decoder = TreeDecoder::new(py, &ctx);
        decoder.root(ctx.tree())?
    };
    ctx.verify_rest(py)?;
    Ok(obj)
}
