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
:data:`INLINE_LIMIT`: one freight payload, as the lowercase methods do), and otherwise in two: the
frame table with freight's header, then every frame together, read by MPI from where it lies (a
datatype over the frames' addresses) into one receive buffer that the rebuilt arrays view. Its
collectives are pkl5's (header and frames as separate messages).

Every rank must install with the same options (mpi4py has one ``MPI.pickle`` per process and no
handshake): a rank without freight reading a freight message raises pickle's ``UnpicklingError``.
"""

from __future__ import annotations

import struct
import threading
from typing import Any

import freight
from freight import carrier
from freight.carrier.ref import ALIGN, layout
from freight.integrations import check_options, flag

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
#: (one freight payload, copied once on each side like pickle's), larger ones out of band: the
#: carrier's threshold for ``"mpi4py"`` (``freight.carrier.THRESHOLDS``). Measured on a 100k-row
#: DataFrame (docs/integrations/mpi4py.md): sending its frames as one message of an MPI derived
#: datatype took far longer than one contiguous message in band, which MPI moves faster.
INLINE_LIMIT = carrier.threshold(integration="mpi4py")

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"codec": None, "pkl5": None}
_MAGIC = b"\x89FRT"  # how every freight payload starts
# The first message of a value sent out of band: this marker, the number of frames and their
# lengths (int64), then the header; the frames follow together as the second message.
_OOB_MARK = b"\x89FRTOOB"
_BLOCK = 1 << 30
_SEND, _RECV, _ANY_SOURCE, _ANY_TAG = MPI.Comm.Send, MPI.Comm.recv, MPI.ANY_SOURCE, MPI.ANY_TAG  # looked up once
_SEND_ONE = MPI.Comm.send  # mpi4py's lowercase send: MPI.pickle (freight's codec) in C


class FreightPickle:
    """What mpi4py calls to turn an object into bytes and back: ``dumps``/``loads`` for the
    lowercase methods (``MPI.pickle``), ``dumps_oob``/``loads_oob`` for ``mpi4py.util.pkl5``
    (freight's header as the data, its frames as the buffers, each sent as its own message)."""

    def __init__(self, codec: freight.Freight, zero_copy: bool = False) -> None:
        self.codec = codec
        self.zero_copy = zero_copy
        self._decode = codec.loads

    def dumps_oob(self, obj: Any) -> tuple[Any, list[Any]]:
        frames = self.codec.dumps_frames(obj)
        return frames[0], [_bytes_view(frame) for frame in frames[1:]]

    def loads_oob(self, data: Any, bufs: Any) -> Any:
        # The received buffers belong to this message alone: zero_copy=True keeps arrays on them
        # (read-only views, no copy); by default arrays are views of these writable buffers too,
        # as pickle 5 returns them (tables' buffers are copied, so that nothing changes them later).
        return self.codec.loads_frames([data, *bufs], zero_copy=self.zero_copy)

    def dumps(self, obj: Any) -> bytes:
        return self.codec.dumps(obj)  # bytes, which mpi4py requires

    def loads(self, data: Any) -> Any:
        # mpi4py frees the receive buffer of a lowercase call as soon as loads returns, whatever
        # still refers to it: copy=True, so that nothing decoded views it. Each array and column is
        # copied out once, in parallel (measured faster than one copy of the whole message that the
        # arrays then view, most of all for large arrays: docs/integrations/mpi4py.md), and builtins
        # decode on freight's fast path straight from the buffer (no bytes copy first: a tiny
        # message costs about what pickle's does).
        try:
            return self._decode(data, copy=True)
        except freight.FreightError:
            if bytes(memoryview(data)[: len(_OOB_MARK)]) == _OOB_MARK:  # a wrap() value's first message
                raise _FramesFollow(bytes(data)) from None
            raise

    def receive_frames(self, comm: Any, source: int, tag: int, first: bytes) -> Any:
        """The rest of a value a :func:`wrap` communicator sent out of band, from ``source`` with
        ``tag``: ``first`` (its first message) holds the frames' lengths and the header; the
        frames follow in one message, which lands in one buffer, each frame at a 64-byte aligned
        place (arrays then view it)."""
        lengths, header = _unpack_table(first)
        places, size = layout(lengths)  # the carrier's layout: back to back, each on an ALIGN boundary
        buf = MPI.buffer.allocate(size + ALIGN)
        start = -MPI.Get_address(buf) % ALIGN
        offsets = [start + p for p in places]
        datatype = _frames_type(lengths, offsets)
        try:
            MPI.Comm.Recv(comm, [buf, 1, datatype], source, tag)
        finally:
            datatype.Free()
        view = memoryview(buf)
        return self.loads_oob(header, [view[o : o + n] for o, n in zip(offsets, lengths)])


class _FramesFollow(freight.DeserializationError):
    """What :meth:`FreightPickle.loads` raises on the first message of a value a :func:`wrap`
    communicator sent out of band (its frames follow as a second message). A wrapped receive
    catches it and receives the frames; any other receive leaves it to its caller, whom the
    message tells what to do. Raised rather than flagged: a receive then needs no thread-local
    context set around it (measured ~100-200 ns of a tiny message's receive)."""

    def __init__(self, first: bytes) -> None:
        super().__init__(
            "this message was sent out of band by a freight.integrations.mpi4py.wrap() communicator "
            "(its frames follow as a second message): receive it through wrap(comm) too"
        )
        self.first = first


def _bytes_view(frame: Any) -> memoryview:
    view = memoryview(frame)
    return view if view.ndim == 1 and view.format == "B" else view.cast("B")  # MPI sends len(view) bytes


def _frames_type(lengths: list[int], displacements: list[int]) -> Any:
    """An MPI datatype of ``lengths`` bytes at ``displacements`` (addresses, or offsets into one
    buffer), in blocks of at most 1 GiB (MPI-3 counts are C ints): several frames, one message."""
    sizes, places = [], []
    for length, place in zip(lengths, displacements):
        for offset in range(0, length, _BLOCK):
            sizes.append(min(_BLOCK, length - offset))
            places.append(place + offset)
    return MPI.BYTE.Create_hindexed(sizes, places).Commit()


def _pack_table(header: memoryview, bufs: list[memoryview]) -> bytes:
    lengths = [len(b) for b in bufs]
    return b"".join((_OOB_MARK, struct.pack(f"<q{len(lengths)}q", len(lengths), *lengths), header))


def _unpack_table(first: bytes | bytearray) -> tuple[list[int], bytes]:
    at = len(_OOB_MARK)
    try:
        (count,) = struct.unpack_from("<q", first, at)
        lengths = list(struct.unpack_from(f"<{count}q", first, at + 8))
    except (struct.error, ValueError, MemoryError):
        raise freight.DeserializationError(
            "a wrap() message's frame table is truncated: the sender is not freight's"
        ) from None
    return lengths, bytes(first[at + 8 + 8 * count :])


def _messages(obj: Any) -> tuple[bytes | memoryview, list[memoryview]]:
    """What a :func:`wrap` communicator sends for ``obj``: (first message, frames). Small frames
    (or none): one freight payload and no frames. Otherwise the frame table with the header,
    then the frames, which go together as a second message."""
    frames = _STATE["codec"].dumps_frames(obj)
    if len(frames) == 1:
        return frames[0], []  # the header of a value without frames is the whole payload
    return _with_frames(obj, frames)


def _with_frames(obj: Any, frames: list[Any]) -> tuple[bytes | memoryview, list[memoryview]]:
    """:func:`_messages` of a value whose ``dumps_frames`` gave frames besides the header."""
    bufs = [_bytes_view(frame) for frame in frames[1:]]
    if sum(len(b) for b in bufs) < INLINE_LIMIT:
        return _STATE["codec"].dumps(obj), []
    return _pack_table(_bytes_view(frames[0]), bufs), bufs


def _send(comm: Any, send: Any, obj: Any, dest: int, tag: int) -> list[Any]:
    """Sends ``obj`` with ``send(comm, message, dest, tag)``: one message, or two back to back.
    Returns what must stay alive until the sends complete."""
    first, bufs = _messages(obj)
    if not bufs:
        send(comm, [first, MPI.BYTE], dest, tag)
        return [first]
    _send_frames(comm, send, first, bufs, dest, tag)
    return [first, *bufs]


def _send_frames(comm: Any, send: Any, first: Any, bufs: list[memoryview], dest: int, tag: int) -> None:
    """The frame table, then the frames in one message (under mpi4py's send lock, so that another
    thread's messages to the same rank and tag do not come between them)."""
    layout = _frames_type([len(b) for b in bufs], [MPI.Get_address(b) for b in bufs])
    try:
        with MPI._comm_lock(comm, "send"):
            send(comm, [first, MPI.BYTE], dest, tag)
            send(comm, [MPI.BOTTOM, 1, layout], dest, tag)  # the frames where they are: no copy
    finally:
        layout.Free()  # MPI keeps it for the sends already started


def _isend(comm: Any, isend: Any, obj: Any, dest: int, tag: int) -> Any:
    requests: list[Any] = []
    alive = _send(comm, lambda c, buf, d, t: requests.append(isend(c, buf, d, t)), obj, dest, tag)
    request = _pkl5.Request(requests)
    request._freight_buffers = alive  # MPI reads the frames by address: keep them until done
    return request


def _recv(comm: Any, buf: Any = None, source: int = MPI.ANY_SOURCE, tag: int = MPI.ANY_TAG, status: Any = None) -> Any:
    """mpi4py's own receive (one message, decoded by :meth:`FreightPickle.loads`), which goes on
    to receive the frames when the message says they follow (under a receive lock of the
    communicator, so that another thread does not take them). :func:`wrap`'s ``recv`` itself (no
    method calling it: one Python call fewer on every receive)."""
    with comm._freight_recv_lock:
        if status is None and (source == _ANY_SOURCE or tag == _ANY_TAG):
            # the receive names no source or no tag: the status says which, if frames follow
            # (the communicator's own, reused: it is read only under this lock)
            status = comm._freight_status
        try:
            return _RECV(comm, buf, source, tag, status)
        except _FramesFollow as follow:
            if status is not None:
                source, tag = status.Get_source(), status.Get_tag()
            return _pkl5.pickle.receive_frames(comm, source, tag, follow.first)


_ATOMS = frozenset({int, float, bool, complex, type(None)})
_SHORT = (str, bytes)


def _one_message(obj: Any) -> bool:
    """Whether ``obj`` is a scalar, a short string, or a short tuple of those: a value that has no
    frame, which mpi4py's own lowercase ``send`` (one freight payload, encoded and sent in C)
    sends for about 450 ns less than the Python path that looks for frames."""
    items = obj if type(obj) is tuple and len(obj) <= 8 else (obj,)
    for x in items:
        t = type(x)
        if t not in _ATOMS and not (t in _SHORT and len(x) < 4096):
            return False
    return True


class _Comm(_pkl5.Comm):
    """:func:`wrap`'s communicator: pkl5's, with point-to-point methods that send small values in
    one message (pkl5 always sends at least two: lengths, then data). Collectives are pkl5's."""

    def __init__(self, comm: Any = None) -> None:
        super().__init__()
        # looked up once (mpi4py's table costs a global lock per lookup); not mpi4py's own "recv"
        # lock, which its receive takes itself when MPI has no Mprobe
        self._freight_recv_lock = MPI._comm_lock(self, "freight recv")
        self._freight_status = MPI.Status()

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        if _one_message(obj):
            return _SEND_ONE(self, obj, dest, tag)
        # _messages inlined for the common case, a value without frames (one payload, one
        # message): a tiny value's send is mostly the Python calls around MPI's
        frames = _STATE["codec"].dumps_frames(obj)
        if len(frames) == 1:
            return _SEND(self, frames[0], dest, tag)
        first, bufs = _with_frames(obj, frames)
        if bufs:
            _send_frames(self, _SEND, first, bufs, dest, tag)
        else:
            _SEND(self, first, dest, tag)

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

    recv = _recv

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
    check_options("freight.integrations.mpi4py.install", options, takes=("zero_copy",))
    zero_copy = flag("zero_copy", zero_copy, False)
    codec = freight.DEFAULT.replace(**options)
    oob = FreightPickle(codec, zero_copy=zero_copy)
    with _LOCK:
        MPI.pickle.__init__(codec.dumps, oob.loads)  # the codec's own dumps: no Python frame
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
