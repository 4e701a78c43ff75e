"""``LazyValue``: a stored value opened without reading it. Opening reads the header alone (one
ranged read on S3); ``lv[name]`` decodes one entry of a stored dict, list or tuple (a nested
container comes back lazy too, an array as a :class:`LazyArray`), reading and verifying only the
frames that entry uses; ``lv[name][a:b]`` on an array reads only those rows' blocks.

How an entry is decoded: the source gives a buffer where the payload's bytes lie (a local
file's mapping, or for a stored object an anonymous mapping of its length into which the header
and the fetched frames are written: untouched pages cost nothing), and the codec decodes the
entry's node there (``Codec._loads_node``), with the memo slots it shares with other entries
filled first. The header's signature, when there are keys, is checked before anything else is
read, and each frame (or block of one) is checked against its checksum or digests as it is
used, so a lazy read refuses exactly what a whole load refuses, for the parts it reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from freight import _freight
from freight._lazy.source import FIRST_READ
from freight._lazy.span import Span as _Span
from freight.exceptions import DeserializationError, LazyReadError

__all__ = ["LazyValue", "LazyArray"]

_CONTAINERS = ("dict", "list", "tuple")


def _header_length(head: Any, name: str) -> int | None:
    """The header's length from the payload's first bytes; an error names the file or object
    (the native message says what is wrong with the bytes, not where they came from)."""
    try:
        return _freight.header_length(head)
    except DeserializationError as exc:
        raise type(exc)(f"{name}: {exc}") from None


class _Reader:
    """What the values opened from one stored payload share: the source, the header, the codec
    and its options, and the memo slots decoded so far."""

    def __init__(self, source: Any, freight: Any, options: dict[str, Any], run: Callable[..., Any] | None):
        self.source = source
        self.freight = freight
        self.options = options
        self.run = run or (lambda call, *args, **kwargs: call(*args, **kwargs))
        size = source.size
        if size == 0:
            raise DeserializationError(
                f"{source.name} is empty (0 bytes), not a freight payload: too short to hold a header; "
                "check that it was written completely"
            )
        head = source.first(source.probe)
        length = _header_length(head, source.name)
        if length is None and len(head) < size:  # too few bytes to tell: as a store's read
            head = source.first(FIRST_READ)
            length = _header_length(head, source.name)
        if length is None:
            raise DeserializationError(f"{source.name}: {size} bytes is too short to be a freight payload")
        if length > size:
            # Asking a store for bytes past the object's end would fail as if it were replaced.
            raise DeserializationError(
                f"{source.name}: truncated freight payload: its header takes {length} bytes but the object holds {size}"
            )
        if length > len(head):
            head = source.first(length)
        source.used_header(length)
        keys = options.get("key", freight.options.key)
        self.header = _freight.LazyHeader(head, size, keys)
        self.memo: dict[int, Any] = {}
        # Stored tables' Arrow metadata by node offset (decoded once per value: columns.py).
        self.tables: dict[int, tuple[str, bytes, list[Any], list[int]]] = {}
        self.slots: list[tuple[int, int]] | None = None
        self._head_written = False

    def frame_ranges(self, frames: list[int]) -> list[tuple[int, int]]:
        ranges = self.header.frames
        return [ranges[i] for i in frames]

    def buffer(self, frames: list[int]) -> Any:
        """The payload's buffer with the header and these frames in place."""
        buf = self.source.buffer()
        if not self._head_written and hasattr(self.source, "_sparse"):
            head = self.header.head
            buf[: len(head)] = head
        self._head_written = True
        self.source.fill(self.frame_ranges(frames))
        return buf

    def whole(self) -> Any:
        """The whole value, decoded once (for the nodes that cannot be decoded alone)."""
        if not hasattr(self, "_whole"):
            root = _Span(*self.header.span(0, self.header.tree_length, 0))
            self._whole = self.decode(root)
        return self._whole

    def decode_at(self, span: _Span, keys: tuple[Any, ...]) -> Any:
        """The object of the node at ``span``, reached from the root by ``keys``: decoded alone,
        or, when it holds islands of the payload's pickler session (which may refer to what
        earlier islands pickled), picked out of the whole value."""
        if not span.session:
            return self.decode(span)
        obj = self.whole()
        for key in keys:
            obj = obj[key]
        return obj

    def decode(self, span: _Span) -> Any:
        """The object of one node, with the shared memo slots it refers to decoded first."""
        for slot in span.outside:
            self._fill_slot(slot)
        buf = self.buffer(span.frames)
        memo = {s: self.memo[s] for s in span.outside}
        return self.run(self.freight._loads_node, buf, (span.start, span.end, span.memo_base), memo, **self.options)

    def _fill_slot(self, slot: int) -> None:
        if slot in self.memo:
            return
        if self.slots is None or slot >= len(self.slots):
            raise DeserializationError(f"{self.source.name}: memo slot {slot} is not in the payload")
        start, end = self.slots[slot]
        span = _Span(*self.header.span(start, end, slot))
        self.memo[slot] = self.decode(span)

    def target(self, span: _Span) -> _Span:
        """The node a reference entry (``Ref``: an object stored under another entry first, e.g.
        the same array under two names) refers to, so that it reads lazily as that entry does;
        any other span as it is."""
        if span.tag != "Ref" or len(span.outside) != 1 or self.slots is None:
            return span
        slot = span.outside[0]
        if slot >= len(self.slots):
            return span
        start, end = self.slots[slot]
        return _Span(*self.header.span(start, end, slot))

    def container(self, span: _Span) -> tuple[str, list[tuple[_Span | None, _Span]]] | None:
        found = self.header.container(span.at)
        if found is None:
            return None
        tag, entries, slots = found
        self.slots = slots
        return tag, [(_Span(*k) if k is not None else None, _Span(*v)) for k, v in entries]


class LazyValue:
    """A stored dict, list or tuple (or any value), opened without reading it: see
    :func:`freight.lazy` and :meth:`freight.storage.Store.lazy`.

    ``keys()``, ``len()``, ``in`` and iteration read nothing more than the header. ``lv[name]``
    reads one entry: a dict, list or tuple comes back as another ``LazyValue``, a numpy array
    as a :class:`LazyArray` (slice it to read only those rows), anything else decoded.
    ``info(name)`` describes an entry without reading it; ``load()`` reads the whole value.
    ``bytes_read`` is what this value's source has read so far (header included)."""

    def __init__(self, reader: _Reader, span: _Span, path: str, keys: tuple[Any, ...] = ()):
        self._reader = reader
        self._span = span
        self._path = path
        self._keys = keys  # from the root to this value
        self._entries: dict[Any, tuple[_Span | None, _Span]] | None = None
        self._kind: str | None = None

    @classmethod
    def _open(
        cls, source: Any, freight: Any, options: dict[str, Any], run: Callable[..., Any] | None = None
    ) -> LazyValue:
        reader = _Reader(source, freight, options, run)
        span = _Span(*reader.header.span(0, reader.header.tree_length, 0))
        return cls(reader, span, source.name)

    @property
    def bytes_read(self) -> int:
        return int(self._reader.source.bytes_read)

    @property
    def kind(self) -> str:
        """The stored node's kind: ``dict``, ``list``, ``tuple``, ``ndarray``, ``ext`` (a
        registered serializer's value), ``pickle`` (pickled as a whole), or a scalar's kind."""
        return self._span.tag.lower() if self._span.tag != "NdArray" else "ndarray"

    def _table(self) -> dict[Any, tuple[_Span | None, _Span]]:
        if self._entries is not None:
            return self._entries
        found = self._reader.container(self._span)
        if found is None:
            what = self.kind
            hint = (
                "it was pickled as a whole (a type freight has no serializer for): .load() reads it"
                if what == "pickle"
                else ".load() reads it"
            )
            raise LazyReadError(f"{self._path} is a {what}, not a dict, list or tuple, so it has no entries; {hint}")
        tag, entries = found
        self._kind = tag.lower()
        table: dict[Any, tuple[_Span | None, _Span]] = {}
        whole: list[Any] | None = None
        for i, (key, value) in enumerate(entries):
            if key is not None and key.session:  # a key pickled in the session: from the whole value
                if whole is None:
                    whole = list(self._reader.decode_at(self._span, self._keys))
                name = whole[i]
            else:
                name = self._reader.decode(key) if key is not None else i
            table[name] = (key, value)
        self._entries = table
        return table

    def keys(self) -> list[Any]:
        """The names of the entries (a dict's keys; 0..n-1 for a list or tuple)."""
        return list(self._table())

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._table())

    def __contains__(self, name: object) -> bool:
        return name in self._table()

    def _entry(self, name: Any) -> _Span:
        table = self._table()
        if isinstance(name, int) and self._kind != "dict" and name < 0:
            name += len(table)
        try:
            return table[name][1]
        except (KeyError, TypeError):
            shown = list(table)[:10]
            raise LazyReadError(
                f"{self._path} has no entry {name!r}; its entries are {shown}{' ...' if len(table) > 10 else ''}"
            ) from None

    def __getitem__(self, name: Any) -> Any:
        span = self._entry(name)
        path = f"{self._path}[{name!r}]"
        keys = (*self._keys, name)
        target = self._reader.target(span)
        if target.tag == "NdArray" or (target.tag.lower() in _CONTAINERS and target.frames):
            span = target  # a reference to an array or a container of frames: lazy as its first entry
        if span.tag.lower() in _CONTAINERS and span.frames:
            return LazyValue(self._reader, span, path, keys)
        if span.tag == "NdArray":
            return LazyArray(self._reader, span, path, keys)
        return self._reader.decode_at(span, keys)

    def info(self, name: Any) -> dict[str, Any]:
        """What entry ``name`` is, without reading its data: ``kind``, ``stored_bytes`` (its
        frames), ``frames``; for an array also ``dtype``, ``shape``, ``nbytes``; for a dict, list
        or tuple ``length``; for a registered serializer's value its ``tag``, and for a pyarrow or
        polars table its Arrow ``schema`` (the columns ``columns()`` can read)."""
        span = self._reader.target(self._entry(name))
        info: dict[str, Any] = {
            "kind": LazyValue(self._reader, span, "").kind,
            "frames": len(span.frames),
            "stored_bytes": sum(b - a for a, b in self._reader.frame_ranges(span.frames)),
        }
        if span.tag == "NdArray":
            array = LazyArray(self._reader, span, "")
            info.update(dtype=array.dtype, shape=array.shape, nbytes=array.nbytes)
        elif span.tag.lower() in _CONTAINERS:
            info["length"] = len(LazyValue(self._reader, span, "", (*self._keys, name)))
        elif span.tag == "Ext":
            from freight._lazy.columns import TABLE_TAGS, ext_tag, table_schema

            info["tag"] = tag = ext_tag(self._reader, span)[0]
            if tag in TABLE_TAGS:
                info["schema"] = table_schema(self._reader, span, f"{self._path}[{name!r}]")
        return info

    def columns(self, names: Any, entry: Any = None) -> Any:
        """Columns ``names`` of a stored pyarrow Table or RecordBatch or polars DataFrame (this
        value, or its entry ``entry``), reading only those columns' frames: a table of the same
        type holding just them (``lv.columns(["price"], entry="trades")``)."""
        from freight._lazy.columns import read_columns

        span = self._span if entry is None else self._reader.target(self._entry(entry))
        path = self._path if entry is None else f"{self._path}[{entry!r}]"
        if span.tag != "Ext":
            raise LazyReadError(
                f"{path} is a {span.tag.lower()}, not a table; .columns() reads pyarrow and polars tables"
            )
        names = [names] if isinstance(names, str) else list(names)
        return read_columns(self._reader, span, path, names)

    def load(self) -> Any:
        """The whole value (of this entry, for a nested one)."""
        return self._reader.decode_at(self._span, self._keys)

    def __repr__(self) -> str:
        return f"<freight.LazyValue {self._path} ({self.kind}), {self.bytes_read} bytes read>"


class LazyArray:
    """A stored numpy array, not read yet: ``dtype``, ``shape``, ``nbytes`` come from the header;
    ``arr[a:b]`` (rows of a C-ordered array) reads and verifies only the blocks that hold those
    rows; ``arr[...]``, ``load()`` or ``numpy.asarray(arr)`` read it whole."""

    def __init__(self, reader: _Reader, span: _Span, path: str, keys: tuple[Any, ...] = ()):
        self._reader = reader
        self._span = span
        self._path = path
        self._keys = keys
        self._meta: tuple[Any, tuple[int, ...], bool] | None = None

    def _describe(self) -> tuple[Any, tuple[int, ...], bool]:
        if self._meta is None:
            from freight._lazy.arrays import describe

            self._meta = describe(self._reader, self._span)
        return self._meta

    @property
    def dtype(self) -> Any:
        return self._describe()[0]

    @property
    def shape(self) -> tuple[int, ...]:
        return self._describe()[1]

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for d in self.shape:
            n *= d
        return int(n)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def load(self) -> Any:
        return self._reader.decode_at(self._span, self._keys)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        arr = self.load()
        return arr if dtype is None else arr.astype(dtype)

    def __getitem__(self, index: Any) -> Any:
        import numpy as np

        from freight._lazy.arrays import read_rows

        rows = index[0] if isinstance(index, tuple) and index else index
        rest = index[1:] if isinstance(index, tuple) else ()
        if isinstance(rows, np.integer):
            rows = int(rows)
        if not self.shape or self._describe()[2] or isinstance(rows, bool) or not isinstance(rows, (slice, int)):
            return self.load()[index]  # 0-d, Fortran order, a mask or fancy indexing: read it whole
        n = self.shape[0]
        if isinstance(rows, int):
            i = rows + n if rows < 0 else rows
            if not 0 <= i < n:
                raise IndexError(f"index {rows} is out of bounds for axis 0 with size {n}")
            part = read_rows(self._reader, self._span, self.dtype, self.shape, i, i + 1)[0]
            return part[rest] if rest else part
        picked = range(*rows.indices(n))
        lo, hi = (min(picked), max(picked) + 1) if picked else (0, 0)
        part = read_rows(self._reader, self._span, self.dtype, self.shape, lo, hi)
        if picked.step != 1:
            part = part[picked.start - lo :: picked.step] if picked else part
        return part[(slice(None), *rest)] if rest else part

    def __repr__(self) -> str:
        return f"<freight.LazyArray {self._path} {self.dtype} {self.shape}>"
