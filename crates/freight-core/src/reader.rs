//! `Reader`: a bounds-checked cursor over the tree (and the header). Every length and count it
//! hands out has been checked against the bytes that remain, so a caller may allocate for it.

use crate::error::{Error, Result};
use crate::tags::Tag;
use crate::varint::{get_uvarint, unzigzag};
use crate::writer::DateTimeFields;

/// Where a pickle node keeps its pickle stream, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickleDataRef<'a> {
    Inline(&'a [u8]),
    Frame(u32),
}

#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
    pub fn is_at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// Fails unless every byte was consumed (trailing garbage is corruption).
    pub fn expect_end(&self, what: &str) -> Result<()> {
        if self.is_at_end() {
            Ok(())
        } else {
            Err(Error::corrupt(format!(
                "{} trailing bytes after the {what}",
                self.remaining()
            )))
        }
    }

    #[inline]
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::Truncated {
                what,
                offset: self.pos,
                needed: n - self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    #[inline]
    pub fn u8(&mut self, what: &'static str) -> Result<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(Error::Truncated {
                what,
                offset: self.pos,
                needed: 1,
            }),
        }
    }

    pub fn u16_le(&mut self, what: &'static str) -> Result<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u64_le(&mut self, what: &'static str) -> Result<u64> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    #[inline]
    pub fn f64_le(&mut self, what: &'static str) -> Result<f64> {
        Ok(f64::from_bits(self.u64_le(what)?))
    }

    #[inline(always)]
    pub fn uvarint(&mut self, what: &'static str) -> Result<u64> {
        // Most varints (lengths, counts, small ints) are one byte, nearly all the rest two
        // (values below 16384: ids, memo slots).
        if let Some(&byte) = self.buf.get(self.pos) {
            if byte < 0x80 {
                self.pos += 1;
                return Ok(byte as u64);
            }
            if let Some(&next) = self.buf.get(self.pos + 1) {
                if next < 0x80 {
                    self.pos += 2;
                    return Ok((byte & 0x7f) as u64 | (next as u64) << 7);
                }
            }
        }
        self.uvarint_slow(what)
    }

    #[inline(never)]
    fn uvarint_slow(&mut self, what: &'static str) -> Result<u64> {
        match get_uvarint(&self.buf[self.pos..]) {
            Some((v, n)) => {
                self.pos += n;
                Ok(v)
            }
            None if self.remaining() < 10 && self.buf[self.pos..].iter().all(|b| b & 0x80 != 0) => {
                Err(Error::Truncated {
                    what,
                    offset: self.pos,
                    needed: 1,
                })
            }
            None => Err(Error::corrupt(format!(
                "malformed varint for {what} at offset {}",
                self.pos
            ))),
        }
    }

    #[inline]
    pub fn ivarint(&mut self, what: &'static str) -> Result<i64> {
        Ok(unzigzag(self.uvarint(what)?))
    }

    /// A varint that must fit in u32 (indices, slots).
    #[inline]
    pub fn index(&mut self, what: &'static str) -> Result<u32> {
        let v = self.uvarint(what)?;
        u32::try_from(v).map_err(|_| Error::corrupt(format!("{what} {v} is out of range")))
    }

    /// A count of items that each take at least `min_item_bytes` bytes: checked against what
    /// remains, so allocating `count` slots is justified by the input's size.
    #[inline]
    pub fn count(&mut self, min_item_bytes: usize, what: &'static str) -> Result<usize> {
        let n = self.uvarint(what)?;
        // n * min <= remaining, without a division (a container's every decode pays it)
        if n.saturating_mul(min_item_bytes.max(1) as u64) > self.remaining() as u64 {
            return Err(Error::corrupt(format!(
                "{what} declares {n} items but only {} bytes remain",
                self.remaining()
            )));
        }
        Ok(n as usize)
    }

    /// A length-prefixed byte string.
    #[inline]
    pub fn byte_string(&mut self, what: &'static str) -> Result<&'a [u8]> {
        let n = self.uvarint(what)?;
        if n > self.remaining() as u64 {
            return Err(Error::Truncated {
                what,
                offset: self.pos,
                needed: (n - self.remaining() as u64).min(usize::MAX as u64) as usize,
            });
        }
        self.take(n as usize, what)
    }

    /// The next byte, not consumed (a node's tag, to choose how to read it).
    #[inline(always)]
    pub fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    #[inline(always)]
    pub fn tag(&mut self) -> Result<Tag> {
        let at = self.pos;
        let byte = self.u8("a node tag")?;
        Tag::from_u8(byte)
            .ok_or_else(|| Error::corrupt(format!("unknown node tag {byte:#04x} at offset {at}")))
    }

    fn clock(&mut self, f: &mut DateTimeFields) -> Result<()> {
        let hms = self.take(3, "a time")?;
        f.hour = hms[0];
        f.minute = hms[1];
        f.second = hms[2];
        let us = self.uvarint("microseconds")?;
        f.microsecond =
            u32::try_from(us).map_err(|_| Error::corrupt("microseconds out of range"))?;
        f.fold = self.u8("fold")?;
        Ok(())
    }

    /// Fields of a DateTime node (after its tag); the tz node follows.
    pub fn datetime(&mut self) -> Result<DateTimeFields> {
        let mut f = self.date()?;
        self.clock(&mut f)?;
        Ok(f)
    }

    /// Fields of a Date node (after its tag).
    pub fn date(&mut self) -> Result<DateTimeFields> {
        let year = self.u16_le("a year")?;
        let md = self.take(2, "a date")?;
        Ok(DateTimeFields {
            year,
            month: md[0],
            day: md[1],
            ..Default::default()
        })
    }

    /// Fields of a Time node (after its tag); the tz node follows.
    pub fn time(&mut self) -> Result<DateTimeFields> {
        let mut f = DateTimeFields::default();
        self.clock(&mut f)?;
        Ok(f)
    }

    /// (days, seconds, microseconds) of a TimeDelta node (after its tag).
    pub fn timedelta(&mut self) -> Result<(i32, u32, u32)> {
        let days = self.ivarint("timedelta days")?;
        let seconds = self.uvarint("timedelta seconds")?;
        let micros = self.uvarint("timedelta microseconds")?;
        let days =
            i32::try_from(days).map_err(|_| Error::corrupt("timedelta days out of range"))?;
        let seconds =
            u32::try_from(seconds).map_err(|_| Error::corrupt("timedelta seconds out of range"))?;
        let micros = u32::try_from(micros)
            .map_err(|_| Error::corrupt("timedelta microseconds out of range"))?;
        Ok((days, seconds, micros))
    }

    /// (offset in microseconds, optional name) of a TzFixed node (after its tag).
    pub fn tz_fixed(&mut self) -> Result<(i64, Option<&'a [u8]>)> {
        let offset = self.ivarint("a tz offset")?;
        let name = match self.u8("a tz name flag")? {
            0 => None,
            1 => Some(self.byte_string("a tz name")?),
            other => {
                return Err(Error::corrupt(format!(
                    "tz name flag {other} is not 0 or 1"
                )))
            }
        };
        Ok((offset, name))
    }

    /// (key, no_cache) of a TzZoneInfo node (after its tag).
    pub fn tz_zoneinfo(&mut self) -> Result<(&'a [u8], bool)> {
        let key = self.byte_string("a zoneinfo key")?;
        match self.u8("a zoneinfo flag")? {
            0 => Ok((key, false)),
            1 => Ok((key, true)),
            other => Err(Error::corrupt(format!(
                "zoneinfo flag {other} is not 0 or 1"
            ))),
        }
    }

    /// (bytes, is_safe) of a Uuid node (after its tag).
    pub fn uuid(&mut self) -> Result<([u8; 16], i8)> {
        let bytes: [u8; 16] = self.take(16, "a uuid")?.try_into().expect("16 bytes");
        let is_safe = self.u8("uuid is_safe")? as i8;
        Ok((bytes, is_safe))
    }

    /// (flavour, text) of a Path node (after its tag).
    pub fn path(&mut self) -> Result<(u8, &'a [u8])> {
        let flavour = self.u8("a path flavour")?;
        if flavour > 3 {
            return Err(Error::corrupt(format!("unknown path flavour {flavour}")));
        }
        Ok((flavour, self.byte_string("a path")?))
    }

    /// (flags, shape, frame) of an NdArray node, after its dtype node.
    pub fn ndarray_tail(&mut self) -> Result<(u8, Vec<u64>, u32)> {
        let flags = self.u8("array flags")?;
        if flags & !crate::bits::array_flags::KNOWN != 0 {
            return Err(Error::corrupt(format!("unknown array flags {flags:#04x}")));
        }
        let ndim = self.count(1, "array ndim")?;
        if ndim > 64 {
            return Err(Error::corrupt(format!(
                "array has {ndim} dimensions; numpy allows at most 64"
            )));
        }
        let mut shape = Vec::with_capacity(ndim);
        for _ in 0..ndim {
            shape.push(self.uvarint("an array dimension")?);
        }
        let frame = self.index("an array frame index")?;
        Ok((flags, shape, frame))
    }

    /// The frame indices that end an Ext node.
    pub fn frame_list(&mut self) -> Result<Vec<u32>> {
        let n = self.count(1, "frame list")?;
        (0..n).map(|_| self.index("a frame index")).collect()
    }

    /// The body of a Pickle node (after its tag).
    pub fn pickle(&mut self) -> Result<PickleNode<'a>> {
        let (cloudpickle, session) = match self.u8("pickle flavour")? {
            0 => (false, false),
            1 => (true, false),
            2 => (true, true),
            other => return Err(Error::corrupt(format!("unknown pickle flavour {other}"))),
        };
        let data = match self.u8("pickle data location")? {
            0 => PickleDataRef::Inline(self.byte_string("a pickle stream")?),
            1 => PickleDataRef::Frame(self.index("a pickle frame index")?),
            other => {
                return Err(Error::corrupt(format!(
                    "unknown pickle data location {other}"
                )))
            }
        };
        let buffers = self.frame_list()?;
        let n = self.count(1, "pickle externals")?;
        let mut externals = Vec::with_capacity(n);
        for _ in 0..n {
            externals.push(self.byte_string("a pickle external")?);
        }
        Ok(PickleNode {
            cloudpickle,
            session,
            data,
            buffers,
            externals,
        })
    }
}

/// A Pickle node as read: the externals are subtrees, each decoded with a `Reader` of its own.
#[derive(Debug, Clone)]
pub struct PickleNode<'a> {
    pub cloudpickle: bool,
    /// Flavour 2: one stream of the payload's pickler session (see FORMAT.md, "Pickle node"),
    /// loaded by the payload's one unpickler, in tree order.
    pub session: bool,
    pub data: PickleDataRef<'a>,
    pub buffers: Vec<u32>,
    pub externals: Vec<&'a [u8]>,
}
