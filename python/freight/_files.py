"""Payloads in files: the I/O behind ``freight.dump``/``freight.load`` (:meth:`freight.Freight.dump`
and :meth:`freight.Freight.load`), and the mmap warning that ``freight.storage`` shares.

Encoding and decoding stay with the codec; this module only moves finished payloads between
memory and a path or a binary file object. It sits below ``freight._api`` and imports nothing of
freight but its exceptions and the extension (``compressed_frames``: the header is read by
freight-core, never by hand here), so ``import freight`` does not run the storage package. Failures of
the file system are raised as :class:`freight.PathError` (:class:`freight.PathNotFoundError` for
a missing file), which are also the ``OSError`` they stand for.
"""

from __future__ import annotations

import errno
import mmap as _mmap
import os
from typing import IO, Any
from urllib.parse import unquote

from freight._freight import compressed_frames
from freight.exceptions import DeserializationError, FreightWarning, PathError, PathNotFoundError, StorageError

__all__ = ["write_payload", "read_payload", "compressed_frames", "mapped_compressed_warning", "MMAP_MIN"]

# Paths at least this large are memory-mapped by read_payload rather than read.
MMAP_MIN = 1 << 20


def write_payload(data: Any, file: str | os.PathLike[str] | IO[bytes]) -> None:
    """Writes ``data`` (a payload from ``dumps``) to a path, atomically (a temporary file in the
    same folder, then a rename), or to a binary file object."""
    if isinstance(file, (str, os.PathLike)):
        path = os.fspath(file)
        # A name of this write alone: two threads (or processes) writing one path at once each
        # rename their own complete file; the last rename wins.
        tmp = f"{path}.{os.getpid()}-{os.urandom(6).hex()}.tmp"
        try:
            with open(tmp, "xb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise _path_error(exc, path, "write") from exc
    else:
        file.write(data)


def read_payload(file: str | os.PathLike[str] | IO[bytes], *, mmap: bool = False) -> Any:
    """The payload in a path or a binary file object, as a buffer for ``loads``.

    A path of :data:`MMAP_MIN` bytes or more (any non-empty file with ``mmap=True``) is
    memory-mapped rather than read: arrays decoded as views then view the mapped file, which
    stays mapped as long as they do.

    Raises:
        PathNotFoundError: there is no file at the path (also a ``FileNotFoundError``).
        PathError: it cannot be read (permissions, a folder; also an ``OSError``).
        StorageError: ``mmap=True`` with a file object that has no file descriptor.
        DeserializationError: ``file`` is a file object opened in text mode.
    """
    if isinstance(file, (str, os.PathLike)):
        path = os.fspath(file)
        try:
            with open(path, "rb") as fh:
                return _read_open_file(fh, mmap)
        except OSError as exc:
            raise _path_error(exc, path, "read") from exc
    if mmap:
        try:
            file.fileno()
        except (OSError, AttributeError, ValueError) as exc:
            raise StorageError(
                f"mmap=True maps a file, and {file!r} has no file descriptor; pass a path or a file "
                "opened with open(path, 'rb'), or load its bytes with zero_copy=True"
            ) from exc
        return _read_open_file(file, True)
    data = file.read()
    if not isinstance(data, (bytes, bytearray)):
        raise DeserializationError(
            f"file {file!r} is not opened in binary mode (read() gave {type(data).__name__}); open it with mode 'rb'"
        )
    return data


def _read_open_file(fh: Any, mmap: bool) -> Any:
    size = os.fstat(fh.fileno()).st_size
    if size > 0 and (mmap or size >= MMAP_MIN):
        # The map outlives the file object; views into it keep it alive.
        return _mmap.mmap(fh.fileno(), 0, access=_mmap.ACCESS_READ)
    data = fh.read()
    if not isinstance(data, (bytes, bytearray)):
        raise DeserializationError(
            f"file {fh!r} is not opened in binary mode (read() gave {type(data).__name__}); open it with mode 'rb'"
        )
    return data


def _path_error(exc: OSError, path: str, what: str) -> PathError:
    """The freight error for a failed read or write of ``path``, saying what to check."""
    code = exc.errno if exc.errno is not None else errno.EIO
    if isinstance(exc, FileNotFoundError):
        if what == "write":
            folder = os.path.dirname(os.path.abspath(path))
            return PathNotFoundError(
                code, f"cannot write it: the folder {folder} does not exist; create it first", path
            )
        return PathNotFoundError(code, "no such file" + (_stored_name_hint(path) or "; check the path"), path)
    if isinstance(exc, IsADirectoryError):
        return PathError(
            code,
            f"is a folder, not a payload file (to {what} the values of a store kept in a folder, use "
            f"freight.storage.open({path!r}))",
            path,
        )
    reason = exc.strerror or str(exc)
    return PathError(code, f"cannot {what} it: {reason}; check the path and its permissions", path)


def _stored_name_hint(path: str) -> str:
    """When ``path`` names a value of a local store by its key, where the store keeps it: a
    store percent-encodes the characters of its keys that are unsafe in file and object names
    (``<``, ``>``, ``#``, ``%``, a ``..`` segment, non-ASCII, ...), so the key
    ``run-3/_t.<locals>.s_0`` is the file ``run-3/_t.%3Clocals%3E.s_0``."""
    wanted = os.path.abspath(path)
    parts = wanted.split(os.sep)
    i = len(parts) - 1  # parts[:i] is the deepest folder that exists
    while i > 1 and not os.path.isdir(os.sep.join(parts[:i])):
        i -= 1
    found = os.sep.join(parts[:i]) or os.sep
    for segment in parts[i:]:  # each missing part, matched by its decoded name
        try:
            names = os.listdir(found)
        except OSError:
            return ""
        match = segment if segment in names else next((n for n in names if unquote(n) == segment), None)
        if match is None:
            return ""
        found = os.path.join(found, match)
    if found == wanted or not os.path.isfile(found):
        return ""
    return (
        f"; a store keeps this value in the file {found} (it percent-encodes <, >, #, %, '..' and "
        "other characters of its keys in file names): pass that path, or load it through its store "
        "with freight.storage.open(FOLDER).load(KEY)"
    )


def mapped_compressed_warning(what: str, compressed: int, fix: str) -> FreightWarning:
    """The warning of a ``mmap=True`` load whose payload has ``compressed`` compressed frames."""
    frames = "1 of its frames is" if compressed == 1 else f"{compressed} of its frames are"
    return FreightWarning(
        f"{what}: {frames} compressed, and mmap=True cannot view compressed data: it was decompressed "
        f"into new memory (a writable copy, not a view of the file); {fix} to load it mapped"
    )
