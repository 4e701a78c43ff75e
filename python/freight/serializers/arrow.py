"""pyarrow Array, ChunkedArray, RecordBatch, Table and Schema, through freight's Rust Arrow
path: pyarrow exports its data through the Arrow PyCapsule interface, arrow-rs reads it and its
buffers become frames (no copy in ``dumps_frames``); on load, arrays are rebuilt over the
payload's frames, validated in full in Rust, and imported back through a capsule
(``loads(zero_copy=True)`` keeps them over the input's memory). The schema (types, names,
metadata, extension types) travels as Arrow IPC schema bytes. Data the Rust path refuses, and
payloads written before it, use the Python form in ``freight.serializers.arrow_python``.
Imported the first time a pyarrow object is serialized or a ``pyarrow.*`` payload is loaded;
registers into ``freight.registry.BUILTINS``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from freight._freight import arrow_dumps, arrow_loads
from freight.registry import BUILTINS
from freight.serializers import LibrarySerializer
from freight.serializers import arrow_python as python_form
from freight.serializers.arrow_python import _type_from, _type_wire  # noqa: F401 - used by pandas


class _ArrowSerializer(LibrarySerializer):
    """New payloads hold a tuple ``(schema, batches)`` (see ``_freight.arrow_dumps``); payloads
    of the Python form hold a dict."""

    subclasses = True  # the concrete array classes (Int64Array, ...) are pyarrow's own
    errors = (pa.ArrowException, KeyError, TypeError, ValueError, IndexError, OverflowError)
    form = "stream"
    in_python: tuple[Callable[[Any], tuple[Any, list[Any]]], Callable[[Any, list[memoryview]], Any]]

    def serialize(self, obj: Any) -> tuple[Any, list[Any]]:
        try:
            return arrow_dumps(obj)
        except (ValueError, pa.ArrowException):  # a layout arrow-rs does not carry
            return self.in_python[0](obj)

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        if isinstance(meta, tuple):
            return self._import(arrow_loads(meta, frames, self.form))
        if isinstance(meta, dict):
            return self.in_python[1](meta, frames)
        raise ValueError(f"an Arrow payload's metadata is a tuple or a dict, not {type(meta).__name__}")

    def _import(self, capsule: Any) -> Any:
        raise NotImplementedError


class ArraySerializer(_ArrowSerializer):
    tag = "pyarrow.Array"
    types = (pa.Array,)
    form = "array"
    in_python = (python_form.encode_array, python_form.decode_array)

    def _import(self, capsules: Any) -> pa.Array:
        return pa.Array._import_from_c_capsule(*capsules)


class ChunkedArraySerializer(_ArrowSerializer):
    tag = "pyarrow.ChunkedArray"
    types = (pa.ChunkedArray,)
    in_python = (python_form.encode_chunked, python_form.decode_chunked)

    def _import(self, capsule: Any) -> pa.ChunkedArray:
        return pa.ChunkedArray._import_from_c_capsule(capsule)


class RecordBatchSerializer(_ArrowSerializer):
    tag = "pyarrow.RecordBatch"
    types = (pa.RecordBatch,)
    form = "array"
    in_python = (python_form.encode_batch, python_form.decode_batch)

    def _import(self, capsules: Any) -> pa.RecordBatch:
        return pa.RecordBatch._import_from_c_capsule(*capsules)


class TableSerializer(_ArrowSerializer):
    tag = "pyarrow.Table"
    types = (pa.Table,)
    in_python = (python_form.encode_table, python_form.decode_table)

    def _import(self, capsule: Any) -> pa.Table:
        return pa.RecordBatchReader._import_from_c_capsule(capsule).read_all()


class SchemaSerializer(LibrarySerializer):
    tag = "pyarrow.Schema"
    types = (pa.Schema,)
    errors = _ArrowSerializer.errors

    def serialize(self, schema: pa.Schema) -> tuple[Any, list[Any]]:
        return schema.serialize().to_pybytes(), []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        return pa.ipc.read_schema(pa.py_buffer(meta))


for _serializer in (
    ArraySerializer(),
    ChunkedArraySerializer(),
    RecordBatchSerializer(),
    TableSerializer(),
    SchemaSerializer(),
):
    BUILTINS.register(_serializer)
