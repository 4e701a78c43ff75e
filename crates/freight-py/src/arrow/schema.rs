//! A stream's field as Arrow IPC schema bytes (a Schema message of one field, as
//! `pyarrow.Schema.serialize()` frames it), and back. Decoded schemas are cached by their
//! bytes: a process loading many small tables of one schema parses it once.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteOptions};
use arrow_schema::{Field, FieldRef, Schema};
use pyo3::exceptions::PyValueError;
use pyo3::PyResult;

const CONTINUATION: [u8; 4] = [0xff; 4];

/// The IPC bytes of a schema whose one field is `field` (cached: encoding the flatbuffer is
/// most of what exporting a small table costs).
pub fn to_ipc(field: &FieldRef) -> PyResult<Vec<u8>> {
    if let Some(bytes) = ENCODED
        .lock()
        .ok()
        .and_then(|c| c.get(field.as_ref()).cloned())
    {
        return Ok(bytes);
    }
    let bytes = encode(field);
    if bytes.len() <= CACHED_MAX {
        if let Ok(mut cache) = ENCODED.lock() {
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(Field::clone(field), bytes.clone());
        }
    }
    Ok(bytes)
}

fn encode(field: &FieldRef) -> Vec<u8> {
    let schema = Schema::new(vec![field.clone()]);
    let encoded = IpcDataGenerator::default().schema_to_bytes_with_dictionary_tracker(
        &schema,
        &mut DictionaryTracker::new(false),
        &IpcWriteOptions::default(),
    );
    let message = encoded.ipc_message;
    let padded = message.len().next_multiple_of(8);
    let mut out = Vec::with_capacity(8 + padded);
    out.extend_from_slice(&CONTINUATION);
    out.extend_from_slice(&(padded as i32).to_le_bytes());
    out.extend_from_slice(&message);
    out.resize(8 + padded, 0);
    out
}

/// Schemas up to this size are cached (bigger ones are rare and parse in proportion).
const CACHED_MAX: usize = 4096;
const CACHE_ENTRIES: usize = 256;
static ENCODED: LazyLock<Mutex<HashMap<Field, Vec<u8>>>> = LazyLock::new(Default::default);
static CACHE: LazyLock<Mutex<HashMap<Vec<u8>, FieldRef>>> = LazyLock::new(Default::default);

/// The field of IPC schema bytes written by `to_ipc`.
pub fn from_ipc(bytes: &[u8]) -> PyResult<FieldRef> {
    if bytes.len() <= CACHED_MAX {
        if let Some(field) = CACHE.lock().ok().and_then(|c| c.get(bytes).cloned()) {
            return Ok(field);
        }
    }
    // The flatbuffer is verified before it is read; a panic on a forged one is caught still.
    let schema = std::panic::catch_unwind(|| arrow_ipc::convert::try_schema_from_ipc_buffer(bytes))
        .map_err(|_| PyValueError::new_err("the Arrow schema bytes are malformed"))?
        .map_err(|e| PyValueError::new_err(format!("the Arrow schema bytes are malformed: {e}")))?;
    let [field]: [FieldRef; 1] = schema.fields().to_vec().try_into().map_err(|f: Vec<_>| {
        PyValueError::new_err(format!(
            "an Arrow payload's schema has {} fields, not 1",
            f.len()
        ))
    })?;
    if bytes.len() <= CACHED_MAX {
        if let Ok(mut cache) = CACHE.lock() {
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(bytes.to_vec(), Arc::clone(&field));
        }
    }
    Ok(field)
}
