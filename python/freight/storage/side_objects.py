"""Side objects: what a persistent serializer (:mod:`freight.storage.persistent`) keeps beside a
stored value, in its own format (zarr chunks, a parquet file, an HDF5 file), under the value's
key::

    <key>.freight-side/<save id>/<serializer name>-<n>/...     the objects of one persistent value
    <key>.freight-side/<save id>/<serializer name>-<n>.ref     its reference (what load() gets)

A :class:`SideArea` is one such folder: keys under one prefix of the store, written and read
through the store (every backend), and also a folder of files (``open``/``remove``: real files
in a local folder store, values of the store elsewhere) for libraries that write files.
"""

from __future__ import annotations

import io
import os
from typing import IO, Any

from freight.exceptions import KeyNotFoundError, StorageError

__all__ = ["SIDE", "SideArea", "is_side_key", "owners_reached", "side_owner", "side_save_id"]

SIDE = ".freight-side/"


def is_side_key(key: str) -> bool:
    """Whether ``key`` names a side object (rather than a value)."""
    return SIDE in key


def side_owner(key: str) -> str:
    """The key of the value a side object belongs to."""
    return key[: key.index(SIDE)]


def owners_reached(prefix: str) -> list[str]:
    """The keys of the values whose side objects start with ``prefix`` while the values' own
    keys do not (``"v."``, ``"v.freight-side/"`` and ``"v.freight-side/<id>/x.ref"`` reach the
    side objects of ``"v"``, not ``"v"`` itself)."""
    owners = []
    for i in range(1, len(prefix)):
        rest = prefix[i:]
        if SIDE.startswith(rest) or rest.startswith(SIDE):
            owners.append(prefix[:i])
    return owners


def side_save_id(key: str) -> str:
    """The save that wrote a side object (``KEY.freight-side/<save id>/...``)."""
    return key[key.index(SIDE) + len(SIDE) :].split("/", 1)[0]


class SideArea:
    """The side objects of one persistent value: keys under ``prefix`` (ending in ``/``) of a
    store's native side (``freight._freight.NativeStore``)."""

    def __init__(self, native: Any, prefix: str):
        self.native = native
        self.prefix = prefix if prefix.endswith("/") else prefix + "/"

    # -- objects -------------------------------------------------------------------------------

    def put(self, name: str, data: Any) -> None:
        self.native.put_bytes(self.prefix + name, [data])

    def get(self, name: str) -> memoryview:
        try:
            return memoryview(self.native.get(self.prefix + name))
        except KeyNotFoundError as exc:
            raise self.missing(name) from exc

    def missing(self, name: str = "") -> StorageError:
        return StorageError(
            f"{self.native.url}: the side object {self.prefix + name!r} of a stored value is missing "
            "(deleted or never completely written); save the value again"
        )

    def zarr_store(self, *, read_only: bool = False) -> Any:
        from freight.storage.zarr_store import FreightZarrStore

        return FreightZarrStore(self.native, self.prefix, read_only=read_only)

    def object_path(self) -> str:
        """The backend's name of this folder (its percent-encoded object path, no trailing
        ``/``): on S3, the key prefix under which other clients (s3fs) reach these objects."""
        return self.native.object_path(self.prefix.rstrip("/"))

    # -- files (FunctionFuse's FILE_PROTOCOL shape) ---------------------------------------------

    def open(self, filename: str, mode: str = "rb") -> IO[Any]:
        """A file of this folder: on a local folder store, the file itself (opened in ``mode``);
        elsewhere, a buffer of the stored object that a writable mode stores back on close."""
        path = self.native.local_path(self.prefix + filename)
        if path is not None:
            if any(c in mode for c in "wax"):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            return open(path, mode)  # noqa: SIM115 - the caller closes it, as open()'s caller does
        return _stored_file(self, filename, mode)

    def remove(self, filename: str) -> None:
        try:
            self.native.delete(self.prefix + filename)
        except KeyNotFoundError:
            raise FileNotFoundError(
                f"No such file: {filename!r} ({self.native.url}: {self.prefix + filename})"
            ) from None

    def __repr__(self) -> str:
        return f"<SideArea {self.native.url} {self.prefix!r}>"


def _stored_file(area: SideArea, filename: str, mode: str) -> IO[Any]:
    key = area.prefix + filename
    kind = mode.replace("b", "").replace("t", "").replace("+", "")
    if len(kind) != 1 or kind not in "rwax" or len(set(mode)) != len(mode):
        raise ValueError(f"invalid mode: {mode!r}")
    data = b""
    if kind in "ra":
        try:
            data = bytes(memoryview(area.native.get(key)))
        except KeyNotFoundError:
            if kind == "r":
                raise FileNotFoundError(f"No such file: {filename!r} ({key})") from None
    elif kind == "x" and area.native.exists(key):
        raise FileExistsError(f"File exists: {filename!r} ({key})")
    f = _StoredFile(area.native, key, data, writable=kind != "r" or "+" in mode, append=kind == "a")
    if "b" not in mode:
        return io.TextIOWrapper(f, encoding="utf-8")
    return f


class _StoredFile(io.BytesIO):
    """A file kept as an object of the store: read in whole when opened, written back on close."""

    def __init__(self, native: Any, key: str, data: bytes, *, writable: bool, append: bool):
        super().__init__(data)
        self._native, self._key = native, key
        self._can_write = writable
        if append:
            self.seek(0, io.SEEK_END)

    def writable(self) -> bool:
        return self._can_write and super().writable()

    def _refuse(self) -> None:
        raise io.UnsupportedOperation("write: the file is not open for writing")

    def write(self, data: Any) -> int:
        if not self._can_write:
            self._refuse()
        return super().write(data)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def truncate(self, size: int | None = None) -> int:
        if not self._can_write:
            self._refuse()
        return super().truncate(size)

    def close(self) -> None:
        if not self.closed and self._can_write:
            self._native.put_bytes(self._key, [self.getvalue()])
        super().close()
