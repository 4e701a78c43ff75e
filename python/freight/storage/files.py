"""Payloads in files: the I/O behind :meth:`freight.Freight.dump` and :meth:`freight.Freight.load`.

Encoding and decoding stay with the codec; this module only moves finished payloads between
memory and a path or a binary file object.
"""

from __future__ import annotations

import mmap
import os
from typing import IO, Any

from freight.exceptions import DeserializationError

__all__ = ["write_payload", "read_payload", "MMAP_MIN"]

# Paths at least this large are memory-mapped by read_payload rather than read.
MMAP_MIN = 1 << 20


def write_payload(data: Any, file: str | os.PathLike[str] | IO[bytes]) -> None:
    """Writes ``data`` (a payload from ``dumps``) to a path, atomically (a temporary file in the
    same folder, then a rename), or to a binary file object."""
    if isinstance(file, (str, os.PathLike)):
        path = os.fspath(file)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    else:
        file.write(data)


def read_payload(file: str | os.PathLike[str] | IO[bytes]) -> Any:
    """The payload in a path or a binary file object, as a buffer for ``loads``.

    A path of :data:`MMAP_MIN` bytes or more is memory-mapped rather than read: arrays decoded
    as views then view the mapped file, which stays mapped as long as they do.

    Raises:
        DeserializationError: ``file`` is a file object opened in text mode.
    """
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size >= MMAP_MIN:
                # The map outlives the file object; views into it keep it alive.
                return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            return fh.read()
    data = file.read()
    if not isinstance(data, (bytes, bytearray)):
        raise DeserializationError(
            f"file {file!r} is not opened in binary mode (read() gave {type(data).__name__}); open it with mode 'rb'"
        )
    return data
