"""Shared-memory segments between processes on one machine: the mechanism under the carrier's
``SharedMemory`` backend (:mod:`freight.carrier`), which lays frames out and names them in a
``Ref``; this module writes, maps, unlinks and lends segments.

A value's large frames are written once into a named POSIX shared-memory segment (a tmpfs file
under ``/dev/shm``); the message carries a reference naming the segment. The receiver opens the
segment, **unlinks it at once**, maps it privately
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

**Lending a received segment back** (no copy): a process that sends on a frame lying in a segment
it received, unchanged (``/proc/self/pagemap`` shows none of its pages copied on write), does not
write it again. The loan's name (:func:`lent`: a key in the carrier's ``Ref``) names the process,
its descriptor of the segment and the segment's identity (device, inode); the receiver opens
``/proc/<pid>/fd/<fd>``, checks the identity, maps it and acknowledges by sending the loan's token
to the lender's acknowledgement socket (a Unix datagram socket in the abstract namespace: it has no
file, and goes with its process). The lender keeps the mapping pinned until it reads that
acknowledgement (whenever it writes, attaches or lends again). A lender that exits with a loan
unacknowledged first copies the segment to the fallback name the loan's name starts with
(registered with the resource tracker, like any segment), which the receiver opens when the lender
is gone.

No ``/dev/shm`` or not enough room in it: :func:`write` returns False and writes nothing (the
carrier raises ``RefError``, and the process integrations send the value through the pipe).
"""

from __future__ import annotations

import errno
import mmap
import os
import secrets
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from freight.exceptions import DeserializationError, RefError, RefGoneError

__all__ = [
    "DIRECTORY", "PREFIX", "SharedMemoryLostError", "write", "attach", "discard", "lent", "open_loan", "is_loan",
    "end_loan", "stats", "available", "segments",
]  # fmt: skip

DIRECTORY = "/dev/shm"
#: At most this many received segments are kept lendable at once (each keeps a descriptor open).
#: ``FREIGHT_SHM_LENDABLE=0`` in the environment (inherited by workers) turns lending off.
LENDABLE = int(os.environ.get("FREIGHT_SHM_LENDABLE", "256"))
#: Segment names are ``frt-<creator pid>-<random>``: the pid tells a leak's origin at a glance.
PREFIX = "frt-"

_CHUNK = 1 << 30  # one write() moves at most ~2 GiB on Linux

_LOCK = threading.RLock()  # re-entered by a mapping's finalizer run by the collector
_STATS = {"segments": 0, "bytes": 0, "fallbacks": 0, "attached": 0, "lent": 0, "lent_bytes": 0}


class SharedMemoryLostError(RefGoneError):
    """A message names a shared-memory segment that no longer exists (a ``RefGoneError``)."""


def stats() -> dict[str, int]:
    """Counters of this process: segments written and their bytes, values that fell back to the
    pipe (``/dev/shm`` missing or full), segments attached, segments lent back without a copy and
    their bytes. Tests use them to prove the path."""
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


#: Unregistrations held back (:func:`defer_unregistering`) to ride with this process's next
#: message to the resource tracker: each message wakes the tracker, and on a busy machine a
#: wake-up costs the writer the rest of its time slice (measured at 1-5 ms a message under load,
#: four messages per value sent to a worker and back). At most ``_DEFER_MAX`` lines are held: one
#: write stays under PIPE_BUF (atomic, never interleaved with another process's messages).
_DEFERRED: list[str] = []
_DEFER_MAX = 32
_DEFERRING = threading.local()


def defer_unregistering(on: bool) -> None:
    """While on, segments this thread receives are unregistered with the process's next tracker
    message, not at once. Only for a caller that calls :func:`flush_tracker` before it replies
    (the multiprocessing integration does after every message it sends): an entry left with the
    tracker at the program's end is reported by it as a leak."""
    _DEFERRING.on = on


def flush_tracker() -> None:
    """Sends the held-back unregistrations to the resource tracker, in one message."""
    if _DEFERRED:
        _tracker_send("")


def _tracker(action: str, name: str, defer: bool = False) -> None:
    """Registers (or unregisters) ``name`` with multiprocessing's resource tracker, which unlinks
    whatever is still registered when the last process sharing the tracker exits."""
    line = f"{action.upper()}:/{name}:shared_memory\n"
    if defer:
        _exit_hook()  # what is still held when the process exits is sent then (_settle_at_exit)
        with _LOCK:
            _DEFERRED.append(line)
            if len(_DEFERRED) < _DEFER_MAX:
                return
        line = ""
    _tracker_send(line)


def _tracker_send(line: str) -> None:
    from multiprocessing import resource_tracker

    with _LOCK:
        held = "".join(_DEFERRED)
        _DEFERRED.clear()
    # The public register() probes the tracker with a write before each message: two writes and
    # two wake-ups of the tracker per call, for every segment. Once the tracker runs, one write of
    # the same messages does (a dead tracker fails the write: then the public calls restart it).
    fd = getattr(resource_tracker._resource_tracker, "_fd", None)
    if fd is not None:
        try:
            os.write(fd, (held + line).encode("ascii"))
            return
        except OSError:
            pass
    for message in (held + line).splitlines():
        action, name, _ = message.split(":")
        try:
            getattr(resource_tracker, action.lower())(name, "shared_memory")
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


def write(name: str, frames: Sequence[Any]) -> bool:
    """Writes ``frames`` (buffers) back to back into the new segment ``name`` (``frt-...``).
    False when shared memory cannot take them (none, or not 64 MiB to spare after them): nothing is
    left behind."""
    if not available():
        return False
    _settle_acknowledged()
    views = [memoryview(f).cast("B") for f in frames]
    end = sum(v.nbytes for v in views)
    try:
        st = os.statvfs(DIRECTORY)
        if st.f_bavail * st.f_frsize < end + (64 << 20):  # keep 64 MiB for everyone else
            _count("fallbacks")
            return False
        fd = os.open(os.path.join(DIRECTORY, name), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError:
        _count("fallbacks")
        return False
    # Registered before the first byte is written: a sender killed from here on leaves a name the
    # tracker knows about.
    _tracker("register", name)
    try:
        # write(), not a writable mapping: a full tmpfs fails write() with ENOSPC, while a store
        # into a mapping past the room left would kill the process with SIGBUS.
        offset = 0
        for v in views:
            done = 0
            while done < v.nbytes:
                done += os.pwrite(fd, v[done : done + _CHUNK], offset + done)
            offset += v.nbytes
    except OSError as e:
        os.close(fd)
        discard(name)
        if e.errno not in (errno.ENOSPC, errno.EFBIG, errno.ENOMEM, errno.EDQUOT):
            raise
        _count("fallbacks")
        return False
    os.close(fd)
    _count("segments")
    _count("bytes", end)
    return True


def discard(name: str, *, received: bool = False) -> None:
    """Unlinks the segment ``name`` and forgets it in the resource tracker; nothing when it is not
    there (the tracker prints a traceback for a name it was never given: a put that found no room).
    ``received``: a segment this thread is receiving, whose unregistration may be held back
    (:func:`defer_unregistering`)."""
    try:
        os.unlink(os.path.join(DIRECTORY, name))
    except FileNotFoundError:
        return
    except OSError:
        pass
    _tracker("unregister", name, defer=received and getattr(_DEFERRING, "on", False))


def attach(name: str, *, unlink: bool = True) -> memoryview:
    """Opens the segment ``name``, unlinks it (unless ``unlink=False``: then :func:`discard`
    removes it), maps it copy-on-write and returns the mapping (writable, private to this process),
    which lives as long as views of it do."""
    path = os.path.join(DIRECTORY, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SharedMemoryLostError(
            f"the shared-memory segment {name!r} that carried this value no longer exists: a "
            "message can be received once only, and a segment whose program ended (or whose "
            "/dev/shm was cleaned) is gone; send the value again"
        ) from None
    except OSError as e:
        raise DeserializationError(
            f"could not open the shared-memory segment {name!r} that carries this value ({e}); with "
            "EMFILE, this process holds too many open files: raise the limit "
            "(resource.setrlimit(resource.RLIMIT_NOFILE, ...)) or keep fewer received values"
        ) from None
    # Unlinked before anything else can fail: from here the segment is freed with its last
    # mapping, whatever happens to this process.
    if unlink:
        discard(name, received=True)
    return _map(fd)


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
    lo = _address(whole)
    if len(_MAPPINGS) < LENDABLE:
        with _LOCK:
            _MAPPINGS[lo] = _Mapping(lo, lo + st.st_size, weakref.ref(mm), fd, st.st_dev, st.st_ino)
        weakref.finalize(mm, _forget, lo, fd)
    else:
        os.close(fd)
    return whole


def _address(buf: Any) -> int:
    import numpy as np

    return int(np.frombuffer(buf, dtype=np.uint8).__array_interface__["data"][0])


# -- lending a received segment back without a copy ---------------------------------------------------


class _Mapping:
    """A segment this process received and maps: its address range, descriptor and identity."""

    __slots__ = ("lo", "hi", "mm", "fd", "dev", "ino")

    def __init__(self, lo: int, hi: int, mm: Any, fd: int, dev: int, ino: int) -> None:
        self.lo, self.hi, self.mm, self.fd, self.dev, self.ino = lo, hi, mm, fd, dev, ino


_MAPPINGS: dict[int, _Mapping] = {}  # by start address
# Loans not yet acknowledged: token -> (the mapping's start address, the mapping (pinned), fallback name)
_LENT: dict[int, tuple[int, Any, str]] = {}
_ACKS: list[Any] = []  # [this process's acknowledgement socket, its address]
_ACK_SENDER: list[Any] = []  # one unbound datagram socket to send acknowledgements from
_PAGE = mmap.PAGESIZE
_PAGEMAP: list[int] = []  # this process's /proc/self/pagemap descriptor, opened once
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
    # The parent's loans are the parent's to settle; its /proc/self/pagemap descriptor reads the
    # parent's page tables. The mappings (and their descriptors) are inherited: lendable here too.
    global _LOCK
    _LOCK = threading.RLock()  # another thread of the parent may have held it
    _LENT.clear()
    _DEFERRED.clear()  # the parent's to send
    _EXIT_HOOK.clear()
    for sock in (*_ACKS[:1], *_ACK_SENDER):
        sock.close()  # the parent's: its acknowledgements are not this process's
    _ACKS.clear()
    _ACK_SENDER.clear()
    if _PAGEMAP:
        os.close(_PAGEMAP.pop())


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
    if not _MAPPINGS:
        return [None] * len(frames)
    out: list[tuple[str, int, int] | None] = []
    loans: dict[int, str | None] = {}  # mapping start -> its loan's name in this message
    with _LOCK:
        mappings = list(_MAPPINGS.values())  # a snapshot: a finalizer may drop entries meanwhile
    for frame in frames:
        n = memoryview(frame).nbytes
        addr = _address(frame) if n else 0
        found = next((m for m in mappings if n and m.lo <= addr and addr + n <= m.hi), None)
        if found is None or not _unchanged(addr, n):
            out.append(None)
            continue
        if found.lo not in loans:
            loans[found.lo] = _lend(found)
        name = loans[found.lo]
        out.append(None if name is None else (name, addr - found.lo, found.hi - found.lo))
    return out


def _unchanged(addr: int, n: int) -> bool:
    """Whether every page of [addr, addr + n) that is present is still the file's page (pagemap
    bit 61; a page copied on write is anonymous) and none is swapped (bit 62: anonymous too)."""
    import numpy as np

    try:
        if not _PAGEMAP:
            _PAGEMAP.append(os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC))
        first, last = addr // _PAGE, (addr + n - 1) // _PAGE
        raw = os.pread(_PAGEMAP[0], 8 * (last - first + 1), 8 * first)
    except OSError:
        return False
    entries = np.frombuffer(raw, dtype="<u8")
    present = (entries >> np.uint64(63)) & np.uint64(1)
    swapped = (entries >> np.uint64(62)) & np.uint64(1)
    file_page = (entries >> np.uint64(61)) & np.uint64(1)
    return len(entries) == last - first + 1 and not bool(((present & ~file_page & np.uint64(1)) | swapped).any())


_LOAN = ".lent-"  # a loan's name: <fallback name>.lent-<fd>-<dev>-<inode>-<acknowledgement tag>


def _lend(mapping: _Mapping) -> str | None:
    """Lends a received segment to the next receiver: the loan's name, which says how to reach it
    (``/proc/<pid>/fd/<fd>``, its identity, where to acknowledge, the fallback name it is copied to
    if this process exits first); the mapping stays pinned until the acknowledgement. None if this
    process cannot take acknowledgements (the caller writes the frame instead)."""
    _settle_acknowledged()
    mm = mapping.mm()
    if mm is None or not _ack_socket():
        return None
    with _LOCK:
        token = secrets.randbits(63)
        fallback = f"{PREFIX}{os.getpid()}-{token:x}"
        _LENT[token] = (mapping.lo, mm, fallback)
    _count("lent")
    _count("lent_bytes", mapping.hi - mapping.lo)
    tag = _ACKS[1].rpartition("-")[2]
    return f"{fallback}{_LOAN}{mapping.fd}-{mapping.dev}-{mapping.ino}-{tag}"


def is_loan(name: str) -> bool:
    return _LOAN in name


def loan_parses(name: str) -> bool:
    try:
        _loan(name)
    except RefError:
        return False
    return True


def _loan(name: str) -> tuple[int, int, int, int, int, str, str]:
    """A loan's (pid, fd, dev, ino, token, acknowledgement address, fallback name)."""
    fallback, _, rest = name.partition(_LOAN)
    try:
        pid, token = fallback[len(PREFIX) :].split("-")
        fd, dev, ino, tag = rest.split("-")
        int(tag, 16)
        return int(pid), int(fd), int(dev), int(ino), int(token, 16), f"\0freight-ack-{pid}-{tag}", fallback
    except ValueError:
        raise RefError(f"{name[:200]!r} is not the name of a shared-memory loan: the reference is corrupt") from None


def _ack_socket() -> bool:
    """Opens this process's acknowledgement socket once (False where there is none: no AF_UNIX)."""
    if _ACKS:
        return True
    import socket

    with _LOCK:
        if _ACKS:
            return True
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            address = f"\0freight-ack-{os.getpid()}-{secrets.token_hex(8)}"
            sock.bind(address)
            sock.setblocking(False)
        except (OSError, AttributeError):
            return False
        _ACKS[:] = [sock, address]
    return True


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
    whole = _map(fd)
    _acknowledge(address, token)  # mapped: the lender may unpin
    return whole


def end_loan(name: str) -> None:
    """Ends a loan without reading it: unpinned (the lender's side) or acknowledged (anyone
    else's), and its fallback copy, if one was made, unlinked."""
    _, _, _, _, token, address, fallback = _loan(name)
    with _LOCK:
        mine = _LENT.pop(token, None) is not None
    if not mine:
        _acknowledge(address, token)
    discard(fallback)


def _acknowledge(address: str, token: int) -> None:
    import socket

    try:
        if not _ACK_SENDER:
            sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sender.setblocking(False)
            _ACK_SENDER.append(sender)
        _ACK_SENDER[0].sendto(token.to_bytes(8, "little"), address)
    except OSError:
        pass  # the lender is gone (nothing to unpin) or its queue is full: it keeps the pin until it exits


def _settle_acknowledged() -> None:
    """Unpins the loans whose receivers acknowledged them."""
    if not _LENT or not _ACKS:
        return
    sock = _ACKS[0]
    while True:
        try:
            token = int.from_bytes(sock.recv(16), "little")
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return
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
    # Every loan is settled: the acknowledgement sockets, which live as long as the process, close
    # here rather than at the interpreter's teardown (where each one is a ResourceWarning).
    with _LOCK:
        for sock in (*_ACKS[:1], *_ACK_SENDER):
            sock.close()
        _ACKS.clear()
        _ACK_SENDER.clear()


def _short_copy(size: int) -> int:
    raise OSError(errno.EIO, f"copy_file_range copied nothing of {size} bytes")


def segments() -> list[str]:
    """Names of freight segments present in ``/dev/shm`` (any process's): for leak checks."""
    try:
        return sorted(n for n in os.listdir(DIRECTORY) if n.startswith(PREFIX))
    except OSError:
        return []
