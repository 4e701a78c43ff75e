//! The stdlib scalars freight encodes natively, both ways: datetime, date, time, timedelta (with
//! UTC, fixed-offset and zoneinfo tzinfo), Decimal, UUID and pathlib paths, by exact type.

use freight_core::{DateTimeFields, Reader, Tag};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};

use crate::decode::{corrupt, TreeDecoder};
use crate::encode::Walker;
use crate::errors::{decode_error, wrap_decode, EncodeResult, SerializationError};
use crate::types::std_types;

impl<'py> Walker<'_, 'py> {
    /// datetime, date, time, timedelta, Decimal, UUID and pathlib paths, by exact type.
    pub(crate) fn stdlib(
        &mut self,
        obj: &Bound<'py, PyAny>,
        ty: &Bound<'py, PyType>,
        std: &crate::types::StdTypes,
        shared: bool,
    ) -> EncodeResult<Option<()>> {
        use pyo3::types::{PyDate, PyDateTime, PyDelta, PyTime};
        use pyo3::types::{PyDateAccess, PyDeltaAccess, PyTimeAccess};
        let ptr = obj.as_ptr();
        let start = self.w.len();
        let slot = self.next_slot;
        macro_rules! memo_or_return {
            () => {
                if self.memo_seen(ptr, shared, true)? {
                    return Ok(Some(()));
                }
            };
        }
        if ty.is(&std.datetime) {
            memo_or_return!();
            let dt = unsafe { obj.cast_unchecked::<PyDateTime>() };
            self.w.datetime(&DateTimeFields {
                year: dt.get_year() as u16,
                month: dt.get_month(),
                day: dt.get_day(),
                hour: dt.get_hour(),
                minute: dt.get_minute(),
                second: dt.get_second(),
                microsecond: dt.get_microsecond(),
                fold: dt.get_fold() as u8,
            });
            let tz = obj.getattr(pyo3::intern!(self.py, "tzinfo"))?;
            if !self.tz(&tz, std)? {
                return self
                    .rollback(start, slot, obj, shared, "a datetime with this tzinfo")
                    .map(Some);
            }
        } else if ty.is(&std.date) {
            memo_or_return!();
            let d = unsafe { obj.cast_unchecked::<PyDate>() };
            self.w.date(&DateTimeFields {
                year: d.get_year() as u16,
                month: d.get_month(),
                day: d.get_day(),
                ..Default::default()
            });
        } else if ty.is(&std.time) {
            memo_or_return!();
            let t = unsafe { obj.cast_unchecked::<PyTime>() };
            self.w.time(&DateTimeFields {
                hour: t.get_hour(),
                minute: t.get_minute(),
                second: t.get_second(),
                microsecond: t.get_microsecond(),
                fold: t.get_fold() as u8,
                ..Default::default()
            });
            let tz = obj.getattr(pyo3::intern!(self.py, "tzinfo"))?;
            if !self.tz(&tz, std)? {
                return self
                    .rollback(start, slot, obj, shared, "a time with this tzinfo")
                    .map(Some);
            }
        } else if ty.is(&std.timedelta) {
            memo_or_return!();
            let d = unsafe { obj.cast_unchecked::<PyDelta>() };
            self.w.timedelta(
                d.get_days(),
                d.get_seconds() as u32,
                d.get_microseconds() as u32,
            );
        } else if ty.is(&std.decimal) {
            memo_or_return!();
            let text = obj.str()?;
            self.w.byte_string(Tag::Decimal, text.to_str()?.as_bytes());
        } else if ty.is(&std.uuid) {
            memo_or_return!();
            let bytes = obj.getattr(pyo3::intern!(self.py, "bytes"))?;
            let bytes: [u8; 16] = bytes
                .extract::<&[u8]>()?
                .try_into()
                .map_err(|_| SerializationError::new_err("UUID.bytes is not 16 bytes"))?;
            let safe = obj
                .getattr(pyo3::intern!(self.py, "is_safe"))?
                .getattr(pyo3::intern!(self.py, "value"))?;
            let safe: i8 = if safe.is_none() { 1 } else { safe.extract()? };
            self.w.uuid(&bytes, safe);
        } else if let Some(flavour) = std.paths.iter().position(|p| ty.is(p)) {
            memo_or_return!();
            let text = obj.str()?;
            let encoded = text.call_method1("encode", ("utf-8", "surrogatepass"))?;
            self.w.path(flavour as u8, encoded.extract::<&[u8]>()?);
        } else {
            return Ok(None);
        }
        Ok(Some(()))
    }

    /// Writes a tz node; false when the tzinfo has no native encoding (pytz, dateutil, ...).
    fn tz(&mut self, tz: &Bound<'py, PyAny>, std: &crate::types::StdTypes) -> EncodeResult<bool> {
        if tz.is_none() {
            self.w.tz_none();
            return Ok(true);
        }
        if tz.is(&std.utc) {
            self.w.tz_utc();
            return Ok(true);
        }
        let ty = tz.get_type();
        if ty.is(&std.timezone) {
            let args = tz.call_method0(pyo3::intern!(self.py, "__getinitargs__"))?;
            let args = args.cast::<PyTuple>().map_err(PyErr::from)?;
            let offset = args.get_item(0)?;
            let offset = unsafe { offset.cast_unchecked::<pyo3::types::PyDelta>() };
            use pyo3::types::PyDeltaAccess;
            let us = (offset.get_days() as i64 * 86_400 + offset.get_seconds() as i64) * 1_000_000
                + offset.get_microseconds() as i64;
            if args.len() > 1 {
                let name = args.get_item(1)?;
                let name = name
                    .cast::<PyString>()
                    .map_err(PyErr::from)?
                    .call_method1("encode", ("utf-8", "surrogatepass"))?;
                self.w.tz_fixed(us, Some(name.extract::<&[u8]>()?));
            } else {
                self.w.tz_fixed(us, None);
            }
            return Ok(true);
        }
        if let Some(zoneinfo) = &std.zoneinfo {
            if ty.is(zoneinfo) {
                // __reduce__ gives (ZoneInfo._unpickle, (key, from_cache)), as pickle stores it.
                let reduced = tz.call_method0(pyo3::intern!(self.py, "__reduce__"))?;
                let args = reduced.get_item(1)?;
                let key = args.get_item(0)?;
                if key.is_none() {
                    return Ok(false); // built from a file object: no key to rebuild it from
                }
                let from_cache: bool = args.get_item(1)?.is_truthy()?;
                let key = key.cast::<PyString>().map_err(PyErr::from)?;
                self.w.tz_zoneinfo(key.to_str()?.as_bytes(), !from_cache);
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl<'py> TreeDecoder<'_, 'py> {
    /// A DateTime, Date, Time, TimeDelta, Decimal, Uuid or Path node (after its tag).
    pub(crate) fn stdlib_node(
        &mut self,
        r: &mut Reader<'_>,
        tag: Tag,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let e = decode_error;
        let obj = match tag {
            Tag::DateTime => {
                let f = r.datetime().map_err(e)?;
                let tz = self.tz(r)?;
                let std = std_types(py)?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("tzinfo", tz)?;
                kwargs.set_item("fold", f.fold)?;
                std.datetime
                    .bind(py)
                    .call(
                        (
                            f.year,
                            f.month,
                            f.day,
                            f.hour,
                            f.minute,
                            f.second,
                            f.microsecond,
                        ),
                        Some(&kwargs),
                    )
                    .map_err(|err| wrap_decode(py, err, "a datetime"))?
            }
            Tag::Date => {
                let f = r.date().map_err(e)?;
                std_types(py)?
                    .date
                    .bind(py)
                    .call1((f.year, f.month, f.day))
                    .map_err(|err| wrap_decode(py, err, "a date"))?
            }
            Tag::Time => {
                let f = r.time().map_err(e)?;
                let tz = self.tz(r)?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("tzinfo", tz)?;
                kwargs.set_item("fold", f.fold)?;
                std_types(py)?
                    .time
                    .bind(py)
                    .call((f.hour, f.minute, f.second, f.microsecond), Some(&kwargs))
                    .map_err(|err| wrap_decode(py, err, "a time"))?
            }
            Tag::TimeDelta => {
                let (days, seconds, micros) = r.timedelta().map_err(e)?;
                std_types(py)?
                    .timedelta
                    .bind(py)
                    .call1((days, seconds, micros))
                    .map_err(|err| wrap_decode(py, err, "a timedelta"))?
            }
            Tag::Decimal => {
                let text = r.byte_string("a Decimal").map_err(e)?;
                let text =
                    std::str::from_utf8(text).map_err(|_| corrupt("a Decimal is not ASCII"))?;
                std_types(py)?
                    .decimal
                    .bind(py)
                    .call1((text,))
                    .map_err(|err| wrap_decode(py, err, "a Decimal"))?
            }
            Tag::Uuid => {
                let (bytes, safe) = r.uuid().map_err(e)?;
                let std = std_types(py)?;
                let safe = std
                    .safe_uuid
                    .bind(py)
                    .call1((if safe == 1 { None } else { Some(safe) },))
                    .map_err(|err| wrap_decode(py, err, "a UUID"))?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("bytes", PyBytes::new(py, &bytes))?;
                kwargs.set_item("is_safe", safe)?;
                std.uuid.bind(py).call((), Some(&kwargs))?
            }
            Tag::Path => {
                let (flavour, text) = r.path().map_err(e)?;
                let text = self.utf8(text, c"surrogatepass")?;
                std_types(py)?.paths[flavour as usize]
                    .bind(py)
                    .call1((text,))
                    .map_err(|err| wrap_decode(py, err, "a path"))?
            }
            other => {
                return Err(corrupt(format!(
                    "{} is not a stdlib scalar node",
                    other.name()
                )))
            }
        };
        Ok(obj)
    }

    pub(crate) fn tz(&mut self, r: &mut Reader<'_>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = self.py;
        let std = std_types(py)?;
        let tag = r.tag().map_err(decode_error)?;
        Ok(match tag {
            Tag::TzNone => None,
            Tag::TzUtc => Some(std.utc.bind(py).clone()),
            Tag::TzFixed => {
                let (offset_us, name) = r.tz_fixed().map_err(decode_error)?;
                let delta = std
                    .timedelta
                    .bind(py)
                    .call1((0, 0, offset_us))
                    .map_err(|err| wrap_decode(py, err, "a tz offset"))?;
                let tz = match name {
                    Some(name) => std
                        .timezone
                        .bind(py)
                        .call1((delta, self.utf8(name, c"surrogatepass")?)),
                    None => std.timezone.bind(py).call1((delta,)),
                };
                Some(tz.map_err(|err| wrap_decode(py, err, "a timezone"))?)
            }
            Tag::TzZoneInfo => {
                let (key, no_cache) = r.tz_zoneinfo().map_err(decode_error)?;
                let key =
                    std::str::from_utf8(key).map_err(|_| corrupt("a zoneinfo key is not UTF-8"))?;
                let zoneinfo = std.zoneinfo.as_ref().ok_or_else(|| {
                    crate::errors::MissingDependencyError::new_err(
                        "the payload holds a zoneinfo timezone but zoneinfo is unavailable",
                    )
                })?;
                let zone = if no_cache {
                    zoneinfo
                        .bind(py)
                        .call_method1(pyo3::intern!(py, "no_cache"), (key,))
                } else {
                    zoneinfo.bind(py).call1((key,))
                };
                Some(zone.map_err(|err| wrap_decode(py, err, "a zoneinfo timezone"))?)
            }
            other => {
                return Err(corrupt(format!(
                    "a {} node where a tzinfo belongs",
                    other.name()
                )))
            }
        })
    }
}
