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

joblib's own memory-mapping of numpy arguments (arrays above ``max_nbytes``, dumped once into a
temporary folder and memory-mapped by the workers) is kept: joblib passes it to loky per call, and
those reducers come after the registered ones, so numpy *arguments* stay joblib's while numpy
*results* (which joblib sends through the pipe) and every other library's values take freight's way.

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
    install(threshold=options["threshold"])
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj


def install(*, threshold: int | None = None) -> list[type]:
    """Registers freight in loky's pickler for this process and every loky worker started from now
    on. Returns the classes registered. ``threshold``: as for
    :func:`freight.integrations.multiprocessing.install`."""
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
        _INSTALLED[:] = classes
    shm.tracker_ready()
    return list(classes)


def installed() -> bool:
    return bool(_INSTALLED)
