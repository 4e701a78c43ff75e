"""Values read in part: :func:`lazy` opens a payload in a local file, ``Store.lazy`` one in any
store (local, memory, S3), reading the header alone; entries, arrays' rows and whole values are
then read as asked (see :mod:`freight._lazy.value`)."""

from __future__ import annotations

import os
from typing import Any

from freight import _api
from freight._lazy.source import FileSource, StoreSource
from freight._lazy.value import LazyArray, LazyValue

__all__ = ["lazy", "open_stored", "LazyValue", "LazyArray"]

# What a lazy read passes on to the decoder (the options of ``loads`` that apply to a part).
OPTIONS = ("allow_pickle", "zero_copy", "verify", "key", "max_size", "allowed_tags", "strict_versions")


def _check(options: dict[str, Any], where: str) -> dict[str, Any]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        from freight.exceptions import OptionError

        raise OptionError(f"{where} got unknown option(s) {', '.join(unknown)}; it takes {', '.join(OPTIONS)}")
    return options


def lazy(path: str | os.PathLike[str], /, *, freight: _api.Freight | None = None, **options: Any) -> LazyValue:
    """Opens the payload in the file at ``path`` without reading it (the header alone; the file
    is mapped, so what is read later touches only its own pages).

    Args:
        freight: the codec whose registry and options decode it (default: freight's default).
        **options: for :meth:`freight.Freight.loads`, applied to every part read
            (``allow_pickle``, ``verify``, ``key``, ``allowed_tags``, ``max_size``, ...). With
            keys, the header's signature is checked before anything else is read, and every frame
            or block read is authenticated.

    Raises:
        PathNotFoundError, PathError: the file cannot be read.
        DeserializationError: it is not a payload (or a subclass: ``IntegrityError`` for a bad
            signature or checksum).
    """
    codec = freight if freight is not None else _api.DEFAULT
    return LazyValue._open(FileSource(path), codec, _check(options, "freight.lazy"))


def open_stored(native: Any, key: str, freight: Any, options: dict[str, Any], run: Any = None) -> LazyValue:
    """``Store.lazy``'s work: the value under ``key`` of a native store, opened lazily (a local
    folder store's file is mapped, as ``freight.lazy`` maps a path: the mapping keeps the version
    it opened, whatever replaces the file later)."""
    options = _check(options, "Store.lazy")
    source: Any
    if native.backend == "file":
        source = FileSource.of_store(native, key)
    else:
        source = StoreSource(native, key)
    return LazyValue._open(source, freight, options, run)
