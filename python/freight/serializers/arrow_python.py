"""pyarrow arrays walked level by level in Python: the form freight wrote before its Rust Arrow
path (``freight.serializers.arrow``), kept to read those payloads, and to carry what that path
refuses (schema or field metadata that is not UTF-8, which arrow-rs cannot hold); its type
helpers also serve pandas' ArrowDtype columns. docs/ARCHITECTURE.md says why each part stays
and which test shows it. Each array is a dict of its type (Arrow IPC schema bytes), length, offset, buffers (as
frames) and children; layouts not rebuilt from buffers (unions, run-end encoded, view types)
travel as an Arrow IPC stream instead (one copy). Loading checks everything pyarrow assumes
before building an array, then validates it.
"""

from __future__ import annotations

import functools
from typing import Any

import pyarrow as pa

from freight._freight import string_array_valid


class _ByIpc(Exception):
    """This array's layout is sent as an IPC stream."""


def type_wire(t: pa.DataType) -> bytes:
    """An Arrow type as bytes (the IPC schema of one field of it), as payloads carry types (this
    form, and pandas' ArrowDtype columns)."""
    if t.num_fields:
        # Not cached: nested types compare equal whatever their fields' metadata.
        return schema_bytes(t)
    return _flat_type_wire(t)


def schema_bytes(t: pa.DataType) -> bytes:
    """``type_wire`` computed afresh (never cached)."""
    return pa.schema([pa.field("", t)]).serialize().to_pybytes()


# Cached: a type repeated in one payload (a chunked array and its chunks, columns of one type)
# is then one bytes object, which freight writes once and refers to after.
_flat_type_wire = functools.lru_cache(maxsize=512)(schema_bytes)


def type_from(wire: bytes) -> pa.DataType:
    """The Arrow type of ``type_wire``'s bytes."""
    # Cached only when small (the cache must not keep payload memory alive) and not an
    # extension type (what it decodes to depends on whether its library registered it yet).
    if len(wire) <= _CACHED_WIRE_MAX and b"ARROW:extension:name" not in wire:
        return _cached_type_from(wire)
    return read_type(wire)


def read_type(wire: bytes) -> pa.DataType:
    """``type_from`` read afresh (never cached)."""
    return pa.ipc.read_schema(pa.py_buffer(wire)).field(0).type


_CACHED_WIRE_MAX = 512
_cached_type_from = functools.lru_cache(maxsize=512)(read_type)


def _children(arr: pa.Array) -> list[pa.Array]:
    t = arr.type
    if pa.types.is_struct(t):
        return [arr.field(i) for i in range(t.num_fields)]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_map(t):
        return [arr.values]
    if t.num_fields:
        raise _ByIpc
    return []


def _is_view(t: pa.DataType) -> bool:
    """Whether values of this type live in a variable number of data buffers (string_view and
    binary_view), which ``num_buffers`` does not count: sent as IPC."""
    return pa.types.is_string_view(t) or pa.types.is_binary_view(t)


def _array_meta(arr: pa.Array, frames: list[Any]) -> dict[str, Any]:
    t = arr.type
    if isinstance(arr, pa.ExtensionArray):
        return {"type": type_wire(t), "storage": _array_meta(arr.storage, frames)}
    if pa.types.is_dictionary(t):
        return {
            "type": type_wire(t),
            "indices": _array_meta(arr.indices, frames),
            "dictionary": _array_meta(arr.dictionary, frames),
        }
    if _is_view(t):
        raise _ByIpc
    if t.num_fields and arr.offset:
        arr = pa.concat_arrays([arr])  # nested children are offset-adjusted: start at 0
    buffers = []
    for buf in arr.buffers()[: t.num_buffers]:
        if buf is None:
            buffers.append(None)
        else:
            frames.append(buf)
            buffers.append(len(frames) - 1)
    return {
        "type": type_wire(t),
        "length": len(arr),
        "null_count": arr.null_count,  # not trusted on load (recounted); earlier readers need it
        "offset": arr.offset,
        "buffers": buffers,
        "children": [_array_meta(child, frames) for child in _children(arr)],
    }


def _encode_array(arr: pa.Array, frames: list[Any]) -> dict[str, Any]:
    mark = len(frames)
    try:
        return _array_meta(arr, frames)
    except (_ByIpc, pa.ArrowNotImplementedError):
        del frames[mark:]
        sink = pa.BufferOutputStream()
        batch = pa.RecordBatch.from_arrays([arr], names=[""])
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        frames.append(sink.getvalue())
        return {"ipc": len(frames) - 1}


def _array_from(meta: dict[str, Any], frames: list[memoryview]) -> pa.Array:
    """An array rebuilt from its description, checked before anything reads it: Arrow builds
    arrays from buffers on trust, and a malformed one crashes the process when used."""
    if "ipc" in meta:
        arr = pa.ipc.open_stream(pa.py_buffer(frames[_frame_index(meta["ipc"], frames)])).read_all().column(0).chunk(0)
        arr.validate(full=True)
        return arr
    t = type_from(meta["type"])
    if "storage" in meta:
        storage = _array_from(meta["storage"], frames)
        if not isinstance(t, pa.BaseExtensionType):
            # The extension type is not registered in this process (its library registers it
            # lazily): the storage array is what its consumer (pandas' __from_arrow__) reads.
            return storage
        return pa.ExtensionArray.from_storage(t, storage)
    if "indices" in meta:
        return pa.DictionaryArray.from_arrays(
            _array_from(meta["indices"], frames), _array_from(meta["dictionary"], frames), ordered=t.ordered
        )
    buffers = [None if i is None else pa.py_buffer(frames[_frame_index(i, frames)]) for i in meta["buffers"]]
    children = _checked_children(t, [_array_from(child, frames) for child in meta["children"]])
    if pa.types.is_union(t) and None in buffers[1:]:
        # Arrow's validation passes a union without its type ids (or, dense, its offsets), and
        # its full validation then reads through the missing buffer (a segfault).
        raise ValueError("an Arrow union array needs its type ids buffer (and, dense, its offsets buffer)")
    length, offset = meta["length"], meta["offset"]
    if not (isinstance(length, int) and isinstance(offset, int) and length >= 0 and offset >= 0):
        raise ValueError(f"an Arrow array needs a length and offset >= 0, not {length!r} and {offset!r}")
    # null_count=-1: Arrow counts the nulls itself instead of believing the payload.
    arr = pa.Array.from_buffers(t, length, buffers, null_count=-1, offset=offset, children=children or None)
    _validate(arr)
    return arr


def _checked_children(t: pa.DataType, children: list[pa.Array]) -> list[pa.Array]:
    """What Arrow's array constructors assume of an array built from buffers, checked before
    ``from_buffers``: they abort the process (ARROW_CHECK, before any validation can run) on a
    dictionary type without its dictionary, a child whose type is not the one the parent type
    declares (list, fixed-size list, run-end encoded), and a map whose entries or keys have
    nulls. freight writes dictionaries and extension arrays in their own forms, never as buffers."""
    if pa.types.is_dictionary(t) or isinstance(t, pa.BaseExtensionType) or _is_view(t):
        raise ValueError(f"an Arrow array of type {t} does not travel as buffers")
    if len(children) != t.num_fields:
        raise ValueError(f"an Arrow array of type {t} has {len(children)} children, not {t.num_fields}")
    for i, child in enumerate(children):
        declared = t.field(i).type
        if not child.type.equals(declared):
            raise ValueError(f"an Arrow array of type {t} has a child of type {child.type}, not {declared}")
    if pa.types.is_map(t):
        entries = children[0]
        keys, items = entries.field(0), entries.field(1)
        if entries.null_count or keys.null_count:
            raise ValueError("an Arrow map array has null entries or null keys")
        # The entries again, over exactly the keys counted above: the map's constructor reads
        # the keys' null count as stored, which must be known (and 0), not left to count.
        children = [pa.StructArray.from_arrays([keys, items], fields=list(entries.type))]
    return children


def _frame_index(i: Any, frames: list[memoryview]) -> int:
    if not isinstance(i, int) or not 0 <= i < len(frames):
        raise ValueError(f"frame index {i!r} is out of range")
    return i


def _validate(arr: pa.Array) -> None:
    """Arrow's full validation (offsets, indices, union type ids, ...), except for flat string
    arrays without nulls, the common large case, which freight's own check covers at three
    times the speed."""
    t = arr.type
    wide = pa.types.is_large_string(t)
    if not (wide or pa.types.is_string(t)) or arr.null_count:
        # Arrow's own check: freight's treats the bytes under null slots as values, which
        # Arrow allows to be anything.
        arr.validate(full=True)
        return
    arr.validate()  # buffer sizes
    _, offsets, data = arr.buffers()
    if len(arr) and not string_array_valid(offsets, data, wide, arr.offset, len(arr)):
        raise ValueError("an Arrow string array has offsets out of order or out of bounds, or invalid UTF-8")


# What the serializers in freight.serializers.arrow write and read in this form.


def encode_chunked(arr: pa.ChunkedArray) -> tuple[dict[str, Any], list[Any]]:
    frames: list[Any] = []
    return {"type": type_wire(arr.type), "chunks": [_encode_array(c, frames) for c in arr.chunks]}, frames


def decode_chunked(meta: dict[str, Any], frames: list[memoryview]) -> pa.ChunkedArray:
    return pa.chunked_array([_array_from(c, frames) for c in meta["chunks"]], type=type_from(meta["type"]))


def encode_batch(batch: pa.RecordBatch) -> tuple[dict[str, Any], list[Any]]:
    frames: list[Any] = []
    columns = [_encode_array(c, frames) for c in batch.columns]
    return {"schema": batch.schema.serialize().to_pybytes(), "columns": columns}, frames


def decode_batch(meta: dict[str, Any], frames: list[memoryview]) -> pa.RecordBatch:
    schema = pa.ipc.read_schema(pa.py_buffer(meta["schema"]))
    return pa.RecordBatch.from_arrays([_array_from(c, frames) for c in meta["columns"]], schema=schema)


def encode_table(table: pa.Table) -> tuple[dict[str, Any], list[Any]]:
    frames: list[Any] = []
    columns = [[_encode_array(c, frames) for c in col.chunks] for col in table.columns]
    return {"schema": table.schema.serialize().to_pybytes(), "columns": columns}, frames


def decode_table(meta: dict[str, Any], frames: list[memoryview]) -> pa.Table:
    schema = pa.ipc.read_schema(pa.py_buffer(meta["schema"]))
    columns = [
        pa.chunked_array([_array_from(c, frames) for c in chunks], type=field.type)
        for chunks, field in zip(meta["columns"], schema)
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def encode_array(arr: pa.Array) -> tuple[dict[str, Any], list[Any]]:
    frames: list[Any] = []
    return _encode_array(arr, frames), frames


def decode_array(meta: dict[str, Any], frames: list[memoryview]) -> pa.Array:
    return _array_from(meta, frames)
