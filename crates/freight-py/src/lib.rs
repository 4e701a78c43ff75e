//! freight._freight: the Python bindings. An encode side (object-graph walk, type dispatch,
//! the pickler's hook, compression policy) and a decode side (opening payloads through
//! freight-core, rebuilding objects, the unpickler's hook) that do not import each other;
//! errors mapped once (errors.rs). Every byte layout and every check of a payload's bytes
//! lives in freight-core.

mod array_checks;
mod arrow;
mod buffer;
mod call_options;
mod codec;
mod codec_methods;
mod decode;
mod encode;
mod errors;
mod inspect;
mod lazy;
mod lazy_columns;
mod lazy_verify;
mod limits;
mod options;
mod payload_parts;
mod python_types;
mod storage;
#[cfg(feature = "testing")]
mod testing_envelope;

use pyo3::prelude::*;

/// Free-threaded builds: not declared safe yet. The codec keeps per-call state in `RefCell`s
/// reached from Python callbacks (the pickle hooks) and the registry's views are plain dicts
/// mutated by Python; both assume the GIL serialises calls.
#[pymodule(gil_used = true)]
fn _freight(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMAT_VERSION", freight_core::envelope::VERSION)?;
    m.add("FRAME_ALIGN", freight_core::envelope::ALIGN)?;
    m.add("DEBUG_BUILD", cfg!(debug_assertions))?;
    m.add_class::<codec::Codec>()?;
    codec_methods::install(m.py())?;
    m.add_class::<buffer::FrameBuffer>()?;
    m.add_class::<encode::dispatch::DispatchTables>()?;
    m.add_class::<encode::pickle_sink::PickleSink>()?;
    m.add_class::<encode::pickle_sink::ChainedReduce>()?;
    m.add_class::<decode::pickle_source::PickleSource>()?;
    m.add_class::<payload_parts::PayloadParts>()?;
    m.add_class::<arrow::ArrowMeta>()?;
    m.add_class::<arrow::CArrays>()?;
    m.add_class::<storage::NativeStore>()?;
    m.add_class::<storage::StoredBuffer>()?;
    m.add_class::<lazy::LazyHeader>()?;
    m.add_function(wrap_pyfunction!(lazy::header_length, m)?)?;
    m.add_function(wrap_pyfunction!(lazy::decompress_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(lazy::frames_raw, m)?)?;
    m.add_function(wrap_pyfunction!(lazy_columns::arrow_project, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::verify, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::compressed_frames, m)?)?;
    m.add_function(wrap_pyfunction!(buffer::buffer_span, m)?)?;
    m.add_function(wrap_pyfunction!(array_checks::string_array_valid, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::arrow_dumps, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::arrow_loads, m)?)?;
    m.add_function(wrap_pyfunction!(array_checks::compressed_indices_error, m)?)?;
    #[cfg(feature = "testing")]
    m.add_function(wrap_pyfunction!(testing_envelope::_envelope, m)?)?;
    #[cfg(feature = "testing")]
    m.add_function(wrap_pyfunction!(testing_envelope::_huge_pages_ready, m)?)?;
    Ok(())
}
