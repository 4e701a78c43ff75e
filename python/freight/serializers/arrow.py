"""pyarrow Array, ChunkedArray, RecordBatch, Table and Schema, through freight's Rust Arrow
path: pyarrow exports its data through the Arrow PyCapsule interface, arrow-rs reads it, the
walker writes the node (``arrow_node``: no Python object is made) and the buffers become frames
(no copy in ``dumps_frames``); on load, arrays are rebuilt over the payload's frames, validated
in full in Rust, and imported back through a capsule (``loads(zero_copy=True)`` keeps them over
the input's memory). The schema (types, names,
metadata, extension types) travels as Arrow IPC schema bytes. Data the Rust path refuses (schema
or field metadata that is not UTF-8), and payloads written before it, use the Python form in
``freight.serializers.arrow_python``.
Imported the first time a pyarrow object is serialized or a ``pyarrow.*`` payload is loaded
(``freight.registry`` registers its ``SERIALIZERS``).

Extension types written in Python (``pa.ExtensionType`` subclasses) come back from the schema
bytes only when ``pa.register_extension_type`` registered them; otherwise pyarrow reads their
storage type, and the values would come back as their storage array. Objects holding such a
type anywhere (a column, a struct field, a list's items) are pickled in place, which carries the
class by reference, as pickle does. Extension types of Arrow C++ (uuid, json, bool8, tensors)
and registered Python ones keep the Rust path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from freight._freight import ArrowMeta, arrow_dumps, arrow_loads
from freight.exceptions import SerializationError
from freight.serializers import LibrarySerializer, Pickled
from freight.serializers import arrow_python as python_form

# The field metadata key that marks an extension type in Arrow IPC schema bytes.
_EXTENSION_KEY = b"ARROW:extension:name"

# Type classes with no child types and nothing of Python in them: most columns stop here, at
# one set lookup (a DataType of int64, a TimestampType, ...).
_FLAT_TYPES = frozenset(
    type(t)
    for t in (
        pa.int64(), pa.timestamp("s"), pa.time32("s"), pa.time64("us"), pa.duration("s"),
        pa.decimal128(5), pa.decimal256(5), pa.binary(3),
        *(getattr(pa, name)(5) for name in ("decimal32", "decimal64") if hasattr(pa, name)),
    )
)  # fmt: skip


def _python_extension(t: pa.DataType) -> bool:
    """Whether ``t`` holds, at any depth, an extension type written in Python that pyarrow
    would not rebuild from the schema bytes (not registered, or registered under its name for
    another class)."""
    if type(t) in _FLAT_TYPES:
        return False
    if isinstance(t, pa.ExtensionType):
        if not _comes_back(t):
            return True
        return _python_extension(t.storage_type)
    if isinstance(t, pa.BaseExtensionType):
        return _python_extension(t.storage_type)
    if isinstance(t, pa.DictionaryType):
        return _python_extension(t.value_type)
    return any(_python_extension(t.field(i).type) for i in range(t.num_fields))


def _comes_back(t: pa.ExtensionType) -> bool:
    """Whether pyarrow reads ``t`` back from its schema bytes as itself (same class, equal).
    Asked every time (a schema round trip, for Python extension types only): registrations change."""
    try:
        back = python_form.read_type(python_form.schema_bytes(t))
    except pa.ArrowException:
        return False
    return type(back) is type(t) and back == t


def _schema_has_python_extension(schema: pa.Schema) -> bool:
    return any(_python_extension(t) for t in schema.types)


def _has_python_extension(obj: Any) -> bool:
    if isinstance(obj, (pa.Array, pa.ChunkedArray)):
        return _python_extension(obj.type)
    return _schema_has_python_extension(obj.schema)


class _ArrowSerializer(LibrarySerializer):
    """New payloads hold a tuple ``(schema, batches)`` (see ``_freight.arrow_dumps``); payloads
    of the Python form hold a dict.

    ``arrow_node``: the walker writes that tuple itself, straight from what the object exports.
    ``serialize`` runs only for what it leaves here: data arrow-rs does not export, and schemas
    with an extension type (which may be a Python one that must be pickled), and when called
    directly; it gives the same metadata."""

    arrow_node = True
    #: the decoder hands Rust-form metadata over as one ArrowMeta, read straight from the payload
    arrow_meta = True
    subclasses = True  # the concrete array classes (Int64Array, ...) are pyarrow's own
    errors = (pa.ArrowException, KeyError, TypeError, ValueError, IndexError, OverflowError)
    form = "stream"
    in_python: tuple[Callable[[Any], tuple[Any, list[Any]]], Callable[[Any, list[memoryview]], Any]]

    def serialize(self, obj: Any) -> tuple[Any, list[Any]]:
        try:
            meta, frames = arrow_dumps(obj)
        except (SerializationError, pa.ArrowException) as exc:  # arrow-rs refuses it (metadata not UTF-8)
            # A dictionary of dictionary-encoded values (crates/freight-py/src/arrow/refused.rs
            # words the refusal): neither arrow-rs nor the Python form rebuilds it, pickle does.
            if _has_python_extension(obj) or "dictionary-encoded again" in str(exc):
                return Pickled(obj), []
            return self.in_python[0](obj)
        # Extension types are field metadata in the schema bytes: only when that key is there
        # are the types walked (walking them every time was a visible share of a small table's dumps).
        if _EXTENSION_KEY in meta[0] and _has_python_extension(obj):
            return Pickled(obj), []
        return meta, frames

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        if isinstance(meta, ArrowMeta):
            key = (meta.schema, self.tag)
            known = _IMPORTED_SCHEMAS.get(key)
            if known is not None:
                arrays = arrow_loads(meta, frames, "arrays")  # owns the C arrays while pyarrow imports them
                return self._from_c(arrays.addresses(), known)
            obj = self._import(arrow_loads(meta, frames, self.form))
            if _EXTENSION_KEY not in key[0]:  # extension types are looked up each time: registrations change
                _remember(key, self._schema_of(obj))
            return obj
        if isinstance(meta, tuple):
            return self._import(arrow_loads(meta, frames, self.form))
        if isinstance(meta, dict):
            return self.in_python[1](meta, frames)
        if isinstance(meta, Pickled):
            return _pickled(meta, self.types)
        raise ValueError(f"an Arrow payload's metadata is a tuple or a dict, not {type(meta).__name__}")

    def _import(self, capsule: Any) -> Any:
        raise NotImplementedError

    def _schema_of(self, obj: Any) -> Any:
        """What pyarrow made of the payload's schema in ``obj`` (a Schema, or an array's type)."""
        return obj.schema

    def _from_c(self, addresses: list[int], schema: Any) -> Any:
        """The object rebuilt from C arrays (``_freight.CArrays``) and the schema ``_schema_of`` gave."""
        raise NotImplementedError


# What pyarrow made of each schema met, keyed by (IPC schema bytes, tag): importing a schema
# through the C interface is most of a small table's load (a 3-column table of 100 rows: ~19k
# of ~86k instructions), and a process loads many values of one schema. Bounded: cleared when full.
_IMPORTED_SCHEMAS: dict[tuple[bytes, str], Any] = {}
_IMPORTED_SCHEMAS_MAX = 256


def _remember(key: tuple[bytes, str], schema: Any) -> None:
    if len(_IMPORTED_SCHEMAS) >= _IMPORTED_SCHEMAS_MAX:
        _IMPORTED_SCHEMAS.clear()
    _IMPORTED_SCHEMAS[key] = schema


def _one(addresses: list[int]) -> int:
    if len(addresses) != 1:
        raise ValueError(f"an Arrow array payload holds {len(addresses)} arrays, not 1")
    return addresses[0]


class ArraySerializer(_ArrowSerializer):
    tag = "pyarrow.Array"
    types = (pa.Array,)
    form = "array"
    in_python = (python_form.encode_array, python_form.decode_array)

    def _import(self, capsules: Any) -> pa.Array:
        return pa.Array._import_from_c_capsule(*capsules)

    def _schema_of(self, obj: pa.Array) -> pa.DataType:
        return obj.type

    def _from_c(self, addresses: list[int], schema: pa.DataType) -> pa.Array:
        return pa.Array._import_from_c(_one(addresses), schema)


class ChunkedArraySerializer(_ArrowSerializer):
    tag = "pyarrow.ChunkedArray"
    types = (pa.ChunkedArray,)
    in_python = (python_form.encode_chunked, python_form.decode_chunked)

    def _import(self, capsule: Any) -> pa.ChunkedArray:
        return pa.ChunkedArray._import_from_c_capsule(capsule)

    def _schema_of(self, obj: pa.ChunkedArray) -> pa.DataType:
        return obj.type

    def _from_c(self, addresses: list[int], schema: pa.DataType) -> pa.ChunkedArray:
        return pa.chunked_array([pa.Array._import_from_c(a, schema) for a in addresses], schema)


class RecordBatchSerializer(_ArrowSerializer):
    tag = "pyarrow.RecordBatch"
    types = (pa.RecordBatch,)
    form = "array"
    in_python = (python_form.encode_batch, python_form.decode_batch)

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        empty = meta.batch_count == 0 if isinstance(meta, ArrowMeta) else None
        if empty is None and isinstance(meta, tuple) and len(meta) == 2 and isinstance(meta[1], list):
            empty = not meta[1]
        if empty:
            # A batch of no rows: pyarrow's stream of it (what arrow_dumps reads) holds no
            # array at all, so the "array" form has none to import. Read as a stream (the
            # schema, metadata included), then made a batch of no rows of that schema.
            schema = pa.RecordBatchReader._import_from_c_capsule(arrow_loads(meta, frames, "stream")).schema
            return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
        return super()._rebuild(meta, frames)

    def _import(self, capsules: Any) -> pa.RecordBatch:
        return pa.RecordBatch._import_from_c_capsule(*capsules)

    def _from_c(self, addresses: list[int], schema: pa.Schema) -> pa.RecordBatch:
        return pa.RecordBatch._import_from_c(_one(addresses), schema)


class TableSerializer(_ArrowSerializer):
    tag = "pyarrow.Table"
    types = (pa.Table,)
    in_python = (python_form.encode_table, python_form.decode_table)

    def _import(self, capsule: Any) -> pa.Table:
        return pa.RecordBatchReader._import_from_c_capsule(capsule).read_all()

    def _from_c(self, addresses: list[int], schema: pa.Schema) -> pa.Table:
        return pa.Table.from_batches([pa.RecordBatch._import_from_c(a, schema) for a in addresses], schema)


class SchemaSerializer(LibrarySerializer):
    tag = "pyarrow.Schema"
    types = (pa.Schema,)
    errors = _ArrowSerializer.errors

    def serialize(self, schema: pa.Schema) -> tuple[Any, list[Any]]:
        wire = schema.serialize().to_pybytes()
        if _EXTENSION_KEY in wire and _schema_has_python_extension(schema):
            return Pickled(schema), []
        return wire, []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        if isinstance(meta, Pickled):
            return _pickled(meta, self.types)
        return pa.ipc.read_schema(pa.py_buffer(meta))


def _pickled(meta: Pickled, types: tuple[type, ...]) -> Any:
    """An object pickled in place (see the module's docstring), checked to be what the tag says."""
    if not isinstance(meta.value, types):
        raise ValueError(f"the payload holds a {type(meta.value).__name__} where a {types[0].__name__} belongs")
    return meta.value


# What freight.registry registers into its BUILTINS layer when it loads this module.
SERIALIZERS = (
    ArraySerializer(),
    ChunkedArraySerializer(),
    RecordBatchSerializer(),
    TableSerializer(),
    SchemaSerializer(),
)
