"""Shared-memory hand-off of freight frames between processes on one machine.

A value's large frames are written once into a named POSIX shared-memory segment (a tmpfs file
under ``/dev/shm``); the pickle stream carries only the header, the small frames and the
segment's name. The receiver opens the segment, **unlinks it at once**, maps it privately
(``MAP_PRIVATE``: copy on write) and closes the descriptor, so from then on the segment has no
name and is freed by the kernel when the last array viewing the mapping goes.

Why named segments rather than a memfd passed with ``multiprocessing.reduction.DupFd``: on
pipes (what ``Pool`` and ``ProcessPoolExecutor`` use) a descriptor cannot travel in the message,
so ``DupFd`` parks a duplicate in the *sender's* resource-sharer thread until the receiver
connects to fetch it. A message then dies with its sender (a ``Queue`` producer that exits after
``put``, a pool worker retired by ``maxtasksperchild``) and a message never received keeps the
memory in the sender for its whole life. A named segment outlives its sender like bytes in a
pipe do; the one leak it allows (a message never received) is covered by multiprocessing's
resource tracker, which unlinks every name still registered when the last process of the program
exits, ``kill -9`` included. See docs/integrations/multiprocessing.md for the lifecycle.

Everything here fails soft: no ``/dev/shm``, not enough room in it, a full descriptor table:
:func:`share` returns None and the caller sends the frames in the pickle stream as before.
"""

from __future__ import annotations

import errno
import mmap
import os
import secrets
import threading
from collections.abc import Sequence
from typing import Any

from freight.exceptions import DeserializationError

__all__ = ["THRESHOLD", "DIRECTORY", "PREFIX", "SharedMemoryLostError", "share", "attach", "stats", "available"]

#: Frames of at least this many bytes go through shared memory, smaller ones in the pickle stream.
#: Measured (docs/integrations/multiprocessing.md): one float64 array to a forkserver Pool worker
#: and back, pipe time over shared-memory time: 16 KiB 0.72x, 64 KiB 1.26x, 256 KiB 2.8x, 1 MiB
#: 4.7x, 16 MiB 7.7x, 64 MiB 12.5x.
THRESHOLD = 64 * 1024

DIRECTORY = "/dev/shm"
#: Segment names are ``frt-<creator pid>-<random>``: the pid tells a leak's origin at a glance.
PREFIX = "frt-"

_ALIGN = 64  # frames start on 64-byte boundaries: numpy and Arrow want aligned buffers
_CHUNK = 1 << 30  # one write() moves at most ~2 GiB on Linux

_LOCK = threading.Lock()
_STATS = {"segments": 0, "bytes": 0, "fallbacks": 0, "attached": 0}


class SharedMemoryLostError(DeserializationError):
    """A message names a shared-memory segment that no longer exists."""


def stats() -> dict[str, int]:
    """Counters of this process: segments written and their bytes, values that fell back to the
    pipe (``/dev/shm`` missing or full), segments attached. Tests use them to prove the path."""
    with _LOCK:
        return dict(_STATS)


def _count(key: str, n: int = 1) -> None:
    with _LOCK:
        _STATS[key] += n


_AVAILABLE: bool | None = None


def available() -> bool:
    """Whether this machine has a writable ``/dev/shm`` (Linux; checked once per process)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        _AVAILABLE = os.path.isdir(DIRECTORY) and os.access(DIRECTORY, os.W_OK) and hasattr(os, "pwrite")
    return _AVAILABLE


def _tracker(action: str, name: str) -> None:
    """Registers (or unregisters) ``name`` with multiprocessing's resource tracker, which unlinks
    whatever is still registered when the last process sharing the tracker exits."""
    from multiprocessing import resource_tracker

    try:
        getattr(resource_tracker, action)("/" + name, "shared_memory")
    except Exception:  # noqa: BLE001 - a tracker that cannot start must not fail the send
        pass


def tracker_ready() -> None:
    """Starts the resource tracker in this process now, so that processes forked later share it
    (one tracker per program: a name registered with one and unregistered with another would be
    reported as leaked at exit)."""
    from multiprocessing import resource_tracker

    try:
        resource_tracker.ensure_running()
    except Exception:  # noqa: BLE001
        pass


def share(frames: Sequence[Any]) -> tuple[str, list[tuple[int, int]]] | None:
    """Writes ``frames`` (buffers) into one new segment. Returns its name and each frame's
    ``(offset, length)``, or None when shared memory cannot take them (the caller falls back to
    the pipe; nothing is left behind)."""
    if not available():
        return None
    layout = []
    end = 0
    views = [memoryview(f).cast("B") for f in frames]
    for v in views:
        layout.append((end, v.nbytes))
        end = (end + v.nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
    try:
        st = os.statvfs(DIRECTORY)
        if st.f_bavail * st.f_frsize < end + (64 << 20):  # keep 64 MiB for everyone else
            _count("fallbacks")
            return None
    except OSError:
        _count("fallbacks")
        return None
    name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
    path = os.path.join(DIRECTORY, name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError:
        _count("fallbacks")
        return None
    # Registered before the first byte is written: a sender killed from here on leaves a name the
    # tracker knows about.
    _tracker("register", name)
    try:
        # write(), not a writable mapping: a full tmpfs fails write() with ENOSPC, while a store
        # into a mapping past the room left would kill the process with SIGBUS.
        for (offset, _), v in zip(layout, views):
            done = 0
            while done < v.nbytes:
                done += os.pwrite(fd, v[done : done + _CHUNK], offset + done)
        if end:
            os.ftruncate(fd, end)
    except OSError as e:
        os.close(fd)
        _discard(name)
        if e.errno not in (errno.ENOSPC, errno.EFBIG, errno.ENOMEM, errno.EDQUOT):
            raise
        _count("fallbacks")
        return None
    os.close(fd)
    _count("segments")
    _count("bytes", sum(v.nbytes for v in views))
    return name, layout


def _discard(name: str) -> None:
    try:
        os.unlink(os.path.join(DIRECTORY, name))
    except OSError:
        pass
    _tracker("unregister", name)


def attach(name: str, layout: Sequence[tuple[int, int]], writable: Sequence[bool]) -> list[memoryview]:
    """Opens the segment ``name``, unlinks it, maps it copy-on-write and returns a view per frame
    (writable where ``writable`` says so, read-only otherwise). The mapping lives as long as the
    views and what is built on them."""
    path = os.path.join(DIRECTORY, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SharedMemoryLostError(
            f"the shared-memory segment {name!r} that carried this value no longer exists: a "
            "message can be received once only, and a segment whose program ended (or whose "
            "/dev/shm was cleaned) is gone; send the value again"
        ) from None
    try:
        # Unlinked before anything else can fail: from here the segment is freed with its last
        # mapping, whatever happens to this process.
        _discard(name)
        size = os.fstat(fd).st_size
        if not size:
            return [memoryview(b"")[:0] for _ in layout]
        # MAP_PRIVATE: the receiver's writes stay its own (copy on write, page by page); PROT_WRITE
        # on a read-only descriptor is allowed for private mappings.
        mm = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    _count("attached")
    whole = memoryview(mm)
    return [
        whole[off : off + n] if w else whole[off : off + n].toreadonly()
        for (off, n), w in zip(layout, writable)
    ]  # fmt: skip


def segments() -> list[str]:
    """Names of freight segments present in ``/dev/shm`` (any process's): for leak checks."""
    try:
        return sorted(n for n in os.listdir(DIRECTORY) if n.startswith(PREFIX))
    except OSError:
        return []
