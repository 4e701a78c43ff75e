"""joblib (loky backend) and scikit-learn's ``n_jobs``: large values cross in shared memory.

One line for the user::

    import freight.integrations.joblib as fj
    fj.install()      # before the first Parallel(...) / n_jobs call of the program

loky pickles arguments and results with its own pickler (cloudpickle with loky's reducers).
:func:`install` gives that pickler class a ``reducer_override`` which hands numpy, pandas, polars,
pyarrow and torch values to freight (recognised by their module, as
:func:`freight.integrations.multiprocessing.reduce` does: nothing is imported for it) and defers to
cloudpickle's for everything else; their frames of 256 KiB and more (the carrier's ``"processes"``
threshold) travel in shared memory, each carried by a ``freight.carrier.Ref``, as with
:mod:`freight.integrations.multiprocessing`. Why not a
``freight.Pickler`` for ``LOKY_PICKLER``: loky's pickler class must be cloudpickle-compatible (it
pickles functions by value), and the class it already has takes an override; keeping it keeps
cloudpickle for everything else and needs no new pickler.

numpy arrays: joblib memory-maps large numpy arguments (above ``max_nbytes``: hashed, dumped once
into a temporary folder, mapped read-only by the workers) and pipes numpy results; it gives loky
those reducers per call, ahead of registered ones. freight takes numpy *results* ahead of them
through the pickler's ``reducer_override`` (which pickle consults before any dispatch table);
numpy *arguments* keep joblib's memmapping, which measured as fast as freight for arrays sent once
and faster for one array sent to many tasks (docs/integrations/joblib.md). Arrays backed by your
own ``np.memmap`` files stay joblib's both ways.

Workers reach it the way multiprocessing's do: loky starts each worker by pickling its process
object with this pickler; the reduction registered for loky's process classes installs freight
in the worker before it runs anything. Workers started before :func:`install` (loky reuses its
executor between calls) keep the old behaviour: install first, or call
``joblib.externals.loky.get_reusable_executor().shutdown()``.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from freight import shm
from freight.exceptions import checks_options
from freight.integrations import _shared_frames, require
from freight.integrations import multiprocessing as _fmp

__all__ = ["install", "installed"]

_LOCK = threading.Lock()
_OPTIONS: dict[str, Any] = {"installed": False, "worker": False}
_TOP: dict[type, str] = {}  # class -> the top-level module it comes from


def _reduce_process(obj: Any) -> Any:
    return (_started, (_shared_frames.options(), type(obj), obj.__dict__))


def _started(options: dict[str, Any], cls: type, state: dict[str, Any]) -> Any:
    _OPTIONS["worker"] = True  # what this process pickles from now on are results
    install(threshold=options["threshold"])
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj


def _takes_numpy(obj: Any, np: Any) -> bool:
    """Whether freight sends this numpy array rather than joblib's reducers: in a worker (a
    result, which joblib would pickle into the pipe) unless it is backed by a file of the user's own
    (which joblib sends by file name). Arguments stay joblib's: its memmapping was as fast for
    arrays sent once and faster for one array sent to many tasks (docs/integrations/joblib.md)."""
    if not _OPTIONS["worker"]:
        return False
    from joblib._memmapping_reducer import JOBLIB_MMAPS, _get_backing_memmap

    backing = _get_backing_memmap(obj)
    return not isinstance(backing, np.memmap) or backing.filename in JOBLIB_MMAPS


def _take_freight_types(pickler_cls: type) -> None:
    """Gives loky's pickler class a ``reducer_override`` (pickle consults it before any dispatch
    table, so before joblib's per-call reducers) that sends the values freight shares through
    shared memory and defers to cloudpickle's otherwise. Types are recognised by their module, as
    in :func:`freight.integrations.multiprocessing.reduce`: no library is imported for it (a worker
    importing pandas, polars and pyarrow at start-up would take seconds)."""
    if getattr(pickler_cls, "_freight", False):
        return
    base = pickler_cls.reducer_override

    def reducer_override(self: Any, obj: Any) -> Any:
        cls = type(obj)
        top = _TOP.get(cls)
        if top is None:  # first time this class is seen: one dict probe per object afterwards
            top = _TOP[cls] = cls.__module__.partition(".")[0] if isinstance(cls.__module__, str) else ""
        if top in _fmp.TYPES:
            if top == "numpy" and isinstance(obj, sys.modules["numpy"].ndarray):
                np = sys.modules["numpy"]
                rv = _fmp.reduce(obj if cls is np.ndarray else np.asarray(obj)) if _takes_numpy(obj, np) else None
            else:
                rv = _fmp.reduce(obj)
            if rv is not None and rv is not NotImplemented:
                return rv
        return base(self, obj)

    pickler_cls.reducer_override = reducer_override  # type: ignore[attr-defined]
    pickler_cls._freight = True  # type: ignore[attr-defined]


@checks_options("freight.integrations.joblib.install")
def install(*, threshold: int | None = None) -> None:
    """Routes loky's pickling through freight in this process and every loky worker started from
    now on. ``threshold``: as for
    :func:`freight.integrations.multiprocessing.install`. numpy results go through freight (joblib
    would pipe them); numpy arguments keep joblib's memmapping.

    Raises:
        freight.MissingDependencyError: joblib is not installed (``pip install 'freight[joblib]'``).
    """
    require("joblib.externals.loky.backend.reduction", "joblib", "freight.integrations.joblib.install()", "joblib")
    from joblib.externals.loky.backend import process as loky_process
    from joblib.externals.loky.backend import reduction

    _fmp.check_threshold(threshold)
    if threshold is not None:
        _shared_frames.set_options(threshold=threshold)
    with _LOCK:
        for cls in (loky_process.LokyProcess, loky_process.LokyInitMainProcess):
            reduction.register(cls, _reduce_process)
        _take_freight_types(reduction.get_loky_pickler())
        _OPTIONS["installed"] = True
    shm.tracker_ready()


def installed() -> bool:
    """Whether :func:`install` is in effect in this process."""
    return _OPTIONS["installed"]
