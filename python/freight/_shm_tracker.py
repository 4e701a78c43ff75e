"""multiprocessing's resource tracker, as :mod:`freight.shm` speaks to it: every segment name is
registered with it before its first byte is written, so that whatever is still registered when the
last process of the program exits (``kill -9`` included) is unlinked; unregistrations of received
segments may be held back to ride with the process's next message (one wake-up of the tracker
instead of two)."""

from __future__ import annotations

import os
import secrets
import threading

__all__ = [
    "DEFERRED",
    "defer_unregistering",
    "deferring",
    "flush",
    "send",
    "send_many",
    "ready",
    "after_fork_in_child",
    "new_name",
    "register",
    "unregister_unused",
    "UNUSED",
]

#: Unregistrations held back (:func:`defer_unregistering`) to ride with this process's next
#: message to the resource tracker: each message wakes the tracker, and on a busy machine a
#: wake-up costs the writer the rest of its time slice (measured at 1-5 ms a message under load,
#: four messages per value sent to a worker and back). At most ``_DEFER_MAX`` lines are held: one
#: write stays under PIPE_BUF (atomic, never interleaved with another process's messages).
DEFERRED: list[str] = []
_DEFER_MAX = 32
_DEFERRING = threading.local()
_LOCK = threading.Lock()


def defer_unregistering(on: bool) -> None:
    """While on, segments this thread receives are unregistered with the process's next tracker
    message, not at once. Only for a caller that calls :func:`flush` before it replies (the
    multiprocessing integration does after every message it sends): an entry left with the tracker
    at the program's end is reported by it as a leak."""
    _DEFERRING.on = on


def deferring() -> bool:
    return getattr(_DEFERRING, "on", False)


def flush() -> None:
    """Sends the held-back unregistrations to the resource tracker, in one message."""
    if DEFERRED:
        _send_line("")


def send(action: str, name: str, defer: bool = False) -> None:
    """Registers (or unregisters) ``name`` with multiprocessing's resource tracker, which unlinks
    whatever is still registered when the last process sharing the tracker exits. ``defer``: held
    back (the caller makes sure :func:`flush` runs at the process's exit)."""
    line = f"{action.upper()}:/{name}:shared_memory\n"
    if defer:
        with _LOCK:
            DEFERRED.append(line)
            if len(DEFERRED) < _DEFER_MAX:
                return
        line = ""
    _send_line(line)


def send_many(action: str, names: list[str]) -> None:
    """Registers (or unregisters) every name of ``names`` in one message."""
    _send_line("".join(f"{action.upper()}:/{name}:shared_memory\n" for name in names))


def _send_line(line: str) -> None:
    from multiprocessing import resource_tracker

    with _LOCK:
        held = "".join(DEFERRED)
        DEFERRED.clear()
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


#: Names registered ahead of use (:func:`new_name`) and not used yet. Only in the program's main
#: process: a worker stopped by ``Pool.terminate()`` (SIGTERM, no exit hooks) would leave its unused
#: ones registered, which the tracker reports as leaked.
_AHEAD: set[str] = set()
UNUSED: list[str] = []
_MAIN: list[bool] = []  # whether this is the program's main process, once known


def new_name(prefix: str, suffix: str = "") -> str:
    """A new segment name (``<prefix><pid>-<random><suffix>``). In the program's main process,
    names without a suffix are registered ahead, 16 in one message: each message wakes the tracker
    (a third process on the pool's cores), and one per value made a pool of two workers' batch of
    16 100k-row DataFrames 62.7-64.0 ms (median of 12), 57.3-58.4 ms with the names ahead."""
    if not _MAIN:
        import multiprocessing

        _MAIN.append(multiprocessing.parent_process() is None)
    if suffix or not _MAIN[0]:
        return f"{prefix}{os.getpid()}-{secrets.token_hex(8)}{suffix}"
    with _LOCK:
        name = UNUSED.pop() if UNUSED else None
    if name is not None:
        return name
    names = [f"{prefix}{os.getpid()}-{secrets.token_hex(8)}" for _ in range(16)]
    send_many("register", names)
    with _LOCK:
        _AHEAD.update(names)
        UNUSED.extend(names[1:])
    return names[0]


def register(name: str) -> None:
    """Registers ``name`` before its segment is made, unless it was registered ahead."""
    with _LOCK:
        if name in _AHEAD:
            _AHEAD.discard(name)
            return
    send("register", name)


def unregister_unused() -> None:
    """At exit: the names registered ahead that no segment took."""
    with _LOCK:
        ahead = sorted(_AHEAD)
        _AHEAD.clear()
        UNUSED.clear()
    if ahead:
        send_many("unregister", ahead)


def ready() -> None:
    """Starts the resource tracker in this process now, so that processes forked later share it
    (one tracker per program: a name registered with one and unregistered with another would be
    reported as leaked at exit)."""
    from multiprocessing import resource_tracker

    try:
        resource_tracker.ensure_running()
    except Exception:  # noqa: BLE001
        pass


def after_fork_in_child() -> None:
    global _LOCK
    _LOCK = threading.Lock()  # another thread of the parent may have held it
    DEFERRED.clear()  # the parent's to send
    _AHEAD.clear()  # the parent's to use and settle
    UNUSED.clear()
    _MAIN.clear()
