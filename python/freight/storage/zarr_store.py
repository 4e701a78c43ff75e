"""A zarr 3 store over a freight store: zarr's keys (``zarr.json``, ``c/0/0``) live under a prefix
of any freight backend (local folder, memory, S3), read and written through freight-store's Rust
code with the GIL released.

Why not zarr's own ``ObjectStore`` over obstore: it accepts only obstore's store classes, so it
would open a second connection pool (and a second copy of object_store) beside freight's, with
its own credentials handling; this class is the ``zarr.abc.store.Store`` protocol over the store
freight already has. Chunk reads and writes are dispatched to threads, so zarr's concurrent
chunk I/O runs in parallel.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, Store, SuffixByteRequest
from zarr.core.buffer import Buffer, BufferPrototype

from freight.exceptions import KeyNotFoundError

__all__ = ["FreightZarrStore"]


class FreightZarrStore(Store):
    """zarr's keys under ``prefix`` (ending in ``/``) of a ``freight._freight.NativeStore``."""

    supports_writes = True
    supports_deletes = True
    supports_listing = True
    supports_partial_writes = False

    def __init__(self, native: Any, prefix: str, *, read_only: bool = False):
        super().__init__(read_only=read_only)
        self._native = native
        self._prefix = prefix if prefix.endswith("/") else prefix + "/"

    def with_read_only(self, read_only: bool = False) -> FreightZarrStore:
        return FreightZarrStore(self._native, self._prefix, read_only=read_only)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FreightZarrStore)
            and other._native.url == self._native.url
            and other._prefix == self._prefix
            and other.read_only == self.read_only
        )

    def __repr__(self) -> str:
        return f"<FreightZarrStore {self._native.url} {self._prefix!r}>"

    def _key(self, key: str) -> str:
        return self._prefix + key

    def _read(self, key: str, byte_range: ByteRequest | None) -> bytes | None:
        full = self._key(key)
        try:
            if byte_range is None:
                return bytes(memoryview(self._native.get(full)))
            size = self._native.head(full)[0]
            if isinstance(byte_range, RangeByteRequest):
                start, end = byte_range.start, byte_range.end
            elif isinstance(byte_range, OffsetByteRequest):
                start, end = byte_range.offset, size
            elif isinstance(byte_range, SuffixByteRequest):
                start, end = max(0, size - byte_range.suffix), size
            else:  # pragma: no cover - zarr's ByteRequest has exactly these three kinds
                raise TypeError(f"unknown byte range {byte_range!r}")
            return self._native.get_range(full, start, end)
        except KeyNotFoundError:
            return None

    async def get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None) -> Buffer | None:
        data = await asyncio.to_thread(self._read, key, byte_range)
        return None if data is None else prototype.buffer.from_bytes(data)

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        return list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self._native.exists, self._key(key))

    async def set(self, key: str, value: Buffer) -> None:
        self._check_writable()
        await asyncio.to_thread(self._native.put_bytes, self._key(key), [value.as_numpy_array()])

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        self._check_writable()
        if not await self.exists(key):
            await self.set(key, value)

    async def delete(self, key: str) -> None:
        self._check_writable()
        try:
            await asyncio.to_thread(self._native.delete, self._key(key))
        except KeyNotFoundError:
            pass

    async def list(self) -> AsyncIterator[str]:
        for key in await self._names(""):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in await self._names(prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        prefix = prefix.rstrip("/")
        prefix = prefix + "/" if prefix else ""
        seen: set[str] = set()
        for key in await self._names(prefix):
            child = key[len(prefix) :].split("/", 1)[0]
            if child not in seen:
                seen.add(child)
                yield child

    async def _names(self, prefix: str) -> list[str]:
        entries = await asyncio.to_thread(self._native.list, self._key(prefix))
        return [name[len(self._prefix) :] for name, *_ in entries]
