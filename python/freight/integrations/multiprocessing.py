"""multiprocessing and concurrent.futures: large values cross between processes in shared memory.

One line for the user::

    import freight.integrations.multiprocessing as fmp
    fmp.install()    # Pool, Queue, Pipe, Process arguments and ProcessPoolExecutor, both directions

Everything those send is pickled by ``multiprocessing.reduction.ForkingPickler``. :func:`install`
gives that class a ``reducer_override`` (pickle calls it before its own dispatch, for every object
that is not an int, float, str or bytes): numpy arrays, torch CPU tensors, pandas, polars and
pyarrow values become ``freight.dumps_frames`` output whose frames of 256 KiB and more
(``freight.carrier.THRESHOLDS["processes"]``), with its other frames of 4 KiB and more
(``freight.carrier.COMPANION``), are carried as a ``freight.carrier.Ref``: written once
into a shared-memory segment, which the receiver maps copy-on-write and rebuilds the value on
(:mod:`freight.integrations._shared_frames`). A value sent on unchanged from memory received that
way is lent, not written again (:func:`freight.shm.lent`).
Everything else is left to pickle, untouched.

How workers get it without an ``initializer``: under ``spawn`` and ``forkserver`` the parent
pickles each new ``Process`` object with ForkingPickler to start the child. The override reduces
that object to ``(_started, (options, class, state))``, and the child, unpickling it before it runs
anything, calls :func:`_started`, which installs freight there with the parent's options. Under
``fork`` the child inherits the installed class attribute.
"""

from __future__ import annotations

import io
import pickle
import sys
import threading
from collections.abc import Iterable
from multiprocessing.reduction import ForkingPickler
from typing import Any

import freight
from freight import carrier, shm
from freight._freight import buffer_span
from freight.exceptions import FreightError, OptionError, UnsafePayloadError, checks_options
from freight.integrations import _shared_frames, flag

__all__ = ["install", "uninstall", "installed", "reduce", "TYPES", "InstallError"]

#: Libraries whose values go through freight, by the top-level module of their type.
TYPES = ("numpy", "pandas", "polars", "pyarrow", "torch")

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {
    "installed": False, "previous_override": None, "previous_loads": None, "previous_dumps": None, "loads": None,
}  # fmt: skip
_KINDS: dict[type, Any] = {}  # exact type -> how its frames are shared (None: not ours)


class InstallError(FreightError, ValueError):
    """:func:`install` was given options it cannot honour."""


# -- per-type policy --------------------------------------------------------------------------------


def _ndarray(obj: Any) -> Any:
    if obj.dtype.hasobject:
        return None  # object arrays: pickle's own path (freight would pickle them anyway)
    w = bool(obj.flags.writeable)
    return lambda: _shared_frames.reduce_value(obj, freight.dumps_frames(obj), w, False)


def _tensor(obj: Any) -> Any:
    if obj.device.type != "cpu":
        return None  # torch's own reducer (CUDA IPC handles)
    return lambda: _shared_frames.reduce_value(obj, freight.dumps_frames(obj), True, False)


def _arrow(obj: Any) -> Any:
    # Arrow memory is immutable: read-only views are what pyarrow and polars hold anyway, and
    # freight's Arrow path copies writable input (a reused buffer could change after validation).
    return lambda: _shared_frames.reduce_value(obj, freight.dumps_frames(obj), False, True)


def _pandas(obj: Any) -> Any:
    def go() -> Any:
        ranges = _writable_ranges(obj)
        frames = freight.dumps_frames(obj)

        def writable(i: int, frame: Any) -> bool:
            a = buffer_span(frame)[0]
            return any(lo <= a < hi for lo, hi in ranges)

        return _shared_frames.reduce_value(obj, frames, writable, False)

    return go


def _writable_ranges(obj: Any) -> list[tuple[int, int]]:
    """Address ranges of the writable numpy arrays under a pandas object: the frames in them are
    sent writable (pandas writes into its blocks), the others (Arrow buffers) read-only."""
    import numpy as np

    arrays: list[Any] = []
    mgr = getattr(obj, "_mgr", None)
    for block in getattr(mgr, "blocks", ()):
        v = block.values
        arrays += [v, getattr(v, "_ndarray", None), getattr(v, "_data", None), getattr(v, "_mask", None),
                   getattr(v, "_codes", None)]  # fmt: skip
    index = getattr(obj, "index", obj)
    arrays.append(getattr(index, "_values", None))
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray) and a.flags.writeable and a.nbytes:
            lo = buffer_span(a)[0] if a.flags.c_contiguous else a.__array_interface__["data"][0]
            out.append((lo, lo + a.nbytes))
    return out


def _kind(cls: type) -> Any:
    """The policy for an exact type, found once per type."""
    if cls in _KINDS:
        return _KINDS[cls]
    top = cls.__module__.partition(".")[0]
    kind = None
    if top == "numpy" and cls is sys.modules["numpy"].ndarray:
        kind = _ndarray
    elif top == "torch" and cls is sys.modules["torch"].Tensor:
        kind = _tensor
    elif top == "pandas":
        pd = sys.modules["pandas"]
        if cls in (pd.DataFrame, pd.Series):
            kind = _pandas
    elif top == "polars":
        pl = sys.modules["polars"]
        if cls in (pl.DataFrame, pl.Series):
            kind = _arrow
    elif top == "pyarrow":
        pa = sys.modules["pyarrow"]
        if issubclass(cls, (pa.Array, pa.ChunkedArray, pa.Table, pa.RecordBatch)):
            kind = _arrow
    _KINDS[cls] = kind
    return kind


_TOPS = frozenset(TYPES)


def reduce(obj: Any, _kinds: Any = _KINDS.get, _type: Any = type, _state: Any = _STATE) -> Any:
    """The ``reducer_override`` installed on ForkingPickler: a reduction for values freight shares,
    ``NotImplemented`` for everything else (pickle goes on as usual). Pickle calls it for every
    object but ints, floats, strings, bytes and those already in the message: the common path (a
    class met before, not ours) is one dict probe, with the names it needs bound as defaults."""
    kind = _kinds(_type(obj), False)
    if kind is None:
        previous = _state["previous_override"]
        return NotImplemented if previous is None else previous(obj)
    if kind is False:  # first time this class is seen
        cls = type(obj)
        if cls.__module__.partition(".")[0] in _TOPS:
            kind = _kind(cls)
        else:
            from multiprocessing import process

            kind = _KINDS[cls] = _reduce_process if issubclass(cls, process.BaseProcess) else None
        if kind is None:
            return _chain(obj)
    if kind is _reduce_process:
        return _reduce_process(obj)
    try:
        make = kind(obj)
        rv = make() if make is not None else None
        if rv is None and make is not None and not _shared_frames.options()["allow_pickle"]:
            # small value, receivers refusing pickle: freight's frames in the stream, since the
            # library's own reduction names functions the receiver will not resolve
            rv = _shared_frames.inband(freight.dumps_frames(obj))
    except FreightError:
        rv = None  # a value freight cannot take: pickle's way, unchanged
    return rv if rv is not None else _chain(obj)


def _chain(obj: Any) -> Any:
    previous = _STATE["previous_override"]
    return previous(obj) if previous is not None else NotImplemented


def _reduce_process(obj: Any) -> Any:
    """A Process being sent to its new child (spawn, forkserver): rebuilt there by :func:`_started`,
    which installs freight first, with this process's options."""
    from multiprocessing import context

    if context.get_spawning_popen() is None:
        return _chain(obj)  # not a process start: pickle's own error or reduction
    return (_started, (_shared_frames.options(), type(obj), obj.__dict__))


def _started(options: dict[str, Any], cls: type, state: dict[str, Any]) -> Any:
    install(**options)
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj


# -- allow_pickle=False: the receiving side's unpickler resolves only what it trusts -----------------

_PROTOCOL = {
    ("concurrent.futures.process", n) for n in ("_CallItem", "_ResultItem", "_rebuild_exc", "_ExceptionWithTraceback")
} | {
    # mapstar/starmapstar: how Pool.map and starmap send a chunk; they call only what the message
    # names, which this unpickler resolves under the same rule
    ("multiprocessing.pool", n) for n in ("rebuild_exc", "ExceptionWithTraceback", "MaybeEncodingError", "mapstar",
                                          "starmapstar")
} | {
    ("freight.integrations._shared_frames", "load"),
    ("freight.integrations.multiprocessing", "_started"),
    ("freight.futures", "_run"),
    ("freight.futures", "_unwrap"),
}  # fmt: skip


class _TrustingUnpickler(pickle.Unpickler):
    trusted: tuple[str, ...] = ()

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _PROTOCOL or any(module == m or module.startswith(m + ".") for m in self.trusted):
            return super().find_class(module, name)
        if module in ("builtins", "freight.exceptions"):
            obj = super().find_class(module, name)
            if isinstance(obj, type) and issubclass(obj, BaseException):
                return obj  # exceptions coming back from workers
        raise UnsafePayloadError(
            f"refused to unpickle {module}.{name}: this process was set up with "
            "freight.integrations.multiprocessing.install(allow_pickle=False), which resolves only "
            "freight's values and the modules in trusted=(...); add the module of your task "
            "functions to trusted, or install with allow_pickle=True"
        )


def _restricted_loads(data: Any, /, **kwargs: Any) -> Any:
    import io

    u = _TrustingUnpickler(io.BytesIO(data), **kwargs)
    u.trusted = _shared_frames.options()["trusted"]
    return u.load()


# -- a value whose reference cannot be read: its receiver reports it, a Pool does not hang -------------


#: what ``_dumps`` appends, after pickle's STOP, to a message that holds shared-memory references
#: (pickle stops reading at STOP: any unpickler reads the message as before); a message without it
#: ends with STOP, and ``_loads`` hands it to pickle without setting anything up
_CARRIES = b"\x01"
_STOP = pickle.STOP[0]


def _loads(data: Any, /, **kwargs: Any) -> Any:
    """ForkingPickler's ``loads`` while installed. A value whose reference cannot be read (segment
    gone, forged) fails its whole message: the RefError is raised here (a ProcessPoolExecutor then
    reports BrokenProcessPool with it as the cause), except in a Pool's worker and result thread,
    which stop at any error and leave ``map`` waiting for ever: there the task or the result becomes
    that error, which the Pool's caller gets."""
    if data and data[-1] == _STOP:
        # No shared-memory reference in this message (see _CARRIES): nothing to catch or hold
        # back. Most pool messages are small tasks and results; the set-up below cost each
        # about 6k instructions, more than pickle's own loads of them.
        return _STATE["loads"](data, **kwargs)
    before = _shared_frames.CATCHING.failed
    failed: list[Exception] = []
    _shared_frames.CATCHING.failed = failed
    shm.defer_unregistering(True)  # sent with the next message to the tracker, at the latest by _dumps
    try:
        obj = _STATE["loads"](data, **kwargs)
    finally:
        _shared_frames.CATCHING.failed = before
        shm.defer_unregistering(False)
    if not failed:
        return obj
    from multiprocessing import current_process, pool

    if type(obj) is tuple and len(obj) == 5 and getattr(current_process(), "_target", None) is pool.worker:
        return (obj[0], obj[1], _raise, (failed[0],), {})  # a task (job, i, func, args, kwds)
    handler = getattr(pool.Pool, "_handle_results", None)
    if type(obj) is tuple and len(obj) == 3 and getattr(threading.current_thread(), "_target", None) is handler:
        return (obj[0], obj[1], (False, failed[0]))  # a result (job, i, (success, value))
    raise failed[0]


def _raise(exc: Exception) -> Any:
    raise exc


def _dumps(obj: Any, protocol: int | None = None) -> Any:
    """ForkingPickler's ``dumps`` while installed: after pickling, the tracker gets what
    :func:`_loads` held back (in the same message as this one's segments when it has any). A
    worker so tells the tracker about the task's segment before its result leaves: a pool
    terminated once it has the results leaves nothing registered that is gone."""
    before = _shared_frames.sent()
    try:
        # ForkingPickler.dumps' own three lines, with the mark written before the buffer is handed
        # out (appending after would copy the message).
        buf = io.BytesIO()
        ForkingPickler(buf, protocol).dump(obj)
        if _shared_frames.sent() != before:
            buf.write(_CARRIES)
        return buf.getbuffer()
    finally:
        shm.flush_tracker()


# -- install ------------------------------------------------------------------------------------------


def check_threshold(threshold: Any) -> None:
    """The ``threshold=`` of the process integrations' ``install``: None or a positive int."""
    if threshold is not None and (not isinstance(threshold, int) or isinstance(threshold, bool)):
        raise OptionError(f"threshold= takes a positive number of bytes (an int) or None; got {threshold!r}")
    if threshold is not None and threshold < 1:
        raise InstallError(f"threshold must be a positive number of bytes, not {threshold!r}")


@checks_options("freight.integrations.multiprocessing.install")
def install(*, threshold: int | None = None, allow_pickle: bool = True, trusted: Iterable[str] = ()) -> None:
    """Routes what multiprocessing pickles through freight in this process and, from now on, in
    every process it starts (spawn and forkserver through the process object, fork by inheritance).

    Args:
        threshold: frames of at least this many bytes go through shared memory (default
            ``freight.carrier.THRESHOLDS["processes"]``, 256 KiB, measured), and with them the
            value's other frames of ``freight.carrier.COMPANION`` bytes or more; smaller ones in
            the pickle stream.
        allow_pickle: False makes every installed process refuse to unpickle anything but
            freight's values (loaded with ``allow_pickle=False``), the pool's own messages, exception
            classes and the modules in ``trusted``: a gadget sent to a worker raises
            ``UnsafePayloadError`` instead of running.
        trusted: modules (and their submodules) whose functions and classes may be named in
            messages when ``allow_pickle=False`` (your task functions' modules).
    """
    check_threshold(threshold)
    allow_pickle = flag("allow_pickle", allow_pickle, True)  # "false" must not allow pickle
    trusted = tuple(trusted)
    if any(not isinstance(m, str) or not m for m in trusted):
        raise InstallError(f"trusted must name modules as strings, not {trusted!r}")
    with _LOCK:
        limit = carrier.threshold(threshold, integration="processes")
        _shared_frames.set_options(threshold=limit, allow_pickle=allow_pickle, trusted=trusted)
        if not _STATE["installed"]:
            current = ForkingPickler.__dict__.get("reducer_override")
            _STATE["previous_override"] = None if current is None else current.__get__(None, ForkingPickler)
            _STATE["previous_loads"] = ForkingPickler.__dict__.get("loads")
            _STATE["previous_dumps"] = ForkingPickler.__dict__.get("dumps")
            ForkingPickler.reducer_override = staticmethod(reduce)  # type: ignore[attr-defined]
            ForkingPickler.dumps = staticmethod(_dumps)  # type: ignore[method-assign,assignment]
            _STATE["installed"] = True
        _STATE["loads"] = _restricted_loads if not allow_pickle else _STATE["previous_loads"]
        ForkingPickler.loads = staticmethod(_loads)  # type: ignore[method-assign]
    # One resource tracker for the whole program: forked children share this one (spawned and
    # forkserver ones are given it), so a segment registered by its sender and unregistered by its
    # receiver is one entry in one tracker.
    shm.tracker_ready()


def uninstall() -> None:
    """Gives ForkingPickler back its previous behaviour in this process (workers already started
    keep theirs until they exit)."""
    with _LOCK:
        if not _STATE["installed"]:
            return
        previous = _STATE["previous_override"]
        if previous is None:
            del ForkingPickler.reducer_override  # type: ignore[attr-defined]
        else:
            ForkingPickler.reducer_override = staticmethod(previous)  # type: ignore[attr-defined]
        ForkingPickler.loads = _STATE["previous_loads"]  # type: ignore[method-assign]
        ForkingPickler.dumps = _STATE["previous_dumps"]  # type: ignore[method-assign]
        shm.flush_tracker()
        _shared_frames.set_options(allow_pickle=True, trusted=(), threshold=carrier.threshold(integration="processes"))
        _STATE["installed"] = False


def installed() -> bool:
    """Whether :func:`install` is in effect in this process."""
    return _STATE["installed"]
