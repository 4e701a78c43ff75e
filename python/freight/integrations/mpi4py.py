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

Large arrays are better not copied into one message at all. :func:`wrap` returns a communicator
(a ``mpi4py.util.pkl5`` one, whose module-level ``pickle`` object :func:`install` replaces) whose
point-to-point methods send a value in one message when its frames are small (below
:data:`INLINE_LIMIT`: one freight payload, as the lowercase methods do), and otherwise freight's
header as the first message and each frame (the arrays' and tables' memory, not copied) as the
next ones, rebuilding the value on the received buffers. Its collectives are pkl5's (header and
frames as separate messages).

Every rank must install with the same options (mpi4py has one ``MPI.pickle`` per process and no
handshake): a rank without freight reading a freight message raises pickle's ``UnpicklingError``.
"""

from __future__ import annotations

import struct
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

__all__ = ["install", "uninstall", "installed", "wrap", "FreightPickle", "INLINE_LIMIT"]

#: :func:`wrap`'s communicators send a value whose frames hold fewer bytes than this in one message
#: (one freight payload, copied once like pickle's); larger frames go as messages of their own.
INLINE_LIMIT = 256 * 1024

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"codec": None, "pkl5": None}
_MAGIC = b"\x89FRT"  # how every freight payload starts
# The first message of a value sent out of band: this marker, then the lengths of the header and
# of each frame (int64), each of which follows as a message of its own.
_OOB_MARK = b"\x89FRTOOB"
_RECEIVING = threading.local()  # (communicator, status) of a wrap() receive in progress


class FreightPickle:
    """What mpi4py calls to turn an object into bytes and back: ``dumps``/``loads`` for the
    lowercase methods (``MPI.pickle``), ``dumps_oob``/``loads_oob`` for ``mpi4py.util.pkl5``
    (freight's header as the data, its frames as the buffers, each sent as its own message)."""

    def __init__(self, codec: freight.Freight, zero_copy: bool = False) -> None:
        self.codec = codec
        self.zero_copy = zero_copy

    def dumps_oob(self, obj: Any) -> tuple[Any, list[Any]]:
        frames = self.codec.dumps_frames(obj)
        return frames[0], [_bytes_view(frame) for frame in frames[1:]]

    def loads_oob(self, data: Any, bufs: Any) -> Any:
        # The received buffers belong to this message alone: zero_copy=True keeps arrays on them
        # (read-only views, no copy); by default arrays are views of these writable buffers too,
        # as pickle 5 returns them (tables' buffers are copied, so that nothing changes them later).
        return self.codec.loads_frames([data, *bufs], zero_copy=self.zero_copy)

    def dumps(self, obj: Any) -> bytes:
        out = self.codec.dumps(obj)
        return out if type(out) is bytes else bytes(out)

    def loads(self, data: Any) -> Any:
        view = memoryview(data)
        if view[: len(_OOB_MARK)] == _OOB_MARK:
            return self._receive_frames(view)
        # mpi4py frees the receive buffer of a lowercase call as soon as loads returns, whatever
        # still refers to it, and loads keeps arrays and columns on a writable input: decode from
        # a copy that lives as long as they do. A bytearray, not bytes: numpy arrays then view it
        # (one copy, as pickle 5 makes) where from read-only bytes they would be copied again.
        return self.codec.loads(bytearray(view))

    def _receive_frames(self, first: memoryview) -> Any:
        """The rest of a value a :func:`wrap` communicator sent out of band: ``first`` (its first
        message) gives the lengths of the header and frames, which follow from the same sender."""
        receiving = getattr(_RECEIVING, "context", None)
        if receiving is None:
            raise freight.DeserializationError(
                "this message was sent out of band by a freight.integrations.mpi4py.wrap() communicator "
                "(its frames follow as separate messages): receive it through wrap(comm) too"
            )
        comm, status = receiving
        lengths = _unpack_lengths(first)
        source, tag = status.Get_source(), status.Get_tag()
        buffers = [MPI.buffer.allocate(n) for n in lengths]
        with _pkl5._bigmpi as bigmpi:
            for buf in buffers:
                MPI.Comm.Recv(comm, bigmpi(buf), source, tag)
        return self.loads_oob(buffers[0], buffers[1:])


def _bytes_view(frame: Any) -> memoryview:
    view = memoryview(frame)
    return view if view.ndim == 1 and view.format == "B" else view.cast("B")  # MPI sends len(view) bytes


def _pack_lengths(lengths: list[int]) -> bytes:
    return _OOB_MARK + struct.pack(f"<{len(lengths)}q", *lengths)


def _unpack_lengths(first: memoryview) -> list[int]:
    body = first[len(_OOB_MARK) :]
    if len(body) % 8:
        raise freight.DeserializationError("a wrap() message's frame table is truncated: the sender is not freight's")
    return list(struct.unpack(f"<{len(body) // 8}q", body))


def _messages(obj: Any) -> list[Any]:
    """What a :func:`wrap` communicator sends for ``obj``: one freight payload when its frames are
    small (the header alone when it has none), else the frame table, the header and each frame."""
    codec = _STATE["codec"]
    frames = codec.dumps_frames(obj)
    if len(frames) == 1:
        return [frames[0]]  # the header of a value without frames is the whole payload
    bufs = [_bytes_view(frame) for frame in frames[1:]]
    if sum(len(b) for b in bufs) < INLINE_LIMIT:
        return [codec.dumps(obj)]
    header = _bytes_view(frames[0])
    return [_pack_lengths([len(header), *(len(b) for b in bufs)]), header, *bufs]


def _send(comm: Any, send: Any, obj: Any, dest: int, tag: int) -> None:
    """Sends ``obj``'s messages with ``send(comm, buf, dest, tag)`` (back to back, under mpi4py's
    send lock, so that another thread's messages to the same rank and tag do not interleave)."""
    messages = _messages(obj)
    if len(messages) == 1:
        send(comm, [messages[0], MPI.BYTE], dest, tag)
        return
    with MPI._comm_lock(comm, "send"), _pkl5._bigmpi as bigmpi:
        for message in messages:
            send(comm, bigmpi(message), dest, tag)


def _isend(comm: Any, isend: Any, obj: Any, dest: int, tag: int) -> Any:
    requests: list[Any] = []
    _send(comm, lambda c, buf, d, t: requests.append(isend(c, buf, d, t)), obj, dest, tag)
    return _pkl5.Request(requests)


def _recv(comm: Any, buf: Any, source: int, tag: int, status: Any) -> Any:
    """mpi4py's own receive (one message, decoded by :meth:`FreightPickle.loads`), which goes on
    to receive the frames when the message says they follow (under mpi4py's receive lock, so that
    another thread does not take them)."""
    status = MPI.Status() if status is None else status
    # not mpi4py's "recv" lock: its own receive takes that one when MPI has no Mprobe
    with MPI._comm_lock(comm, "freight recv"):
        _RECEIVING.context = (comm, status)
        try:
            return MPI.Comm.recv(comm, buf, source, tag, status)
        finally:
            _RECEIVING.context = None


class _Comm(_pkl5.Comm):
    """:func:`wrap`'s communicator: pkl5's, with point-to-point methods that send small values in
    one message (pkl5 always sends at least two: lengths, then data). Collectives are pkl5's."""

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        _send(self, MPI.Comm.Send, obj, dest, tag)

    def bsend(self, obj: Any, dest: int, tag: int = 0) -> None:
        _send(self, MPI.Comm.Bsend, obj, dest, tag)

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        MPI.Request.Waitall(_isend(self, MPI.Comm.Issend, obj, dest, tag))

    def isend(self, obj: Any, dest: int, tag: int = 0) -> Any:
        return _isend(self, MPI.Comm.Isend, obj, dest, tag)

    def ibsend(self, obj: Any, dest: int, tag: int = 0) -> Any:
        return _isend(self, MPI.Comm.Ibsend, obj, dest, tag)

    def issend(self, obj: Any, dest: int, tag: int = 0) -> Any:
        return _isend(self, MPI.Comm.Issend, obj, dest, tag)

    def recv(self, buf: Any = None, source: int = MPI.ANY_SOURCE, tag: int = MPI.ANY_TAG, status: Any = None) -> Any:
        return _recv(self, buf, source, tag, status)

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = MPI.ANY_SOURCE, recvtag: int = MPI.ANY_TAG, status: Any = None) -> Any:  # fmt: skip
        requests = _isend(self, MPI.Comm.Isend, sendobj, dest, sendtag)
        received = _recv(self, recvbuf, source, recvtag, status)
        MPI.Request.Waitall(requests)
        return received

    def mprobe(self, source: int = MPI.ANY_SOURCE, tag: int = MPI.ANY_TAG, status: Any = None) -> Any:
        raise freight.FreightError(
            "mprobe/improbe are not available on a freight.integrations.mpi4py.wrap() communicator "
            "(a value may span several messages): use recv, or probe then recv"
        )

    improbe = mprobe


class _Intracomm(_Comm, _pkl5.Intracomm):
    """:func:`wrap`'s intracommunicator."""


class _Intercomm(_Comm, _pkl5.Intercomm):
    """:func:`wrap`'s intercommunicator."""


def install(*, zero_copy: bool = False, **options: Any) -> None:
    """Sends the lowercase methods of every communicator of this process through freight.

    Args:
        zero_copy: for :func:`wrap`'s communicators: arrays received out of band stay on the
            receive buffers as read-only views instead of writable ones.
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
    """``comm`` (default ``MPI.COMM_WORLD``) as a communicator with the same lowercase methods,
    whose values with large frames travel as several messages: the header, then each frame (no
    copy into one buffer). Small values go in one message. Every rank must receive what a wrapped
    communicator sends through a wrapped communicator. Installs freight with the default options
    first if :func:`install` was not called."""
    if not installed():
        install()
    comm = MPI.COMM_WORLD if comm is None else comm
    return _Intercomm(comm) if comm.Is_inter() else _Intracomm(comm)
