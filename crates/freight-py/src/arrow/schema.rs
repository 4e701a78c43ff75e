//! A stream's field as Arrow IPC schema bytes (a Schema message of one field, as
//! `pyarrow.Schema.serialize()` frames it), and back. Decoded schemas are cached by their
//! bytes: a process loading many small tables of one schema parses it once.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteOptions};
use arrow_schema::{DataType, Field, FieldRef, Schema};

use crate::errors::{Error, Result};

const CONTINUATION: [u8; 4] = [0xff; 4];

/// The IPC bytes of a schema whose one field is `field` (cached: encoding the flatbuffer is
/// most of what exporting a small table costs).
pub fn to_ipc(field: &FieldRef) -> Vec<u8> {
    let key = (Field::clone(field), ordered_flags(field));
    if let Some(bytes) = ENCODED.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return bytes;
    }
    let bytes = encode(field);
    if bytes.len() <= CACHED_MAX {
        if let Ok(mut cache) = ENCODED.lock() {
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
            cache.insert(key, bytes.clone());
        }
    }
    bytes
}

/// The `dict_is_ordered` flag of each dictionary in `field`'s tree, depth first. arrow-rs leaves
/// it out of `Field`'s equality and hash (and so out of `DataType`'s, for nested fields): keyed
/// by the field alone, the cache gave an ordered dictionary the schema of an unordered one met
/// before it, and the payload lost the flag.
fn ordered_flags(field: &Field) -> Vec<bool> {
    fn walk(field: &Field, out: &mut Vec<bool>) {
        out.extend(field.dict_is_ordered());
        children(field.data_type(), out);
    }
    fn children(data_type: &DataType, out: &mut Vec<bool>) {
        match data_type {
            DataType::Struct(fields) => fields.iter().for_each(|f| walk(f, out)),
            DataType::Union(fields, _) => fields.iter().for_each(|(_, f)| walk(f, out)),
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::ListView(f)
            | DataType::LargeListView(f)
            | DataType::FixedSizeList(f, _)
            | DataType::Map(f, _) => walk(f, out),
            DataType::RunEndEncoded(ends, values) => {
                walk(ends, out);
                walk(values, out);
            }
            DataType::Dictionary(_, values) => children(values, out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(field, &mut out);
    out
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
/// What an encoded schema is cached by: the field and its dictionaries' ordered flags.
type EncodedKey = (Field, Vec<bool>);
static ENCODED: LazyLock<Mutex<HashMap<EncodedKey, Vec<u8>>>> = LazyLock::new(Default::default);
static CACHE: LazyLock<Mutex<HashMap<Vec<u8>, FieldRef>>> = LazyLock::new(Default::default);

/// The field of IPC schema bytes written by `to_ipc`.
pub fn from_ipc(bytes: &[u8]) -> Result<FieldRef> {
    if bytes.len() <= CACHED_MAX {
        if let Some(field) = CACHE.lock().ok().and_then(|c| c.get(bytes).cloned()) {
            return Ok(field);
        }
    }
    // The flatbuffer is verified before it is read; a panic on a forged one is caught still.
    let schema = std::panic::catch_unwind(|| arrow_ipc::convert::try_schema_from_ipc_buffer(bytes))
        .map_err(|_| Error::corrupt("the Arrow schema bytes are malformed"))?
        .map_err(|e| Error::corrupt(format!("the Arrow schema bytes are malformed: {e}")))?;
    let [field]: [FieldRef; 1] = schema.fields().to_vec().try_into().map_err(|f: Vec<_>| {
        Error::corrupt(format!(
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
