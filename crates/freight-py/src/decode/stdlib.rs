//! The stdlib scalars freight decodes natively: datetime, date, time, timedelta (with UTC,
//! fixed-offset and zoneinfo tzinfo), Decimal, UUID and pathlib paths.

use freight_core::{Reader, Tag};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::decode::tree::TreeDecoder;
use crate::errors::{Decoding, Error, Result};
use crate::python_types::{DATETIME, DECIMAL, PATHS, UUID, ZONEINFO};

impl<'py> TreeDecoder<'_, 'py> {
    /// A DateTime, Date, Time, TimeDelta, Decimal, Uuid or Path node (after its tag).
    pub(crate) fn stdlib_node(
        &mut self,
        r: &mut Reader<'_>,
        tag: Tag,
    ) -> Result<Bound<'py, PyAny>> {
        let py = self.py;
        let obj = match tag {
            Tag::DateTime => {
                let f = r.datetime()?;
                let tz = self.tz(r)?;
                let std = DATETIME.imported(py)?;
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
                    .decoding("a datetime")?
            }
            Tag::Date => {
                let f = r.date()?;
                DATETIME
                    .imported(py)?
                    .date
                    .bind(py)
                    .call1((f.year, f.month, f.day))
                    .decoding("a date")?
            }
            Tag::Time => {
                let f = r.time()?;
                let tz = self.tz(r)?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("tzinfo", tz)?;
                kwargs.set_item("fold", f.fold)?;
                DATETIME
                    .imported(py)?
                    .time
                    .bind(py)
                    .call((f.hour, f.minute, f.second, f.microsecond), Some(&kwargs))
                    .decoding("a time")?
            }
            Tag::TimeDelta => {
                let (days, seconds, micros) = r.timedelta()?;
                DATETIME
                    .imported(py)?
                    .timedelta
                    .bind(py)
                    .call1((days, seconds, micros))
                    .decoding("a timedelta")?
            }
            Tag::Decimal => {
                let text = r.byte_string("a Decimal")?;
                let text = std::str::from_utf8(text)
                    .map_err(|_| Error::corrupt("a Decimal is not ASCII"))?;
                DECIMAL
                    .imported(py)?
                    .bind(py)
                    .call1((text,))
                    .decoding("a Decimal")?
            }
            Tag::Uuid => {
                let (bytes, safe) = r.uuid()?;
                let std = UUID.imported(py)?;
                let safe = std
                    .safe_uuid
                    .bind(py)
                    .call1((if safe == 1 { None } else { Some(safe) },))
                    .decoding("a UUID")?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("bytes", PyBytes::new(py, &bytes))?;
                kwargs.set_item("is_safe", safe)?;
                std.uuid.bind(py).call((), Some(&kwargs))?
            }
            Tag::Path => {
                let (flavour, text) = r.path()?;
                let text = self.utf8(text, c"surrogatepass")?;
                PATHS.imported(py)?[flavour as usize]
                    .bind(py)
                    .call1((text,))
                    .decoding("a path")?
            }
            other => {
                return Err(Error::corrupt(format!(
                    "{} is not a stdlib scalar node",
                    other.name()
                )))
            }
        };
        Ok(obj)
    }

    pub(crate) fn tz(&mut self, r: &mut Reader<'_>) -> Result<Option<Bound<'py, PyAny>>> {
        let py = self.py;
        let std = DATETIME.imported(py)?;
        let tag = r.tag()?;
        Ok(match tag {
            Tag::TzNone => None,
            Tag::TzUtc => Some(std.utc.bind(py).clone()),
            Tag::TzFixed => {
                let (offset_us, name) = r.tz_fixed()?;
                let delta = std
                    .timedelta
                    .bind(py)
                    .call1((0, 0, offset_us))
                    .decoding("a tz offset")?;
                let tz = match name {
                    Some(name) => std
                        .timezone
                        .bind(py)
                        .call1((delta, self.utf8(name, c"surrogatepass")?)),
                    None => std.timezone.bind(py).call1((delta,)),
                };
                Some(tz.decoding("a timezone")?)
            }
            Tag::TzZoneInfo => {
                let (key, no_cache) = r.tz_zoneinfo()?;
                let key = std::str::from_utf8(key)
                    .map_err(|_| Error::corrupt("a zoneinfo key is not UTF-8"))?;
                let zoneinfo = ZONEINFO.imported(py).map_err(|err| {
                    if err.is_instance_of::<pyo3::exceptions::PyImportError>(py) {
                        Error::Missing(
                            "the payload holds a zoneinfo timezone but zoneinfo is unavailable"
                                .to_owned(),
                        )
                    } else {
                        err.into()
                    }
                })?;
                let zone = if no_cache {
                    zoneinfo
                        .bind(py)
                        .call_method1(pyo3::intern!(py, "no_cache"), (key,))
                } else {
                    zoneinfo.bind(py).call1((key,))
                };
                Some(zone.decoding("a zoneinfo timezone")?)
            }
            other => {
                return Err(Error::corrupt(format!(
                    "a {} node where a tzinfo belongs",
                    other.name()
                )))
            }
        })
    }
}
