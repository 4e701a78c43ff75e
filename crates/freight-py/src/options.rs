//! Option values as users write them in Python (`compression="zstd"`, `key=b"..."`), checked
//! and turned into Rust values once, when a `Freight` is built or a call overrides them.

use freight_core::compress::Algorithm;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::errors::{Error, Result};

/// What `compression=` asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Compression {
    None,
    Fixed(Algorithm),
    /// Per frame, from samples: lz4 when the time it saves on a link of `transport_speed`
    /// bytes per second exceeds what it costs, nothing otherwise.
    Auto {
        transport_speed: u64,
    },
}

const ZSTD_DEFAULT_LEVEL: i32 = 3;

fn bad_compression(obj: &Bound<'_, PyAny>) -> Error {
    Error::option(format!(
        "compression must be None, \"none\", \"lz4\", \"zstd\", (\"zstd\", level) with level -7..22, \"auto\" or (\"auto\", link bytes per second); got {}",
        obj.repr().map(|r| r.to_string()).unwrap_or_default()
    ))
}

/// Parses `compression=`: None / "none", "lz4", "zstd", ("zstd", level), ("lz4", _), "auto",
/// ("auto", transport bytes per second).
pub fn compression(obj: &Bound<'_, PyAny>) -> Result<Compression> {
    if obj.is_none() {
        return Ok(Compression::None);
    }
    let (name, setting) = if let Ok(name) = obj.cast::<PyString>() {
        (name.to_str()?.to_owned(), None)
    } else if let Ok(pair) = obj.cast::<PyTuple>() {
        if pair.len() != 2 {
            return Err(bad_compression(obj));
        }
        let name: String = pair
            .get_item(0)?
            .extract()
            .map_err(|_| bad_compression(obj))?;
        (name, Some(pair.get_item(1)?))
    } else {
        return Err(bad_compression(obj));
    };
    let level = || -> Result<i32> {
        let setting = setting.as_ref().ok_or_else(|| bad_compression(obj))?;
        setting.extract().map_err(|_| bad_compression(obj))
    };
    match (name.as_str(), &setting) {
        ("none", None) => Ok(Compression::None),
        ("auto", None) => Ok(Compression::Auto {
            transport_speed: freight_core::compress::DEFAULT_TRANSPORT_SPEED,
        }),
        ("auto", Some(speed)) => Ok(Compression::Auto {
            transport_speed: transport_speed(speed)?,
        }),
        ("lz4", Some(_)) => {
            level()?;
            Ok(Compression::Fixed(Algorithm::Lz4))
        }
        ("lz4", None) => Ok(Compression::Fixed(Algorithm::Lz4)),
        ("zstd", None) => Ok(Compression::Fixed(Algorithm::Zstd(ZSTD_DEFAULT_LEVEL))),
        ("zstd", Some(_)) => match level()? {
            level if (-7..=22).contains(&level) => Ok(Compression::Fixed(Algorithm::Zstd(level))),
            _ => Err(bad_compression(obj)),
        },
        _ => Err(bad_compression(obj)),
    }
}

/// The link speed of `("auto", bytes_per_second)`: a finite number, at least 1.
fn transport_speed(obj: &Bound<'_, PyAny>) -> Result<u64> {
    let speed: f64 = obj.extract().map_err(|_| {
        Error::option(format!(
            "(\"auto\", speed): the speed is the link's bytes per second (e.g. 1e9), not {}",
            obj.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })?;
    if !(speed.is_finite() && speed >= 1.0) {
        return Err(Error::option(format!(
            "(\"auto\", speed): the speed is the link's bytes per second, at least 1, not {speed}"
        )));
    }
    Ok(speed as u64)
}

/// Parses `key=`: None, a bytes-like key, or (to load) a list or tuple of keys for rotation.
pub fn keys(obj: &Bound<'_, PyAny>) -> Result<Vec<Vec<u8>>> {
    if obj.is_none() {
        return Ok(Vec::new());
    }
    let items: Vec<Bound<'_, PyAny>> =
        if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
            obj.try_iter()?.collect::<PyResult<_>>()?
        } else {
            vec![obj.clone()]
        };
    if items.is_empty() {
        // An empty list must not quietly mean "no key": that would switch verification off.
        return Err(Error::option(
            "key= got an empty list of keys; pass at least one key, or key=None to not sign or verify"
                .to_owned(),
        ));
    }
    let mut keys = Vec::with_capacity(items.len());
    for item in items {
        let key: Vec<u8> = if let Ok(b) = item.cast::<PyBytes>() {
            b.as_bytes().to_vec()
        } else {
            crate::buffer::RawBuffer::simple(&item)
                .map(|buf| buf.as_slice().to_vec())
                .map_err(|_| {
                    Error::option(
                        "a key must be bytes (or a list of bytes to accept several on load)"
                            .to_owned(),
                    )
                })?
        };
        if key.is_empty() {
            return Err(Error::option(
                "an empty key signs nothing: use a long random secret (32 bytes or more)"
                    .to_owned(),
            ));
        }
        keys.push(key);
    }
    Ok(keys)
}

/// Default bound on one frame's raw size when loading: generous, but a lying header or a
/// decompression bomb cannot make a load allocate more (pass max_size= for larger payloads).
pub const DEFAULT_MAX_SIZE: u64 = 16 << 30;

fn repr(obj: &Bound<'_, PyAny>) -> String {
    obj.repr().map(|r| r.to_string()).unwrap_or_default()
}

/// A yes/no option of a call (`checksum=`, `zero_copy=`, ...): None when left out, else True or
/// False (numpy's bool too); anything else is an `OptionError` naming the option. Taken as an
/// object rather than a `bool` argument so that the error is freight's, not PyO3's bare
/// `TypeError` without the option's name.
pub fn flag(name: &str, obj: Option<&Bound<'_, PyAny>>) -> Result<Option<bool>> {
    obj.map(|obj| {
        obj.extract::<bool>()
            .map_err(|_| Error::option(format!("{name}= takes True or False; got {}", repr(obj))))
    })
    .transpose()
}

/// `max_size=` of a call: None when left out, else a whole number of bytes (see `max_size`).
pub fn max_size_arg(obj: Option<&Bound<'_, PyAny>>) -> Result<Option<u64>> {
    obj.map(|obj| {
        if obj.is_instance_of::<pyo3::types::PyBool>() {
            // An int to Python, but max_size=True is a mistake, not a limit of 1 byte.
            return Err(Error::option(
                "max_size= takes a whole number of bytes (or None for the default bound); got a bool"
                    .to_owned(),
            ));
        }
        let value: i128 = obj.extract().map_err(|_| {
            Error::option(format!(
                "max_size= takes a whole number of bytes (or None for the default bound); got {}",
                repr(obj)
            ))
        })?;
        max_size(value)
    })
    .transpose()
}

/// Checks `max_size=`: a number of bytes, 0 or more.
pub fn max_size(value: i128) -> Result<u64> {
    u64::try_from(value).map_err(|_| {
        Error::option(format!(
            "max_size must be a number of bytes from 0 to 2**64-1 (the largest frame loads accepts); got {value}"
        ))
    })
}

/// Parses `allowed_tags=`: None (no restriction) or an iterable of tag strings ("pickle" for
/// pickle nodes).
pub fn allowed_tags(obj: &Bound<'_, PyAny>) -> Result<Option<Vec<String>>> {
    if obj.is_none() {
        return Ok(None);
    }
    let bad = || {
        Error::option(
            "allowed_tags must be None or a list of serializer tags (strings; \"pickle\" for pickle)"
                .to_owned(),
        )
    };
    if obj.is_instance_of::<PyString>() {
        return Err(bad()); // a single string would be read as a list of letters
    }
    let mut tags = Vec::new();
    for item in obj.try_iter().map_err(|_| bad())? {
        tags.push(item?.extract::<String>().map_err(|_| bad())?);
    }
    Ok(Some(tags))
}
