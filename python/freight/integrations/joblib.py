"""joblib (loky backend) and scikit-learn's ``n_jobs``: large values cross in shared memory.

One line for the user::

    import freight.integrations.joblib as fj
    fj.install()      # before the first Parallel(...) / n_jobs call of the program

loky pickles arguments and results with its own pickler (cloudpickle with loky's reducers), whose
dispatch table takes per-type reducers through ``loky.backend.reduction.register``. :func:`install`
registers freight there for the exact classes of pandas, polars, pyarrow and torch (and numpy
arrays): their frames of :data:`freight.shm.THRESHOLD` bytes and more travel in shared memory as
with :mod:`freight.integrations.multiprocessing`. Why not a ``freight.Pickler`` for
``LOKY_PICKLER``: loky's pickler class must be cloudpickle-compatible (it pickles functions by
value), and loky already lets one add reducers to it; a registration keeps cloudpickle for
everything else and needs no new pickler.

numpy arrays: joblib memory-maps large numpy arguments (above ``max_nbytes``: hashed, dumped once
into a temporary folder, mapped read-only by the workers) and pipes numpy results; it gives loky
those reducers per call, ahead of registered ones. freight takes numpy *results* ahead of them
through the pickler's ``reducer_override`` (which pickle consults before any dispatch table);
numpy *arguments* keep joblib's memmapping, which measured as fast as freight for arrays sent once
and faster for one array sent to many tasks (docs/integrations/joblib.md). Arrays backed by your
own ``np.memmap`` files stay joblib's both ways.

Workers reach it the way multiprocessing's do: loky starts each worker by pickling its process
object with this pickler; the registered reduction installs freight in the worker before it runs
anything. Workers started before :func:`install` (loky reuses its executor between calls) keep the
old behaviour: install first, or call ``joblib.externals.loky.get_reusable_executor().shutdown()``.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from freight import shm
from freight.integrations import _handoff
from freight.integrations import multiprocessing as _fmp

__all__ = ["install", "installed", "LIBRARIES"]

#: Libraries whose classes are registered (those importable here).
LIBRARIES = ("numpy", "pandas", "polars", "pyarrow", "torch")

_LOCK = threading.Lock()
_INSTALLED: list[type] = []
_OPTIONS: dict[str, Any] = {"worker": False}


def _classes() -> list[type]:
    import importlib

    out: list[type] = []
    for lib in LIBRARIES:
        if lib == "torch" and "torch" not in sys.modules:
            continue  # importing torch costs seconds: only when the program uses it already
        try:
            importlib.import_module(lib)
        except ImportError:
            continue
    np = sys.modules.get("numpy")
    if np is not None:
        out.append(np.ndarray)
    if "torch" in sys.modules:
        out.append(sys.modules["torch"].Tensor)
    if "pandas" in sys.modules:
        pd = sys.modules["pandas"]
        out += [pd.DataFrame, pd.Series]
    if "polars" in sys.modules:
        pl = sys.modules["polars"]
        out += [pl.DataFrame, pl.Series]
    if "pyarrow" in sys.modules:
        pa = sys.modules["pyarrow"]
        bases = (pa.Array, pa.ChunkedArray, pa.Table, pa.RecordBatch)
        out += [c for c in vars(pa.lib).values() if isinstance(c, type) and issubclass(c, bases)]
    return out


def _reducer(obj: Any) -> Any:
    """loky's dispatch-table entry: freight's shared-memory reduction, or the object's own."""
    rv = _fmp.reduce(obj)
    if rv is NotImplemented:
        return obj.__reduce_ex__(5)
    return rv


def _reduce_process(obj: Any) -> Any:
    return (_started, (_handoff.options(), type(obj), obj.__dict__))


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


def _take_numpy(pickler_cls: type) -> None:
    """Gives loky's pickler class a ``reducer_override`` that sends numpy arrays through freight
    before joblib's per-call reducers see them (pickle consults it before any dispatch table), and
    defers to cloudpickle's otherwise."""
    if getattr(pickler_cls, "_freight_numpy", False):
        return
    base = pickler_cls.reducer_override

    def reducer_override(self: Any, obj: Any) -> Any:
        np = sys.modules.get("numpy")
        if np is not None and isinstance(obj, np.ndarray) and _takes_numpy(obj, np):
            rv = _fmp.reduce(obj if type(obj) is np.ndarray else np.asarray(obj))
            if rv is not NotImplemented:
                return rv
        return base(self, obj)

    pickler_cls.reducer_override = reducer_override  # type: ignore[attr-defined]
    pickler_cls._freight_numpy = True  # type: ignore[attr-defined]


def install(*, threshold: int | None = None) -> list[type]:
    """Registers freight in loky's pickler for this process and every loky worker started from now
    on. Returns the classes registered. ``threshold``: as for
    :func:`freight.integrations.multiprocessing.install`. numpy results go through freight (joblib
    would pipe them); numpy arguments keep joblib's memmapping."""
    from joblib.externals.loky.backend import process as loky_process
    from joblib.externals.loky.backend import reduction

    if threshold is not None:
        if not isinstance(threshold, int) or threshold < 1:
            raise _fmp.InstallError(f"threshold must be a positive number of bytes, not {threshold!r}")
        _handoff.set_options(threshold=threshold)
    with _LOCK:
        classes = _classes()
        for cls in classes:
            reduction.register(cls, _reducer)
        for cls in (loky_process.LokyProcess, loky_process.LokyInitMainProcess):
            reduction.register(cls, _reduce_process)
        _take_numpy(reduction.get_loky_pickler())
        _INSTALLED[:] = classes
    shm.tracker_ready()
    return list(classes)


def installed() -> bool:
    return bool(_INSTALLED)
