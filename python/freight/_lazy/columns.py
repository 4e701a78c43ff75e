"""Some columns of a stored table, read alone: a pyarrow Table or RecordBatch, or a polars
DataFrame, is stored as Arrow arrays (docs/FORMAT.md, "Arrow Ext metadata": the IPC schema of
one struct field whose children are the columns, and per batch a node tree whose ints index the
value's frames). The metadata is decoded from the header alone; it is cut down to the asked-for
columns (schema and batch nodes, frame indices renumbered), only those columns' frames are read
and checked, and the table's own serializer rebuilds it from them, with every check a whole
load makes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from freight import _freight
from freight._lazy.span import Span
from freight.exceptions import LazyReadError

# The serializer tags whose stored form is a struct of columns.
TABLE_TAGS = ("pyarrow.Table", "pyarrow.RecordBatch", "polars.DataFrame")


def _renumber(node: Any, mapping: dict[int, int]) -> Any:
    """A batch node with its frame indices (validity, buffers) renumbered, children too."""
    length, offset, validity, buffers, children = node

    def new(i: int) -> int:
        return mapping.setdefault(i, len(mapping))

    return (
        length,
        offset,
        None if validity is None else new(validity),
        tuple(new(b) for b in buffers),
        tuple(_renumber(c, mapping) for c in children),
    )


def ext_tag(reader: Any, span: Span) -> tuple[str, Span, list[int]]:
    """(serializer tag, meta node span, frames) of the Ext node at ``span``."""
    base = span.memo_base + (1 if span.at > span.start else 0)
    tag, meta_span, frames = reader.header.ext(span.at, base)
    return tag, Span(*meta_span), frames


def _arrow_meta(reader: Any, span: Span, path: str) -> tuple[str, bytes, list[Any], list[int]]:
    """(tag, IPC schema bytes, batch nodes, frames) of the stored table at ``span``, from the
    header."""
    cached = reader.tables.get(span.at)
    if cached is not None:  # a second read of the same table: its metadata decoded once
        return cached
    tag, meta_span, frames = ext_tag(reader, span)
    allowed = reader.options.get("allowed_tags", reader.freight.options.allowed_tags)
    if allowed is not None and tag not in allowed:
        from freight.exceptions import UnsafePayloadError

        raise UnsafePayloadError(
            f"{path}: tag {tag!r} is not in allowed_tags {sorted(allowed)}; add it to read this table"
        )
    if tag not in TABLE_TAGS:
        tables = ", ".join(TABLE_TAGS)
        raise LazyReadError(f"{path} is a {tag or span.tag} value, not a table; .columns() reads columns of {tables}")
    meta = reader.decode(meta_span)
    if not (isinstance(meta, tuple) and len(meta) == 2 and isinstance(meta[0], bytes)):
        raise LazyReadError(f"{path} was stored in an older form, or in polars' own IPC; .load() reads it whole")
    schema_bytes, batches = meta
    reader.tables[span.at] = found = (tag, schema_bytes, batches, frames)
    return found


def table_schema(reader: Any, span: Span, path: str) -> Any:
    """The Arrow schema of the stored table at ``span`` (its columns), from the header alone."""
    import pyarrow as pa

    _, schema_bytes, _, _ = _arrow_meta(reader, span, path)
    schema = pa.ipc.read_schema(pa.py_buffer(schema_bytes))
    struct = schema.field(0).type
    return pa.schema([struct.field(i) for i in range(struct.num_fields)], metadata=schema.metadata)


def read_columns(reader: Any, span: Span, path: str, names: Sequence[str]) -> Any:
    """Columns ``names`` of the table at ``span``, reading only their frames."""
    tag, schema_bytes, batches, frames = _arrow_meta(reader, span, path)
    # The schema cut down in Rust (pyarrow's parse, rebuild and serialize cost more than the
    # rest of a small read).
    strings = [n for n in names if isinstance(n, str)]
    have, new_schema = _freight.arrow_project(schema_bytes, strings if len(strings) == len(names) else [])
    if len(strings) != len(names):
        new_schema = None
    if new_schema is None:
        missing = [n for n in names if n not in have]
        raise LazyReadError(f"{path} has no column(s) {missing}; its columns are {have}")
    picked = [have.index(n) for n in names]
    mapping: dict[int, int] = {}
    new_batches = []
    for length, offset, validity, buffers, children in batches:
        cut = (length, offset, validity, buffers, tuple(children[i] for i in picked))
        new_batches.append(_renumber(cut, mapping))
    order = sorted(mapping, key=mapping.__getitem__)
    wanted = [frames[i] for i in order]
    buf = reader.buffer(wanted)
    keys = reader.options.get("key", reader.freight.options.key)
    verify = reader.options.get("verify", True)
    raws = [memoryview(raw) for raw in _freight.frames_raw(buf, wanted, keys, verify is not False)]
    new_meta = (new_schema, new_batches)
    return reader.freight.registry.by_tag(tag).decode(new_meta, raws)
