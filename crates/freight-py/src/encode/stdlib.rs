//! The stdlib scalars freight encodes natively: datetime, date, time, timedelta (with UTC,
//! fixed-offset and zoneinfo tzinfo), Decimal, UUID and pathlib paths, by exact type.

use freight_core::{DateTimeFields, Tag};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple, PyType};

use crate::encode::walker::Walker;
use crate::errors::{Error, Result};
use crate::python_types::{DateTimeTypes, DATETIME, DECIMAL, PATHS, UUID, ZONEINFO};

impl<'py> Walker<'_, 'py> {
    /// datetime, date, time, timedelta, Decimal, UUID and pathlib paths, by exact type.
    pub(crate) fn stdlib(
        &mut self,
        obj: &Bound<'py, PyAny>,
        ty: &Bound<'py, PyType>,
        shared: bool,
    ) -> Result<Option<()>> {
        use pyo3::types::{PyDate, PyDateTime, PyDelta, PyTime};
        use pyo3::types::{PyDateAccess, PyDeltaAccess, PyTimeAccess};
        let ptr = obj.as_ptr();
        // Each slot only once its module is imported: an object of its type cannot exist before.
        let datetimes = DATETIME.if_imported(self.py);
        let start = self.w.len();
        let slot = self.next_slot;
        macro_rules! memo_or_return {
            () => {
                if self.memo_seen(ptr, shared, true)? {
                    return Ok(Some(()));
                }
            };
        }
        if let Some(types) = datetimes.filter(|d| ty.is(&d.datetime)) {
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
            if !self.tz(&tz, types)? {
                return self
                    .rollback(start, slot, obj, shared, "a datetime with this tzinfo")
                    .map(Some);
            }
        } else if datetimes.is_some_and(|d| ty.is(&d.date)) {
            memo_or_return!();
            let d = unsafe { obj.cast_unchecked::<PyDate>() };
            self.w.date(&DateTimeFields {
                year: d.get_year() as u16,
                month: d.get_month(),
                day: d.get_day(),
                ..Default::default()
            });
        } else if let Some(types) = datetimes.filter(|d| ty.is(&d.time)) {
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
            if !self.tz(&tz, types)? {
                return self
                    .rollback(start, slot, obj, shared, "a time with this tzinfo")
                    .map(Some);
            }
        } else if datetimes.is_some_and(|d| ty.is(&d.timedelta)) {
            memo_or_return!();
            let d = unsafe { obj.cast_unchecked::<PyDelta>() };
            self.w.timedelta(
                d.get_days(),
                d.get_seconds() as u32,
                d.get_microseconds() as u32,
            );
        } else if DECIMAL.if_imported(self.py).is_some_and(|d| ty.is(d)) {
            memo_or_return!();
            let text = obj.str()?;
            self.w.byte_string(Tag::Decimal, text.to_str()?.as_bytes());
        } else if UUID.if_imported(self.py).is_some_and(|u| ty.is(&u.uuid)) {
            memo_or_return!();
            let bytes = obj.getattr(pyo3::intern!(self.py, "bytes"))?;
            let bytes: [u8; 16] = bytes
                .extract::<&[u8]>()?
                .try_into()
                .map_err(|_| Error::encode("UUID.bytes is not 16 bytes".to_owned()))?;
            let safe = obj
                .getattr(pyo3::intern!(self.py, "is_safe"))?
                .getattr(pyo3::intern!(self.py, "value"))?;
            let safe: i8 = if safe.is_none() { 1 } else { safe.extract()? };
            self.w.uuid(&bytes, safe);
        } else if let Some(flavour) = PATHS
            .if_imported(self.py)
            .and_then(|paths| paths.iter().position(|p| ty.is(p)))
        {
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
    fn tz(&mut self, tz: &Bound<'py, PyAny>, std: &DateTimeTypes) -> Result<bool> {
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
        if let Some(zoneinfo) = ZONEINFO.if_imported(self.py) {
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

/// The items of a set in sorted order when they are all exact str, all exact int or all exact
/// bytes (the sets whose order Python can sort without running user code), else None.
///
/// A set's iteration order depends on its insertion history and, for str and bytes, on the
/// process's hash seed: sorting makes the same set give the same bytes in any process.
pub(crate) fn sorted_items<'py>(
    obj: &Bound<'py, PyAny>,
    n: usize,
) -> Result<Option<Bound<'py, PyList>>> {
    let mut items = Vec::with_capacity(n);
    let mut kind: *mut ffi::PyTypeObject = std::ptr::null_mut();
    for item in obj.try_iter()? {
        let item = item?;
        // SAFETY: reading the type of a live object.
        let ty = unsafe { ffi::Py_TYPE(item.as_ptr()) };
        let sortable = ty == &raw mut ffi::PyUnicode_Type
            || ty == &raw mut ffi::PyLong_Type
            || ty == &raw mut ffi::PyBytes_Type;
        if !sortable || (!kind.is_null() && kind != ty) {
            return Ok(None);
        }
        kind = ty;
        items.push(item);
    }
    if items.len() != n {
        return Err(Error::encode(
            "a set changed size while it was being serialized".to_owned(),
        ));
    }
    let list = PyList::new(obj.py(), items)?;
    list.sort()?;
    Ok(Some(list))
}
