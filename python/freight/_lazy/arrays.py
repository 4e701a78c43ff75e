"""Rows of a stored numpy array, read alone: the byte range of rows ``a:b`` of a C-ordered array,
widened to the frame's digest blocks (each block read is checked against the digest the header
holds: xxh3, or SHA-256 authenticated by the header's signature), or for a compressed frame
the compressed blocks that hold those rows (found from the block table at the frame's start),
decompressed alone. A frame without block digests (one of at most 1 MiB, with a single
checksum) is read and checked whole: there is no smaller unit to check."""

from __future__ import annotations

from typing import Any

from freight import _freight
from freight._lazy.span import Span as _Span

FORTRAN = 1  # the NdArray node's flag bit (docs/FORMAT.md)


def _array(reader: Any, span: Any) -> tuple[Any, int, tuple[int, ...], int]:
    # The array's own memo marker, if any, takes a slot before its dtype node's.
    base = span.memo_base + (1 if span.at > span.start else 0)
    dtype_span, flags, shape, frame = reader.header.array(span.at, base)
    return _Span(*dtype_span), flags, tuple(shape), frame


def describe(reader: Any, span: Any) -> tuple[Any, tuple[int, ...], bool]:
    """(dtype, shape, Fortran order) of a stored array, from the header alone."""
    from freight.serializers.numpy import dtype_from_wire

    dtype_span, flags, shape, _ = _array(reader, span)
    return dtype_from_wire(reader.decode(dtype_span)), shape, bool(flags & FORTRAN)


def _uvarint(data: Any, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated block table")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _put_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


class _Frame:
    """Reads verified byte ranges of one frame's stored bytes."""

    def __init__(self, reader: Any, index: int):
        self.reader = reader
        self.index = index
        self.info = reader.header.frame(index)
        self.start = self.info["start"]
        self.stored = self.info["stored_length"]

    def read(self, lo: int, hi: int) -> bytes:
        """Stored bytes lo..hi, read by whole digest blocks and checked."""
        block = self.info["digest_block"]
        a = (lo // block) * block
        b = min(self.stored, -(-hi // block) * block)
        data = bytes(self.reader.source.read([(self.start + a, self.start + b)])[0])
        self.reader.header.check_blocks(self.index, a // block, data)
        return data[lo - a : hi - a]


def read_rows(reader: Any, span: Any, dtype: Any, shape: tuple[int, ...], a: int, b: int) -> Any:
    """Rows ``a:b`` of the C-ordered array at ``span``, reading only what holds them."""
    import numpy as np

    _, _, _, index = _array(reader, span)
    frame = _Frame(reader, index)
    info = frame.info
    row = dtype.itemsize
    for d in shape[1:]:
        row *= d
    lo, hi = a * row, b * row
    whole = info["digest_block"] is None and (info["checksum"] or info["codec"] != 0)
    if whole or (info["codec"] != 0 and info["digest_block"] is None):
        # One checksum over the frame: read it whole (at most 1 MiB stored), through the codec.
        return np.ascontiguousarray(reader.decode(span)[a:b])
    if hi == lo:
        data = b""
    elif info["codec"] == 0:
        if info["digest_block"] is None:
            # No checksum at all: the bytes are used as they are (as a whole load does).
            data = bytes(reader.source.read([(frame.start + lo, frame.start + hi)])[0])
        else:
            data = frame.read(lo, hi)
    else:
        data = _compressed_rows(frame, lo, hi)
    arr = np.frombuffer(data, dtype=dtype).reshape((b - a, *shape[1:]))
    return arr.copy()


def _compressed_rows(frame: _Frame, lo: int, hi: int) -> bytes:
    """Raw bytes lo..hi of a compressed frame: its block table, then only the blocks that hold
    them, decompressed alone."""
    info = frame.info
    head = frame.read(0, min(frame.stored, 1 << 16))
    block, pos = _uvarint(head, 0)
    count, pos = _uvarint(head, pos)
    lengths = []
    for _ in range(count):
        if pos >= len(head) and len(head) < frame.stored:
            head = frame.read(0, min(frame.stored, 2 * len(head)))
        n, pos = _uvarint(head, pos)
        lengths.append(n)
    first, last = lo // block, (hi - 1) // block
    offset = pos + sum(lengths[:first])
    size = sum(lengths[first : last + 1])
    blocks = frame.read(offset, offset + size)
    raw_start = first * block
    raw_len = min(info["raw_length"], (last + 1) * block) - raw_start
    table = bytearray()
    _put_uvarint(table, block)
    _put_uvarint(table, last - first + 1)
    for n in lengths[first : last + 1]:
        _put_uvarint(table, n)
    raw = _freight.decompress_blocks(info["codec"], bytes(table) + blocks, raw_len, info["shuffle"])
    return raw[lo - raw_start : hi - raw_start]
