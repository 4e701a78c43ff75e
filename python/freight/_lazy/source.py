"""Where a lazy value's bytes come from: a local file (mapped: reading a part touches only its
pages) or one stored object (ranged reads of the version whose header was read, coalesced, with
the GIL released). Each source counts the bytes it read, so a benchmark or a test can check that
a lazy read read only what it needed: for a stored object every byte its ranged reads returned
(the first read's speculative 64 KiB included), for a mapped file the bytes used (the header,
the frames or blocks read): nothing is read from a mapping but what is touched."""

from __future__ import annotations

import errno
import mmap
import os
import stat
import threading
from typing import Any

from freight.exceptions import PathError, PathNotFoundError

# The first read of an object: enough for the header of a typical value (a few thousand frames,
# or 32 KiB of SHA-256 digests for 256 MiB of signed frames) in one request.
FIRST_READ = 64 << 10
# Stored objects from this size get a buffer backed by huge pages where the system allows it.
_HUGE_MIN = 4 << 20


class FileSource:
    """A payload in a local file, mapped read-only."""

    # What opening looks at first: the preamble and the header's length (then the header
    # alone: a mapping is read where it is touched, so there is nothing to gain by asking more).
    probe = 64

    def __init__(self, path: str | os.PathLike[str]):
        self.name = os.fspath(path)
        try:
            # os.open rather than open(): no buffered file object to build and close (opening
            # is most of what a small lazy read costs).
            fd = os.open(self.name, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                info = os.fstat(fd)
                if stat.S_ISDIR(info.st_mode):
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self.name)
                size = info.st_size
                mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if size else None
            finally:
                os.close(fd)
        except FileNotFoundError:
            raise PathNotFoundError(f"{self.name}: no such file; check the path") from None
        except OSError as exc:
            raise PathError(f"{self.name}: cannot read it ({exc.strerror or exc}); check its permissions") from None
        self._mapped(mapped, size)

    @classmethod
    def of_store(cls, native: Any, key: str) -> FileSource:
        """The file of ``key`` in a local folder store, mapped by the store (``KeyNotFoundError``
        when there is none). One native call: asking for the file's path (a ``pathlib.Path``
        built in Python) and mapping it here cost three times as much with cold caches, a
        tenth of a lazy read of one column of a 10-column table."""
        self = cls.__new__(cls)
        self.name = f"{native.url}: {key!r}"
        mapped = native.map(key)  # a StoredBuffer: the mapping lives as long as it is referred to
        size = len(mapped)
        self._mapped(mapped if size else None, size)
        return self

    def _mapped(self, mapped: Any, size: int) -> None:
        # ``_map`` (an mmap, or a store's StoredBuffer) is what the decoder reads from, and what
        # the columns, arrays and views read from it keep alive; ``_view`` slices it.
        self._map = mapped
        self._view = memoryview(mapped) if mapped is not None else memoryview(b"")
        self.size = size
        self.bytes_read = 0
        self.requests = 0

    def first(self, length: int) -> Any:
        """The file's first ``length`` bytes (fewer if it is shorter), where the header lies:
        not counted, since only the header's bytes are used (``used_header`` counts them)."""
        return self._view[:length].tobytes()

    def used_header(self, length: int) -> None:
        self.bytes_read += length

    def read(self, ranges: list[tuple[int, int]]) -> list[Any]:
        view = self._view
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

    # The opening read already holds this much (a round trip costs more than the bytes).
    probe = FIRST_READ

    def __init__(self, native: Any, key: str):
        self._native = native
        self.key = key
        self.name = f"{native.url}: {key!r}"
        # One ranged GET: the header's bytes, and the size and version (ETag) every later read
        # is pinned to (no HEAD first: a round trip fewer).
        self._first, self.size, _modified, self.etag = native.get_head(key, FIRST_READ)
        self.bytes_read = len(self._first)
        self.requests = 1
        self._sparse: mmap.mmap | None = None
        self._filled: set[tuple[int, int]] = set()
        self._lock = threading.Lock()

    def first(self, length: int) -> Any:
        """The object's first ``length`` bytes (fewer if it is shorter): from the opening read
        when it holds them."""
        if length <= len(self._first) or len(self._first) == self.size:
            return self._first[:length]
        return bytes(self.read([(0, min(length, self.size))])[0])

    def used_header(self, length: int) -> None:
        """Nothing to count: the opening read counted what it returned."""

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
            self._sparse = mmap.mmap(-1, max(self.size, 1))
            if self.size >= _HUGE_MIN and hasattr(mmap, "MADV_HUGEPAGE"):
                # Fewer page faults as frames are written in (one per 2 MiB, not per 4 KiB: a
                # 32 MiB frame's 8,192 faults cost more than its copy). Advice only.
                try:
                    self._sparse.madvise(mmap.MADV_HUGEPAGE)
                except OSError:
                    pass
        return self._sparse

    def fill(self, frames: list[tuple[int, int]]) -> None:
        """Fetches these byte ranges into the buffer (each once), written in place by the
        native store as they arrive (no bytes object per frame, no copy after)."""
        # One fill at a time: the native read writes the buffer with the GIL released, and a
        # second thread must neither write the same frame again nor use it half written.
        with self._lock:
            todo = [r for r in frames if r not in self._filled and r[1] > r[0]]
            if not todo:
                return
            self._native.get_ranges_into(self.key, todo, self.etag, self.buffer())
            self.requests += 1
            self.bytes_read += sum(b - a for a, b in todo)
            self._filled.update(todo)
