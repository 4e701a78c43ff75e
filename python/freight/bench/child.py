"""Runs one function in a fresh process and brings its result back.

Used where the state of the benchmark's own process would decide the numbers: the large sizes
(each peer alone in a process, so that no other peer's gigabytes are resident while it runs),
the ``fresh`` allocator state of the mid sizes, and the peak-memory probes (a high-water mark
is a property of a whole process).

The processes come from a **forkserver**, not from ``fork`` of this process: this process has
thread pools running (freight's, polars', torch's OpenMP), and a forked copy of a threaded
process may deadlock on a lock some other thread held. The forkserver is a single-threaded
process that imports the modules the run needs once (:func:`preload`), so that a child costs a
fork (milliseconds) rather than the imports (torch alone takes seconds). Where forkserver is not
available (Windows), children are spawned.
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Callable
from typing import Any

METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
_CTX = multiprocessing.get_context(METHOD)


class ChildError(RuntimeError):
    """The child raised (its traceback's last line is the message) or died (a signal: out of
    memory, a crash)."""


def preload(modules: list[str]) -> None:
    """Modules the forkserver imports once before it forks any child (no effect once it runs,
    nor with spawn)."""
    if METHOD == "forkserver":
        _CTX.set_forkserver_preload(list(dict.fromkeys(modules)))


def _entry(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        result = ("ok", fn(*args))
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent as text
        result = ("error", f"{type(exc).__name__}: {exc}", traceback.format_exc())
    conn.send(result)
    conn.close()


def call(fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
    """``fn(*args)`` in a fresh process; ``fn`` must be a module-level function and its
    arguments and result picklable."""
    receiver, sender = _CTX.Pipe(duplex=False)
    proc = _CTX.Process(target=_entry, args=(sender, fn, args), daemon=True)
    proc.start()
    sender.close()  # only the child holds the sending end now: its death ends recv() with EOFError
    try:
        if timeout is not None and not receiver.poll(timeout):
            proc.kill()
            raise ChildError(f"{fn.__name__} took longer than {timeout:.0f} s")
        try:
            result = receiver.recv()
        except EOFError:
            proc.join()
            code = proc.exitcode
            why = " (killed: out of memory?)" if code == -9 else ""
            raise ChildError(f"the child process died with exit code {code}{why}") from None
    finally:
        receiver.close()
        proc.join()
    if result[0] == "error":
        raise ChildError(result[1] + "\n" + result[2])
    return result[1]


__all__ = ["METHOD", "ChildError", "call", "preload"]
