"""Surgery on the Rust Arrow form (``_freight.arrow_dumps``: an IPC schema, one node tree per
batch, the buffers as frames), for the tests that forge what ``_freight.arrow_loads`` must refuse
or load safely (tests/serializers/test_arrow_rust.py, tests/security/test_hostile_arrow_rust.py)
and for their child interpreters, which import it too.

A node is ``(length, offset, validity, buffers, children)``: :func:`dump` gives them as lists to
edit, :func:`payload` freezes them back and writes the payload under a tag.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa

from freight._freight import arrow_dumps
from support.forging import forge


def editable(node: Any) -> list:
    length, offset, validity, buffers, children = node
    return [length, offset, validity, list(buffers), [editable(c) for c in children]]


def frozen(node: Any) -> tuple:
    length, offset, validity, buffers, children = node
    return (length, offset, validity, tuple(buffers), tuple(frozen(c) for c in children))


def dump(obj: Any) -> tuple[bytes, list, list[bytes]]:
    """(schema, editable batch nodes, frames as bytes) of what freight writes for ``obj``."""
    (schema, batches), frames = arrow_dumps(obj)
    return schema, [editable(b) for b in batches], [bytes(f) for f in frames]


def payload(tag: str, schema: bytes, nodes: list, frames: list) -> bytes:
    return forge(tag, (schema, [frozen(n) for n in nodes]), frames)


def long_view(length: int, prefix: bytes = b"AAAA", buffer: int = 0, offset: int = 0) -> bytes:
    """A 16-byte string view of a value longer than 12 bytes: length, prefix, buffer, offset."""
    return struct.pack("<i", length) + prefix + struct.pack("<ii", buffer, offset)


def set_view(frames: list, index: int, slot: int, view: bytes) -> None:
    raw = bytearray(frames[index])
    raw[16 * slot : 16 * slot + 16] = view
    frames[index] = bytes(raw)


def schema_of(t: pa.DataType, metadata: dict | None = None) -> bytes:
    """The IPC schema of one unnamed field of type ``t``."""
    return pa.schema([pa.field("", t, metadata=metadata)]).serialize().to_pybytes()


# What a child program starts with after support.forging.CHILD_PRELUDE.
CHILD_PRELUDE = """\
import struct
import pyarrow as pa, pyarrow.compute as pc
from support.arrow_forging import dump, long_view, payload, schema_of, set_view
"""
