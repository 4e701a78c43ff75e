"""Shared-memory segments between processes on one machine: the mechanism under the carrier's
``SharedMemory`` backend (:mod:`freight.carrier`), which lays frames out and names them in a
``Ref``; this module writes, maps, unlinks and lends segments.

A value's large frames are written once into a named POSIX shared-memory segment (a tmpfs file
under ``/dev/shm``); the message carries a reference naming the segment. The receiver opens the
segment, takes a shared lock on it, **claims it by unlinking the name**, and maps it privately
(``MAP_PRIVATE``: copy on write). The writer keeps the segment's pages for its next value once
nobody holds that lock any more (:mod:`freight._shm_pool`); otherwise the kernel frees them with
the last mapping.

Why named segments rather than a memfd passed with ``multiprocessing.reduction.DupFd``: on pipes
(what ``Pool`` and ``ProcessPoolExecutor`` use) a descriptor cannot travel in the message, so
``DupFd`` parks a duplicate in the *sender's* resource-sharer thread until the receiver connects
to fetch it: a message dies with its sender, and one never received keeps the memory in the sender
for its whole life. A named segment outlives its sender like bytes in a pipe do; the one leak it
allows (a message never received) is covered by multiprocessing's resource tracker, which unlinks
every name still registered when the last process of the program exits, ``kill -9`` included
(:mod:`freight._shm_tracker`). See docs/integrations/multiprocessing.md for the lifecycle.

**Lending a received segment back** (no copy): a process that sends on a frame lying in a segment
it received, unchanged (``/proc/self/pagemap`` shows none of its pages copied on write), does not
write it again. The loan's name (:mod:`freight._shm_loans`) names the process, its descriptor of
the segment and the segment's identity; the receiver opens ``/proc/<pid>/fd/<fd>``, checks the
identity, locks and maps it and acknowledges the loan. The lender keeps the mapping pinned until
it reads that acknowledgement; one that exits first copies the segment to the fallback name the
loan's name starts with (registered with the resource tracker), which the receiver opens then.

No ``/dev/shm`` or not enough room in it: :func:`write` returns False and writes nothing (the
carrier raises ``RefError``, and the process integrations send the value through the pipe).
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import secrets
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from freight import _shm_loans as _loans
from freight import _shm_pages as _pages
from freight import _shm_pool as _pool
from freight import _shm_tracker as _tracking
from freight._freight import buffer_span
from freight._shm_tracker import defer_unregistering
from freight._shm_tracker import flush as flush_tracker
from freight._shm_tracker import ready as tracker_ready
from freight.exceptions import DeserializationError, RefError, RefGoneError

__all__ = [
    "DIRECTORY", "PREFIX", "SharedMemoryLostError", "write", "attach", "discard", "lent", "open_loan", "is_loan",
    "end_loan", "stats", "available", "segments", "release_pool", "POOLED_SUFFIX", "defer_unregistering",
    "flush_tracker", "tracker_ready",
]  # fmt: skip

DIRECTORY = "/dev/shm"
#: At most this many received segments are kept lendable at once (each keeps a descriptor open).
#: ``FREIGHT_SHM_LENDABLE=0`` in the environment (inherited by workers) turns lending off.
LENDABLE = int(os.environ.get("FREIGHT_SHM_LENDABLE", "256"))
#: Segment names are ``frt-<creator pid>-<random>``: the pid tells a leak's origin at a glance.
PREFIX = "frt-"
#: a pooled segment's own name ends so (:mod:`freight._shm_pool`)
POOLED_SUFFIX = _pool.SUFFIX

_CHUNK = 1 << 30  # one write() moves at most ~2 GiB on Linux

_LOCK = threading.RLock()  # re-entered by a mapping's finalizer run by the collector
_STATS = {"segments": 0, "bytes": 0, "fallbacks": 0, "attached": 0, "lent": 0, "lent_bytes": 0, "reused": 0,
          "reused_bytes": 0}  # fmt: skip


class SharedMemoryLostError(RefGoneError):
    """A message names a shared-memory segment that no longer exists (a ``RefGoneError``)."""


def stats() -> dict[str, int]:
    """Counters of this process: segments written and their bytes, values that fell back to the
    pipe (``/dev/shm`` missing or full), segments attached, segments lent back without a copy and
    their bytes, segments written into the pages of a pooled one again and their bytes. Tests use
    them to prove the path."""
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


def new_name(suffix: str = "") -> str:
    """A new segment name (``frt-<pid>-<random><suffix>``); see :func:`_shm_tracker.new_name`."""
    if not suffix:
        _exit_hook()  # names registered ahead and never used are unregistered at exit
    return _tracking.new_name(PREFIX, suffix)


def _tracker(action: str, name: str, defer: bool = False) -> None:
    if defer:
        _exit_hook()  # what is still held when the process exits is sent then (_settle_at_exit)
    _tracking.send(action, name, defer)


def write(name: str, frames: Sequence[Any]) -> bool:
    """Writes ``frames`` (buffers) back to back into the new segment ``name`` (``frt-...``): into
    a segment of this process's pool that nobody uses any more when one fits (no page allocated;
    see :mod:`freight._shm_pool`), else into a new one. False when shared memory cannot take them
    (none, or not 64 MiB to spare after them): nothing is left behind."""
    if not available():
        return False
    _settle_acknowledged()
    views = [memoryview(f).cast("B") for f in frames]
    end = sum(v.nbytes for v in views)
    if _pool.wanted(end):
        written = _write_pooled(name, views, end)
        if written is not None:
            return written
    fd = _create(name, end)
    if fd is None:
        return False
    try:
        _pwrite(fd, views)
    except OSError as e:
        os.close(fd)
        discard(name)
        return _no_room(e)
    os.close(fd)
    _count("segments")
    _count("bytes", end)
    return True


def _create(name: str, size: int) -> int | None:
    """A descriptor of the new segment ``name``, registered with the tracker before its first byte
    is written (a sender killed from then on leaves a name the tracker knows about); None (counted
    as a fallback) when shared memory has not ``size`` bytes and 64 MiB to spare."""
    try:
        st = os.statvfs(DIRECTORY)
        if st.f_bavail * st.f_frsize < size + (64 << 20):  # keep 64 MiB for everyone else
            _count("fallbacks")
            return None
        fd = os.open(os.path.join(DIRECTORY, name), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError:
        _count("fallbacks")
        return None
    _tracking.register(name)
    return fd


def _pwrite(fd: int, views: list[memoryview]) -> None:
    # write(), not a writable mapping: a full tmpfs fails write() with ENOSPC, while a store into a
    # mapping past the room left would kill the process with SIGBUS.
    offset = 0
    for v in views:
        done = 0
        while done < v.nbytes:
            done += os.pwrite(fd, v[done : done + _CHUNK], offset + done)
        offset += v.nbytes


def _no_room(e: OSError) -> bool:
    if e.errno not in (errno.ENOSPC, errno.EFBIG, errno.ENOMEM, errno.EDQUOT):
        raise e
    _count("fallbacks")
    return False


def _write_pooled(name: str, views: list[memoryview], end: int) -> bool | None:
    """:func:`write` through the pool: the value is written into a pooled segment (an idle one
    truncated to ``end``, or a new one) and published as ``name``, a second link to it. None when
    the pool is full of segments in use (the caller writes a segment of its own)."""
    segment = _pool.take(end)
    reused = segment is not None
    if segment is None:
        fits, evicted = _pool.make_room(end)
        for old in evicted:
            _unpool(old)
        if not fits:
            return None
        base = new_name(_pool.SUFFIX)
        fd = _create(base, end)
        if fd is None:
            return False
        _exit_hook()  # the pool is unlinked at exit (_settle_at_exit)
        segment = _pool.Segment(base, fd, 0)
    _tracking.register(name)
    try:
        if reused:
            segment.fill(views, end)
        else:
            _pwrite(segment.fd, views)  # new pages: written, not zeroed first as a mapping's would be
            segment.size = end
        os.link(os.path.join(DIRECTORY, segment.base), os.path.join(DIRECTORY, name))
    except OSError as e:
        _unpool(segment)
        _tracker("unregister", name)
        if isinstance(e, FileNotFoundError):
            return None  # its own name was removed (/dev/shm cleaned): written the usual way
        return _no_room(e)
    _pool.keep(segment)
    _count("segments")
    _count("bytes", end)
    if reused:
        _count("reused")
        _count("reused_bytes", end)
    return True


def release_pool() -> int:
    """Lets go of the segments this process keeps for reuse (unlinked now; one still in use lives
    on until its readers are done): for a process that is done sending large values and wants
    their shared memory back before it exits. Returns how many."""
    segments = _pool.drain()
    for segment in segments:
        _unpool(segment, at_exit=True)
    flush_tracker()
    return len(segments)


def _unpool(segment: _pool.Segment, *, at_exit: bool = False) -> None:
    """Lets a pooled segment go: it lives on as long as a reference names it or a reader maps it.
    ``at_exit``: its unregistration rides with the others in one message (the caller flushes)."""
    discard(segment.base, defer=at_exit)
    segment.close_view()
    os.close(segment.fd)


def discard(name: str, *, defer: bool = False, claim: bool = False) -> None:
    """Unlinks the segment ``name`` and forgets it in the resource tracker; nothing when it is not
    there (the tracker prints a traceback for a name it was never given: a put that found no room),
    unless ``claim`` (a reader claiming a segment: FileNotFoundError, another claimed it first).
    ``defer``: the unregistration rides with the process's next tracker message (the caller makes
    sure one is sent: :func:`defer_unregistering`, or a flush)."""
    try:
        os.unlink(os.path.join(DIRECTORY, name))
    except FileNotFoundError:
        if claim:
            raise
        return
    except OSError:
        pass
    _tracker("unregister", name, defer=defer)


def attach(name: str, *, unlink: bool = True) -> memoryview:
    """Opens the segment ``name``, claims it by unlinking it (unless ``unlink=False``: then
    :func:`discard` removes it), maps it copy-on-write and returns the mapping (writable, private to
    this process), which lives as long as views of it do. Before it claims the segment it takes the
    shared lock that tells the segment's writer it is in use (:mod:`freight._shm_pool`)."""
    path = os.path.join(DIRECTORY, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _lost(name) from None
    except OSError as e:
        raise DeserializationError(
            f"could not open the shared-memory segment {name!r} that carries this value ({e}); with "
            "EMFILE, this process holds too many open files: raise the limit "
            "(resource.setrlimit(resource.RLIMIT_NOFILE, ...)) or keep fewer received values"
        ) from None
    try:
        _lock_shared(fd)
        # Claimed (read once: only one reader's unlink succeeds) or, kept, checked still linked
        # now that it is locked: a name gone means its writer may be writing another value into it.
        if unlink:
            discard(name, defer=_tracking.deferring(), claim=True)
        elif not os.path.samestat(os.stat(path), os.fstat(fd)):
            raise FileNotFoundError(path)
    except FileNotFoundError:
        os.close(fd)
        raise _lost(name) from None
    except BaseException:
        os.close(fd)
        raise
    # Unlinked before anything else can fail: from here the segment is freed with its last mapping,
    # whatever happens to this process.
    return _map(fd)


def _lost(name: str) -> SharedMemoryLostError:
    return SharedMemoryLostError(
        f"the shared-memory segment {name!r} that carried this value no longer exists: a message can "
        "be received once only, and a segment whose program ended (or whose /dev/shm was cleaned) is "
        "gone; send the value again"
    )


def _lock_shared(fd: int) -> None:
    """The shared lock a reader holds on a segment for as long as it maps it (the mapping keeps
    the open file, and the lock with it): its writer reuses the segment only once nobody holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        pass  # no locks here: the writer cannot take its exclusive lock either, so it never reuses


def _map(fd: int) -> memoryview:
    """Maps the segment open on ``fd`` (which it takes over)."""
    _settle_acknowledged()
    try:
        st = os.fstat(fd)
        if not st.st_size:
            os.close(fd)
            return memoryview(b"")
        # MAP_PRIVATE: the receiver's writes stay its own (copy on write, page by page); PROT_WRITE
        # on a read-only descriptor is allowed for private mappings.
        mm = mmap.mmap(fd, st.st_size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except BaseException:
        os.close(fd)
        raise
    _count("attached")
    _exit_hook()
    whole = memoryview(mm)
    # The descriptor stays open as long as the mapping: it is what a loan names (see lent()). The
    # mapping holds a descriptor of its own too, so at most LENDABLE mappings keep a second one:
    # a process holding thousands of received values must not run out of descriptors.
    lo = buffer_span(whole)[0]
    if len(_MAPPINGS) < LENDABLE:
        with _LOCK:
            _MAPPINGS[lo] = _Mapping(lo, lo + st.st_size, weakref.ref(mm), fd, st.st_dev, st.st_ino)
        weakref.finalize(mm, _forget, lo, fd)
    else:
        os.close(fd)
    return whole


# -- lending a received segment back without a copy ---------------------------------------------------


class _Mapping:
    """A segment this process received and maps: its address range, descriptor and identity."""

    __slots__ = ("lo", "hi", "mm", "fd", "dev", "ino")

    def __init__(self, lo: int, hi: int, mm: Any, fd: int, dev: int, ino: int) -> None:
        self.lo, self.hi, self.mm, self.fd, self.dev, self.ino = lo, hi, mm, fd, dev, ino


_MAPPINGS: dict[int, _Mapping] = {}  # by start address
# Loans not yet acknowledged: token -> (the mapping's start address, the mapping (pinned), fallback name)
_LENT: dict[int, tuple[int, Any, str]] = {}
_EXIT_HOOK: list[Any] = []


def _exit_hook() -> None:
    """Registers :func:`_settle_at_exit` once per process, when it first maps a segment (so, before
    it can lend one): it must be in multiprocessing's finalizer registry before the process starts
    exiting, since a queue's feeder thread may lend while the exit joins it, and finalizers
    registered during the exit are not run."""
    if _EXIT_HOOK:
        return
    from multiprocessing import util

    with _LOCK:
        if not _EXIT_HOOK:
            # Runs when the process exits normally (main: atexit; children: multiprocessing's
            # exit function), last: after queues' feeder threads have sent (and lent) what they
            # held (their joins run at priority -5).
            _EXIT_HOOK.append(util.Finalize(None, _settle_at_exit, exitpriority=-100))
            util.register_after_fork(_rearm_after_fork, _rearm_after_fork)  # (a function: weakly referable)


def _rearm_after_fork(_: Any) -> None:
    # multiprocessing clears a forked child's finalizers, then runs these: inherited mappings can
    # be lent from the child, so it settles its own loans at exit too.
    if _MAPPINGS:
        _exit_hook()


def _after_fork_in_child() -> None:
    # The parent's loans and pool are the parent's to settle; its /proc/self/pagemap descriptor
    # reads the parent's page tables. The mappings (and their descriptors) are inherited: lendable
    # here too.
    global _LOCK
    _LOCK = threading.RLock()  # another thread of the parent may have held it
    _LENT.clear()
    _tracking.after_fork_in_child()
    _pool.forget_after_fork()
    _EXIT_HOOK.clear()
    _loans.after_fork_in_child()
    _pages.after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _forget(lo: int, fd: int) -> None:
    with _LOCK:
        m = _MAPPINGS.get(lo)
        if m is not None and m.fd == fd:
            del _MAPPINGS[lo]
    os.close(fd)


def lent(frames: Sequence[Any]) -> list[tuple[str, int, int] | None]:
    """For each frame: ``(loan name, the frame's offset in the segment, the segment's size)`` when
    it lies whole in a segment this process received and none of its pages was written since (a
    page written is copied on write: no longer the segment's); else None (write it). One loan per
    segment, pinned until its receiver acknowledges it (:func:`open_loan`)."""
    out: list[tuple[str, int, int] | None] = [None] * len(frames)
    if not _MAPPINGS:
        return out
    with _LOCK:
        mappings = list(_MAPPINGS.values())  # a snapshot: a finalizer may drop entries meanwhile
    inside: dict[int, tuple[_Mapping, list[tuple[int, int, int]]]] = {}  # by start: (mapping, frames)
    for i, frame in enumerate(frames):
        addr, n = buffer_span(frame)
        if not n:
            continue
        m = next((m for m in mappings if m.lo <= addr and addr + n <= m.hi), None)
        if m is not None:
            inside.setdefault(m.lo, (m, []))[1].append((i, addr, n))
    for m, spans in inside.values():
        first = min(addr for _, addr, _ in spans) // _pages.PAGE
        copied = _pages.copied(first, (max(addr + n for _, addr, n in spans) - 1) // _pages.PAGE)
        if copied is None:
            continue
        name: str | None | bool = False  # the segment's loan in this message, once made
        for i, addr, n in spans:
            if copied[addr // _pages.PAGE - first : (addr + n - 1) // _pages.PAGE - first + 1].any():
                continue
            if name is False:
                name = _lend(m)
            if name is not None:
                out[i] = (name, addr - m.lo, m.hi - m.lo)
    return out


def _lend(mapping: _Mapping) -> str | None:
    """Lends a received segment to the next receiver: the loan's name, which says how to reach it
    (``/proc/<pid>/fd/<fd>``, its identity, where to acknowledge, the fallback name it is copied to
    if this process exits first); the mapping stays pinned until the acknowledgement. None if this
    process cannot take acknowledgements (the caller writes the frame instead)."""
    _settle_acknowledged()
    mm = mapping.mm()
    address = _loans.address()
    if mm is None or address is None:
        return None
    with _LOCK:
        token = secrets.randbits(63)
        fallback = f"{PREFIX}{os.getpid()}-{token:x}"
        _LENT[token] = (mapping.lo, mm, fallback)
    _count("lent")
    _count("lent_bytes", mapping.hi - mapping.lo)
    return _loans.name(fallback, mapping.fd, mapping.dev, mapping.ino, address)


def is_loan(name: str) -> bool:
    return _loans.MARK in name


def loan_parses(name: str) -> bool:
    try:
        _loan(name)
    except RefError:
        return False
    return True


def _loan(name: str) -> tuple[int, int, int, int, int, str, str]:
    return _loans.parse(name, PREFIX)


def open_loan(name: str, *, unlink: bool = True) -> memoryview:
    """The receiving side of a loan (:func:`lent`): maps the lender's segment (or, the lender gone,
    its fallback copy) and acknowledges the loan."""
    pid, lfd, dev, ino, token, address, fallback = _loan(name)
    fd = None
    denied = None
    try:
        fd = os.open(f"/proc/{pid}/fd/{lfd}", os.O_RDONLY | os.O_CLOEXEC)
        st = os.fstat(fd)
        # the lender exited and the number names another file, or the name was forged: only the
        # segment it names, in /dev/shm, is ever mapped
        if (st.st_dev, st.st_ino) != (dev, ino) or st.st_dev != os.stat(DIRECTORY).st_dev:
            os.close(fd)
            fd = None
    except PermissionError as e:
        denied = e
    except OSError:
        fd = None
    if fd is None:
        try:
            return attach(fallback, unlink=unlink)
        except SharedMemoryLostError:
            if denied is not None:
                raise SharedMemoryLostError(
                    f"this process may not open /proc/{pid}/fd/{lfd} ({denied}), through which process "
                    f"{pid} lent this value from shared memory it had received: lending needs the "
                    "program's processes to run as one user with /proc readable between them; set "
                    "FREIGHT_SHM_LENDABLE=0 in the environment before starting the program to copy instead"
                ) from None
            raise SharedMemoryLostError(
                f"process {pid}, which sent this value from shared memory it had received, exited "
                "before this process mapped it, without leaving a copy (killed, or /dev/shm full): "
                "the value is lost; send it again"
            ) from None
    _lock_shared(fd)  # before the lender unpins: its own lock holds the segment until then
    whole = _map(fd)
    _loans.send(address, token)  # mapped: the lender may unpin
    return whole


def end_loan(name: str) -> None:
    """Ends a loan without reading it: unpinned (the lender's side) or acknowledged (anyone
    else's), and its fallback copy, if one was made, unlinked."""
    _, _, _, _, token, address, fallback = _loan(name)
    with _LOCK:
        mine = _LENT.pop(token, None) is not None
    if not mine:
        _loans.send(address, token)
    discard(fallback)


def _settle_acknowledged() -> None:
    """Unpins the loans whose receivers acknowledged them."""
    if not _LENT:
        return
    for token in _loans.received():
        with _LOCK:
            _LENT.pop(token, None)


def _settle_at_exit() -> None:
    """Copies each unacknowledged loan to its fallback name, registered with the resource tracker
    like a segment. Written under a temporary name (registered too) and renamed when complete: the
    receiver never sees a partial copy."""
    _settle_acknowledged()
    flush_tracker()
    with _LOCK:
        pending = list(_LENT.items())
        _LENT.clear()
    for _, (lo, mm, fallback) in pending:
        m = _MAPPINGS.get(lo)
        if m is None:
            continue
        partial = fallback + "-partial"
        try:
            _tracker("register", partial)
            out = os.open(os.path.join(DIRECTORY, partial), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                size, done = m.hi - m.lo, 0
                while done < size:
                    done += os.copy_file_range(m.fd, out, size - done, done, done) or _short_copy(size)
            finally:
                os.close(out)
            _tracker("register", fallback)
            os.rename(os.path.join(DIRECTORY, partial), os.path.join(DIRECTORY, fallback))
        except OSError:
            discard(partial)  # no room left: the receiver reports the value lost (SharedMemoryLostError)
        else:
            _tracker("unregister", partial)
        del mm
    release_pool()
    _tracking.unregister_unused()
    _loans.close()  # every loan is settled


def _short_copy(size: int) -> int:
    raise OSError(errno.EIO, f"copy_file_range copied nothing of {size} bytes")


def segments(*, pooled: bool = False) -> list[str]:
    """Names of freight segments present in ``/dev/shm`` (any process's): for leak checks. Without
    ``pooled``, not the pooled segments' own names (:mod:`freight._shm_pool`: kept by a living
    process on purpose, unlinked at its exit; a segment in use there is listed by the name its
    reference carries)."""
    try:
        return sorted(n for n in os.listdir(DIRECTORY)
                      if n.startswith(PREFIX) and (pooled or not n.endswith(_pool.SUFFIX)))  # fmt: skip
    except OSError:
        return []
