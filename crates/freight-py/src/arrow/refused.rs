//! What the Rust Arrow path refuses although arrow-rs would import it, because arrow-rs would
//! not give it back as it was: such data goes by the Python form (serializers/arrow.py falls
//! back on the refusal), never into a payload that loads wrong or not at all.
//!
//! - Metadata with a key twice: the C Data Interface and pyarrow allow it; arrow-rs reads the
//!   metadata into a map, which keeps the last value only.
//! - A dictionary whose values are dictionary-encoded again: arrow-rs imports it, but the
//!   arrays it builds from the payload do not validate ("Utf8 has 1 children, not 0").

use std::collections::HashSet;
use std::ffi::{c_char, c_void};

use arrow_array::ffi::FFI_ArrowSchema;
use arrow_schema::{DataType, Field};

use crate::errors::{Error, Result};

/// The C Data Interface's ArrowSchema, field by field (arrow-rs keeps its fields private).
#[repr(C)]
struct RawSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut RawSchema,
    dictionary: *mut RawSchema,
    release: Option<unsafe extern "C" fn(*mut RawSchema)>,
    private_data: *mut c_void,
}

/// Refuses `field` (imported from `schema`) when arrow-rs would not carry it whole.
pub fn check(schema: &FFI_ArrowSchema, field: &Field) -> Result<()> {
    // SAFETY: an FFI_ArrowSchema is a C ArrowSchema (repr(C), the layout above), valid and
    // unreleased while the caller holds it.
    if let Some(key) = unsafe { repeated_key(schema as *const FFI_ArrowSchema as *const RawSchema) }
    {
        return Err(Error::encode(format!(
            "cannot carry this Arrow data: its metadata holds the key {key:?} more than once"
        )));
    }
    if nested_dictionary(field.data_type(), false) {
        return Err(Error::encode(
            "cannot carry this Arrow data: a dictionary whose values are dictionary-encoded again"
                .to_owned(),
        ));
    }
    Ok(())
}

/// A metadata key that appears twice in `schema` or any child or dictionary of it.
///
/// # Safety
/// `schema` points to a valid, unreleased C ArrowSchema.
unsafe fn repeated_key(schema: *const RawSchema) -> Option<String> {
    unsafe {
        let s = &*schema;
        if !s.metadata.is_null() {
            // int32 n, then n times (int32 length, key bytes, int32 length, value bytes).
            let read_i32 = |at: *const c_char| (at as *const i32).read_unaligned();
            let mut at = s.metadata;
            let n = read_i32(at).max(0);
            at = at.add(4);
            let mut seen = HashSet::new();
            for _ in 0..n {
                let key_len = read_i32(at).max(0) as usize;
                let key = std::slice::from_raw_parts(at.add(4) as *const u8, key_len);
                at = at.add(4 + key_len);
                let value_len = read_i32(at).max(0) as usize;
                at = at.add(4 + value_len);
                if !seen.insert(key) {
                    return Some(String::from_utf8_lossy(key).into_owned());
                }
            }
        }
        for i in 0..s.n_children.max(0) as usize {
            let child = *s.children.add(i);
            if !child.is_null() {
                if let Some(key) = repeated_key(child) {
                    return Some(key);
                }
            }
        }
        if !s.dictionary.is_null() {
            return repeated_key(s.dictionary);
        }
        None
    }
}

/// Whether a dictionary type holds dictionary-encoded values, anywhere in `data_type`.
fn nested_dictionary(data_type: &DataType, in_dictionary: bool) -> bool {
    match data_type {
        DataType::Dictionary(_, values) => in_dictionary || nested_dictionary(values, true),
        _ => super::build::child_types(data_type)
            .iter()
            .any(|child| nested_dictionary(child, in_dictionary)),
    }
}
