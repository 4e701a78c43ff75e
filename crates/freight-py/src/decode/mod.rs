//! The decode side: `input` opens a payload (through freight-core's `Payload::open`) and
//! resolves its tags, `tree` rebuilds the object graph, and `stdlib`, `numpy`, `serializer` (with `arrow_meta`)
//! and `pickle_source` decode the node kinds that need Python (each an `impl TreeDecoder`).
//! Nothing here imports the encode side.

mod arrow_meta;
pub mod input;
mod keys;
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
    ctx.verify_before_pickle(py, None)?;
    let obj = {
        let mut decoder = TreeDecoder::new(py, &ctx);
        decoder.root(ctx.tree())?
    };
    ctx.verify_rest(py)?;
    Ok(obj)
}

/// Decodes a payload of builtins only (see `freight_core::builtins_tree`) straight from its
/// bytes: no export, no shared context. None when the payload needs the general path. The
/// general path's fixed cost (exporting the input, a reference-counted context, the frame
/// table) was most of a small load, enough to make loading a single int slower than pickle.
pub fn decode_builtins<'py>(py: Python<'py>, bytes: &[u8]) -> Result<Option<Bound<'py, PyAny>>> {
    let limits = freight_core::envelope::Limits::default();
    let Some(tree) = freight_core::builtins_tree(bytes, &limits)? else {
        return Ok(None);
    };
    Ok(Some(TreeDecoder::builtins(py).root(&bytes[tree])?))
}
