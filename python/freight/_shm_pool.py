"""The shared-memory segments this process wrote, kept to be written again (:mod:`freight.shm`).

Why: a tmpfs page costs far more to allocate (and to free when its last mapping goes) than to
write again. Measured on the 2-core CI machine for a 4.2 MB segment (a 100k-row DataFrame):
allocating and writing 1.21 ms, freeing 0.46 ms, writing it again into the same pages 0.33 ms. A
pool worker that receives and returns a DataFrame per task paid both every time.

How a segment is known to be free, without any message from its readers: its file keeps one name
of its own for as long as it is pooled (``...<SUFFIX>``); each value written into it is published
under a second name (a hard link, the name its reference carries), and every reader takes a
shared ``flock`` on the file before it claims that name, and holds it as long as it maps the file
(the lock belongs to the open file, which the mapping keeps open: it goes with the last mapping, a
forked child's included, or with the process). So the segment is free once it has one name left
and nobody holds the lock (:func:`idle`): exactly the test below, two system calls. A reader
killed with ``kill -9`` releases its lock with its process; a reference never read keeps its name,
so its segment stays in use (and is unlinked at exit like any segment).

The pool holds at most :data:`LIMIT` bytes of segments (in use or idle), and no segment larger than
half of it; idle ones are unlinked oldest first to make room. Everything it holds is unlinked when
the process exits (and by multiprocessing's resource tracker when the program ends, for a process
killed). ``FREIGHT_SHM_POOL=<bytes>`` in the environment (inherited by workers) sets the limit;
``0`` turns reuse off."""

from __future__ import annotations

import fcntl
import mmap
import os
import threading
from typing import Any

__all__ = ["LIMIT", "SUFFIX", "Segment", "wanted", "take", "make_room", "keep", "drain", "forget_after_fork"]

LIMIT = int(os.environ.get("FREIGHT_SHM_POOL", str(128 << 20)))
#: the pooled file's own name ends so: a reference never names one (the carrier refuses it)
SUFFIX = ".pool"


class Segment:
    """A pooled segment: its own name, this process's descriptor of it, its size in bytes, and
    once it is written again, this process's shared mapping of it (kept: see :meth:`fill`)."""

    __slots__ = ("base", "fd", "size", "view", "_mapping")

    def __init__(self, base: str, fd: int, size: int) -> None:
        self.base, self.fd, self.size = base, fd, size
        self.view: Any = None  # a numpy uint8 array over a MAP_SHARED mapping of the whole segment
        self._mapping: mmap.mmap | None = None

    def fill(self, views: list[memoryview], size: int) -> None:
        """Writes ``views`` back to back into the (idle) segment, resized to ``size`` bytes first.
        Through a shared mapping kept from one value to the next, not write(): once its pages are
        mapped, writing again is a plain copy (measured 0.2 ms for 4.2 MB against 0.5 ms through
        write(), which looks up and locks every page), and numpy's copy releases the GIL. A
        mapping's store past the room left in /dev/shm would kill the process with SIGBUS, so the
        growth is allocated first (posix_fallocate fails with ENOSPC instead). OSError: no room."""
        import numpy as np

        if size != self.size:
            self.close_view()
            if size > self.size:
                os.posix_fallocate(self.fd, self.size, size - self.size)
            os.ftruncate(self.fd, size)
            self.size = size
        if self.view is None:
            self._mapping = mmap.mmap(self.fd, size, flags=mmap.MAP_SHARED)
            self.view = np.frombuffer(self._mapping, dtype=np.uint8)
        offset = 0
        for v in views:
            np.copyto(self.view[offset : offset + v.nbytes], np.frombuffer(v, dtype=np.uint8))
            offset += v.nbytes

    def close_view(self) -> None:
        mapping, self._mapping, self.view = self._mapping, None, None
        if mapping is not None:
            try:
                mapping.close()
            except BufferError:
                pass  # a view of it is still referenced somewhere: unmapped with it


_SEGMENTS: list[Segment] = []  # oldest publication first: the likeliest to be free again
_LOCK = threading.Lock()


def wanted(size: int) -> bool:
    """Whether a segment of ``size`` bytes is written through the pool."""
    return 0 < size <= LIMIT // 2


def idle(segment: Segment) -> bool:
    """Whether no reference names the segment any more (its own name is its last) and nobody maps
    it (no reader holds its shared lock)."""
    try:
        if os.fstat(segment.fd).st_nlink != 1:
            return False
        fcntl.flock(segment.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    fcntl.flock(segment.fd, fcntl.LOCK_UN)
    return True


def take(size: int) -> Segment | None:
    """An idle segment to write ``size`` bytes into (between half and four times as large: the
    caller truncates it to ``size``), taken out of the pool; None when there is none."""
    with _LOCK:
        for i, segment in enumerate(_SEGMENTS):
            if size // 2 <= segment.size <= 4 * size and idle(segment):
                return _SEGMENTS.pop(i)
    return None


def make_room(size: int) -> tuple[bool, list[Segment]]:
    """Takes idle segments out of the pool, oldest first, until ``size`` more bytes fit in it:
    whether they fit now, and the segments taken out (the caller unlinks them)."""
    out: list[Segment] = []
    with _LOCK:
        held = sum(s.size for s in _SEGMENTS)
        for segment in list(_SEGMENTS):
            if held + size <= LIMIT:
                break
            if idle(segment):
                _SEGMENTS.remove(segment)
                out.append(segment)
                held -= segment.size
        return held + size <= LIMIT, out


def keep(segment: Segment) -> None:
    """Puts a segment just published back into the pool, as its newest."""
    with _LOCK:
        _SEGMENTS.append(segment)


def drain() -> list[Segment]:
    """Empties the pool (at exit): the segments, for the caller to unlink. A segment still in use
    lives on through its reference's name and its readers' mappings."""
    with _LOCK:
        out = list(_SEGMENTS)
        _SEGMENTS.clear()
    return out


def held() -> list[Segment]:
    with _LOCK:
        return list(_SEGMENTS)


def forget_after_fork() -> None:
    """In a forked child: the parent's pool is the parent's (closed here, never unlinked)."""
    global _LOCK
    _LOCK = threading.Lock()
    for segment in _SEGMENTS:
        segment.close_view()
        try:
            os.close(segment.fd)
        except OSError:
            pass
    _SEGMENTS.clear()
