//! freight._freight: the Python bindings. Object-graph walk, type dispatch, buffers, the pickle
//! bridge and error mapping; every byte layout lives in freight-core.

mod buffer;
mod checks;
mod codec;
mod compression;
mod craft;
mod decode;
mod dispatch;
mod encode;
mod encode_state;
mod errors;
mod ext;
mod inspect;
mod limits;
mod numpy;
mod options;
mod payload;
mod pickle_bridge;
mod stdlib;
mod types;

use pyo3::prelude::*;

#[pymodule]
fn _freight(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMAT_VERSION", freight_core::envelope::VERSION)?;
    m.add("FRAME_ALIGN", freight_core::envelope::ALIGN)?;
    m.add("DEBUG_BUILD", cfg!(debug_assertions))?;
    m.add_class::<codec::Codec>()?;
    m.add_class::<buffer::FrameBuffer>()?;
    m.add_class::<pickle_bridge::PickleSink>()?;
    m.add_class::<pickle_bridge::PickleSource>()?;
    m.add_class::<pickle_bridge::ChainedReduce>()?;
    m.add_function(wrap_pyfunction!(inspect::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::inspect_frames, m)?)?;
    m.add_function(wrap_pyfunction!(craft::_envelope, m)?)?;
    m.add_function(wrap_pyfunction!(checks::string_array_valid, m)?)?;
    Ok(())
}
