"""Where a lazy value's bytes come from: a local file (mapped: reading a part touches only its
pages) or one stored object (ranged reads of the version whose header was read, coalesced, with
the GIL released). Each source counts the bytes it read, so a benchmark or a test can check that
a lazy read read only what it needed."""

from __future__ import annotations

import mmap
import os
from typing import Any

from freight.exceptions import PathError, PathNotFoundError

# The first read of an object: enough for the header of a typical value (a few thousand frames,
# or 32 KiB of SHA-256 digests for 256 MiB of signed frames) in one request.
FIRST_READ = 64 << 10


class FileSource:
    """A payload in a local file, mapped read-only."""

    def __init__(self, path: str | os.PathLike[str]):
        self.name = os.fspath(path)
        try:
            with open(self.name, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        except FileNotFoundError:
            raise PathNotFoundError(f"{self.name}: no such file; check the path") from None
        except OSError as exc:
            raise PathError(f"{self.name}: cannot read it ({exc.strerror or exc}); check its permissions") from None
        self.size = size
        self.bytes_read = 0
        self.requests = 0

    def read(self, ranges: list[tuple[int, int]]) -> list[Any]:
        view = memoryview(self._map) if self._map is not None else memoryview(b"")
        self.requests += len(ranges)
        self.bytes_read += sum(b - a for a, b in ranges)
        return [view[a:b] for a, b in ranges]

    def buffer(self) -> Any:
        """The whole payload where it lies (pages are read only when touched)."""
        return self._map

    def fill(self, frames: list[tuple[int, int]]) -> None:
        """Nothing to fetch: the mapping holds every frame already."""
        self.bytes_read += sum(b - a for a, b in frames)


class StoreSource:
    """One stored object, read by ranges of the version whose header was read (a value replaced
    meanwhile is refused, never mixed)."""

    def __init__(self, native: Any, key: str):
        self._native = native
        self.key = key
        self.name = f"{native.url}: {key!r}"
        self.size, _modified, self.etag = native.head(key)
        self.bytes_read = 0
        self.requests = 0
        self._sparse: mmap.mmap | None = None
        self._filled: set[tuple[int, int]] = set()

    def read(self, ranges: list[tuple[int, int]]) -> list[Any]:
        ranges = [(a, b) for a, b in ranges]
        got = self._native.get_ranges(self.key, ranges, self.etag)
        self.requests += 1
        self.bytes_read += sum(len(b) for b in got)
        return got

    def buffer(self) -> Any:
        """The object's full length of memory (anonymous pages: only what is written to is
        committed), holding the header and the frames fetched so far where they lie."""
        if self._sparse is None:
            self._sparse = mmap.mmap(-1, self.size)
        return self._sparse

    def fill(self, frames: list[tuple[int, int]]) -> None:
        """Fetches these byte ranges into the buffer (each once)."""
        todo = [r for r in frames if r not in self._filled and r[1] > r[0]]
        if not todo:
            return
        buf = self.buffer()
        for (a, b), data in zip(todo, self.read(todo)):
            buf[a:b] = data
            self._filled.add((a, b))
