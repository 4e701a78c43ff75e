"""Pieces of the wire format (docs/FORMAT.md) that tests use to build payloads by hand."""

from __future__ import annotations


def uvarint(value: int) -> bytes:
    """An unsigned LEB128 varint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
