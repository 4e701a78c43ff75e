"""mpi4py integration: the lowercase (pickle-based) communication methods through freight.

One line for the user, on every rank::

    import freight.integrations.mpi4py as fm
    fm.install()                        # comm.send/recv/bcast/scatter/gather/... of every communicator
    comm = fm.wrap(MPI.COMM_WORLD)      # the same methods, large frames sent as separate messages

mpi4py pickles the objects its lowercase methods send (``send``, ``recv``, ``isend``, ``bcast``,
``scatter``, ``gather``, ``allgather``, ``alltoall``, ``sendrecv``, ...) with ``MPI.pickle``, an
object whose ``__init__(dumps, loads)`` replaces the functions it uses. :func:`install` gives it
freight's: each message is one freight payload (arrays written once into it, as pickle 5 writes
them in band), so options such as ``allow_pickle=False`` (refuse payloads that would run pickle)
and ``key=`` (signed messages) apply to every lowercase call of the program.

Large arrays are better not copied into one message at all. ``mpi4py.util.pkl5`` sends pickle 5's
out-of-band buffers as separate messages, through a module-level ``pickle`` object with
``dumps_oob``/``loads_oob``; :func:`install` replaces that object too, so a ``pkl5.Intracomm``
(what :func:`wrap` returns) sends freight's header as the first message and each frame (the
arrays' and tables' memory, not copied) as the next ones, and rebuilds the value on the received
buffers.

Every rank must install with the same options (mpi4py has one ``MPI.pickle`` per process and no
handshake): a rank without freight reading a freight message raises pickle's ``UnpicklingError``.
"""

from __future__ import annotations

import threading
from typing import Any

import freight
from freight import _api

try:  # mpi4py is an optional dependency (``pip install 'freight[mpi4py]'``, with an MPI library).
    from mpi4py import MPI
    from mpi4py.util import pkl5 as _pkl5
except ImportError as e:  # pragma: no cover - depends on the environment
    raise freight.MissingDependencyError(
        "freight.integrations.mpi4py needs mpi4py and an MPI library: apt-get install openmpi-bin "
        "libopenmpi-dev (or your cluster's MPI module), then pip install 'freight[mpi4py]'"
    ) from e

__all__ = ["install", "uninstall", "installed", "wrap", "FreightPickle"]

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"codec": None, "pkl5": None}


class FreightPickle:
    """What ``mpi4py.util.pkl5`` calls to turn an object into (data, buffers) and back: freight's
    header as the data, its frames as the buffers (each sent as its own message, not copied)."""

    def __init__(self, codec: freight.Freight, zero_copy: bool = False) -> None:
        self.codec = codec
        self.zero_copy = zero_copy

    def dumps_oob(self, obj: Any) -> tuple[Any, list[Any]]:
        frames = self.codec.dumps_frames(obj)
        bufs = []
        for frame in frames[1:]:
            view = memoryview(frame)
            bufs.append(view if view.ndim == 1 and view.format == "B" else view.cast("B"))  # pkl5 sends len(buf) bytes
        return frames[0], bufs

    def loads_oob(self, data: Any, bufs: Any) -> Any:
        # The received buffers belong to this message alone: zero_copy=True keeps arrays on them
        # (read-only views); by default arrays are copied out, writable, as pickle returns them.
        return self.codec.loads_frames([data, *bufs], zero_copy=self.zero_copy)

    def dumps(self, obj: Any) -> bytes:
        out = self.codec.dumps(obj)
        return out if type(out) is bytes else bytes(out)

    def loads(self, data: Any) -> Any:
        # mpi4py frees the receive buffer of a lowercase call as soon as loads returns, whatever
        # still refers to it, and loads may keep arrays and columns on its input (a writable one,
        # or pandas' and Arrow's buffers): decode from a copy that lives as long as they do.
        return self.codec.loads(bytes(data))


def install(*, zero_copy: bool = False, **options: Any) -> None:
    """Sends the lowercase methods of every communicator of this process through freight.

    Args:
        zero_copy: for :func:`wrap`'s communicators: arrays received out of band stay on the
            receive buffers (read-only views, no copy) instead of being copied out.
        **options: options of :class:`freight.Freight` (``allow_pickle=False`` refuses messages
            that would run pickle; ``key`` signs and requires signatures; ``compression``, ...).

    Call it on every rank, with the same options, before the ranks communicate.

    Raises:
        freight.OptionError: an option :class:`freight.Freight` does not take.
    """
    codec = freight.Freight(**options) if options else _api._DEFAULT
    oob = FreightPickle(codec, zero_copy=zero_copy)
    with _LOCK:
        MPI.pickle.__init__(oob.dumps, oob.loads)
        if _STATE["pkl5"] is None:
            _STATE["pkl5"] = _pkl5.pickle
        _pkl5.pickle = oob  # looked up by name on every pkl5 call
        _STATE["codec"] = codec


def uninstall() -> None:
    """Gives the lowercase methods (and ``pkl5``) pickle back."""
    with _LOCK:
        MPI.pickle.__init__()  # mpi4py's defaults (pickle, its protocol)
        if _STATE["pkl5"] is not None:
            _pkl5.pickle = _STATE["pkl5"]
            _STATE["pkl5"] = None
        _STATE["codec"] = None


def installed() -> bool:
    """Whether :func:`install` was called in this process (and not undone)."""
    return _STATE["codec"] is not None


def wrap(comm: Any = None) -> Any:
    """``comm`` (default ``MPI.COMM_WORLD``) as a ``mpi4py.util.pkl5`` communicator: the same
    lowercase methods, with freight's frames sent as separate messages (no copy into one buffer).
    Installs freight with the default options first if :func:`install` was not called."""
    if not installed():
        install()
    comm = MPI.COMM_WORLD if comm is None else comm
    return _pkl5.Intercomm(comm) if comm.Is_inter() else _pkl5.Intracomm(comm)
