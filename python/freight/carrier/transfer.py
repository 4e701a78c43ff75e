"""put, get, release and sweep: a value's frames into a backend and a :class:`Ref` back, and the
threshold policy that decides which frames leave."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from freight import _api
from freight.carrier import ref as _ref
from freight.carrier.backend import Backend, open_backend
from freight.carrier.ref import ALIGN, READ_ONCE, Frame, Lifetime, Ref, keys_of
from freight.exceptions import FreightError, OptionError, RefError, RefGoneError

__all__ = [
    "THRESHOLD",
    "THRESHOLDS",
    "COMPANION",
    "Frames",
    "threshold",
    "carries",
    "put",
    "get",
    "get_frames",
    "release",
    "sweep",
]

#: Frames of at least this many bytes go to the backend; smaller ones travel inside the reference.
#: One default for every integration, measured on Celery (redis) and Parsl (a store): below it, the
#: round trip to the backend costs more than carrying the bytes in the message does; above it, the
#: engine's own handling of a large message (base64 in JSON, a copy and a pickle per hop) costs
#: several times what serializing does. docs/carrier.md gives the measurements. Every call may pass
#: ``threshold=``, and an integration whose transport measured otherwise has its override below.
THRESHOLD = 1 << 20

#: The integrations whose threshold differs from :data:`THRESHOLD` (or names it), each for a
#: measured reason (docs/carrier.md#the-threshold); read through ``threshold(integration=...)``.
THRESHOLDS: dict[str, int] = {
    # multiprocessing, concurrent.futures, joblib: no server between the processes, but a segment
    # has a fixed cost (create, write, map, the resource tracker's wake-ups) that the pipe does not;
    # the pipe is faster up to 128 KiB, even at 192-256 KiB, shared memory faster from there on.
    "processes": 256 << 10,
    # mpi4py's wrap(comm): frames of a value this large leave the one contiguous message for a
    # second one read where they lie; below it MPI moves one contiguous message faster.
    "mpi4py": 8 << 20,
    # Dask's per-type handlers and Ray's polars registration: values smaller than this (their
    # engine's size estimate) keep the engine's own path, whose fixed cost per value is lower.
    "dask": THRESHOLD,
    "ray": THRESHOLD,
    # Ray: frames smaller than this stay in the pickle stream; an out-of-band buffer in Ray's
    # object store costs more than copying a few KiB.
    "ray-frames": 4 << 10,
}


#: Once a frame of a value reaches the threshold and the value leaves, every other frame of at
#: least this many bytes is stored with it, in the same object: that object's fixed cost (a
#: segment, a round trip) is paid already, and a frame left in the reference is copied into it,
#: through the engine's message and out again. Measured on a process pool echoing 100k-row
#: DataFrames (4.2 MB in frames; a 100 KB one, the categorical codes, stayed in the message and
#: crossed the 64 KiB pipe in pieces): 3.0-3.25 ms a task before, 2.05-2.41 ms with it stored.
COMPANION = 4 << 10


class Frames(list):  # type: ignore[type-arg]
    """Marks what :func:`put` is given as frames already encoded (``freight.dumps_frames``'
    output, or ``[payload]`` for one ``freight.dumps`` payload) rather than a value to encode."""


def threshold(value: int | None = None, *, integration: str | None = None) -> int:
    """The threshold in force: ``value`` (an installation's or a call's), else ``integration``'s
    entry in :data:`THRESHOLDS`, else :data:`THRESHOLD`."""
    if value is None:
        if integration is None:
            return THRESHOLD
        if integration not in THRESHOLDS:
            raise OptionError(f"no carrier threshold for {integration!r}: one of {', '.join(THRESHOLDS)}")
        return THRESHOLDS[integration]
    if type(value) is not int or value < 0:
        raise OptionError(f"a carrier threshold is a size in bytes (an int ≥ 0), not {value!r}")
    return value


_threshold = threshold


def _bytes(buf: Any) -> memoryview:
    view = memoryview(buf)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def carries(nbytes: int, limit: int | None = None) -> bool:
    """Whether a frame (or payload) of ``nbytes`` leaves the message under the threshold policy."""
    return nbytes > 0 and nbytes >= threshold(limit)


def _check_backend(backend: Any) -> Backend:
    if not isinstance(backend, Backend):
        raise OptionError(
            f"the carrier needs a freight.carrier.Backend (SharedMemory(), StoreBackend(url), RedisBackend(url) "
            f"or a subclass of your own), not {type(backend).__name__}"
        )
    return backend


def _failed(backend: Backend, doing: str, exc: BaseException) -> RefError:
    return RefError(
        f"the carrier's {backend.name} backend at {backend.location} failed to {doing} ({type(exc).__name__}: "
        f"{exc}): check that this process reaches it (running, address, credentials, room left)"
    )


def put(
    value: Any,
    backend: Backend,
    *,
    lifetime: Lifetime | str = READ_ONCE,
    threshold: int | None = None,
    codec: Any = None,
    writable: bool | Callable[[int, Any], bool] = True,
) -> Ref:
    """Carries ``value`` (or :class:`Frames`) out of band: its frames of at least ``threshold``
    bytes (default :data:`THRESHOLD`) are stored in ``backend`` as one object, the others travel
    inside the returned :class:`Ref`. ``codec`` (default ``freight.DEFAULT``) encodes the value
    and, when it has a key, signs the reference. Nothing is stored when no frame is that large.
    ``writable`` (one flag, or ``writable(i, frame)``) False: the reader gets that stored frame
    read-only (a read-only array's, Arrow memory, which freight copies out of writable buffers). A
    frame the backend already holds for this process unchanged (shared memory received and sent
    on: ``Backend.lend``) is lent, not stored again.

    Raises:
        RefError: the backend could not take it (unreachable, full); nothing is left behind.
        OptionError: a lifetime, threshold or backend that is not one.
    """
    backend = _check_backend(backend)
    life = Lifetime.of(lifetime)
    limit = _threshold(threshold)
    codec = _api.DEFAULT if codec is None else codec
    frames = list(value) if isinstance(value, Frames) else codec.dumps_frames(value)
    views = [_bytes(f) for f in frames]
    large = [i for i, v in enumerate(views) if v.nbytes and v.nbytes >= limit]  # carries(), inlined
    if large and limit > COMPANION:  # the value leaves: its frames of a page or more go with it
        large = [i for i, v in enumerate(views) if v.nbytes >= COMPANION]
    held = backend.lend([frames[i] for i in large]) if large else []
    objects: dict[str, tuple[int, int]] = {}  # lent object key -> (its index from 1, its size)
    chosen = set(large)
    entries: list[Any] = [None if i in chosen else (v.tobytes(), v.nbytes) for i, v in enumerate(views)]
    parts: list[Any] = []
    size = 0
    for i, lent in zip(large, held):
        v = views[i]
        read_only = not (writable(i, frames[i]) if callable(writable) else writable)
        if lent is not None:
            where, offset, whole = lent
            source = objects.setdefault(where, (len(objects) + 1, whole))[0]
            entries[i] = Frame(None, v.nbytes, source, offset, read_only)
            continue
        pad = -size % ALIGN
        if pad:
            parts.append(bytes(pad))
        parts.append(v)
        size += pad + v.nbytes
        entries[i] = Frame(None, v.nbytes, 0, 0, read_only)
    expires = _ref.now_ms() + int(life.ttl * 1000) if life.ttl else 0
    key = ""
    if size:
        key = backend.new_key(expires)
        try:
            backend.put_frames(key, parts, ttl=life.ttl)
        except Exception as exc:  # noqa: BLE001 - the backend's own errors: redis, OSError, StorageError
            for k in [key, *objects]:  # a failed put leaves nothing: no segment, no loan pinned
                _quietly(backend.delete, k)
            if isinstance(exc, RefError):
                raise
            raise _failed(backend, f"store {size} bytes", exc) from exc
    signing = keys_of(codec.options.key)
    lent_objects = [(k, n) for k, (_, n) in objects.items()]
    return Ref.build(backend.name, backend.location, key, life, expires, size, entries,
                     signing[0] if signing else None, lent_objects)  # fmt: skip


def _resolve(ref: Any, backend: Backend | None, codec: Any) -> tuple[Ref, Backend | None]:
    """The parsed, checked reference and its backend: the signature first, then whose it is."""
    ref = ref if isinstance(ref, Ref) else Ref.from_bytes(ref)
    ref.check(codec.options.key)
    ref.validate()
    if not ref.stored:
        return ref, backend
    if backend is None:
        backend = open_backend(ref.backend, ref.location)
    backend = _check_backend(backend)
    if ref.backend != backend.name or ref.location != backend.location:
        raise RefError(
            f"this reference names the {ref.backend} backend at {ref.location}, not this {backend.name} backend at "
            f"{backend.location}: open it with the backend it was put in"
        )
    for key in [ref.key] * (ref.size > 0) + [k for k, _ in ref.objects]:
        if backend.owns(key):
            continue
        raise RefError(
            f"this reference names the key {key[:200]!r}, outside the backend's namespace {backend.namespace!r}: "
            "refused (a reference may only reach the carrier's own objects)"
        )
    return ref, backend


def get_frames(ref: Any, backend: Backend | None = None, *, codec: Any = None) -> list[Any]:
    """The frames a reference carries (views of what the backend returned; nothing decoded).
    The reference is checked first (signature, backend, namespace, expiry); a read-once one is
    removed by this read."""
    codec = _api.DEFAULT if codec is None else codec
    ref, backend = _resolve(ref, backend, codec)
    if not ref.stored:
        return [f.inline for f in ref.frames]
    assert backend is not None
    if ref.expired():
        _quietly(backend.delete, ref.key)
        raise RefGoneError(
            f"the value this reference names ({ref.backend} {ref.key}) expired: its ttl has passed and it was "
            "removed; put it again with a longer ttl"
        )
    consume = ref.lifetime.kind == "read-once"
    wholes = [_fetch(backend, ref, key, size, consume) if size else None
              for key, size in [(ref.key, ref.size), *ref.objects]]  # fmt: skip
    frames = []
    for f in ref.frames:
        if f.inline is not None:
            frames.append(f.inline)
        else:
            frame = wholes[f.source][f.offset : f.offset + f.length]  # type: ignore[index]
            frames.append(frame.toreadonly() if f.read_only else frame)
    return frames


def _fetch(backend: Backend, ref: Ref, key: str, size: int, consume: bool) -> memoryview:
    """One object a reference names, checked to be the size it names."""
    try:
        data = backend.get(key, consume=consume)
    except RefError:
        raise
    except Exception as exc:  # noqa: BLE001 - the backend's own errors
        raise _failed(backend, f"read {key}", exc) from exc
    if data is None:
        raise RefGoneError(_gone(ref))
    whole = _bytes(data)
    if whole.nbytes != size:
        if not consume:
            _quietly(backend.delete, key)
        raise RefError(
            f"the object {key} in the {ref.backend} backend holds {whole.nbytes} bytes, not the {size} "
            "its reference names: it was truncated or replaced; nothing of it was decoded. Put the value again"
        )
    return whole


def get(ref: Any, backend: Backend | None = None, *, codec: Any = None, **options: Any) -> Any:
    """The value a reference carries, decoded by ``codec`` (default ``freight.DEFAULT``: its key
    checks the reference's signature, then the payload's) with ``options`` of ``loads_frames``
    (``zero_copy``, ...). ``backend``: where it was put (default: the one the reference names,
    opened from its location).

    Raises:
        RefSignatureError: unsigned or forged, where the codec has a key; nothing was fetched.
        RefGoneError: expired, read already (read-once), released, or lost by its backend.
        RefError: not a reference, another backend's or namespace's, a backend gone or failing.
    """
    codec = _api.DEFAULT if codec is None else codec
    frames = get_frames(ref, backend, codec=codec)
    if len(frames) == 1:
        return codec.loads(frames[0], **options)
    return codec.loads_frames(frames, **options)


def release(ref: Any, backend: Backend | None = None, *, codec: Any = None) -> None:
    """Removes what a reference stored (its lifetime ends now); releasing twice is no error. The
    reference is checked as :func:`get` checks it, so a forged one removes nothing."""
    codec = _api.DEFAULT if codec is None else codec
    ref, backend = _resolve(ref, backend, codec)
    if ref.stored and backend is not None:
        for key in [ref.key] * (ref.size > 0) + [k for k, _ in ref.objects]:
            try:
                backend.delete(key)
            except Exception as exc:  # noqa: BLE001
                raise _failed(backend, f"delete {key}", exc) from exc


def sweep(backend: Backend) -> int:
    """Removes the objects of ``backend`` whose ttl has passed (their keys carry their expiry);
    returns how many. Backends that expire values themselves (redis) have nothing to sweep."""
    now, n = _ref.now_ms(), 0
    for key in list(_check_backend(backend).keys()):
        _, _, tail = key.rpartition(".e")
        if backend.owns(key) and tail.isdigit() and int(tail) <= now:
            _quietly(backend.delete, key)
            n += 1
    return n


def _gone(ref: Ref) -> str:
    why = {
        "read-once": "it is read-once and was read already",
        "ttl": "its ttl passed",
        "until-released": "it was released",
        "task": "the task that owned it ended and released it",
    }[ref.lifetime.kind]
    return (
        f"the value this reference names ({ref.backend} {ref.location} {ref.key}) is gone: {why}, or its "
        "backend lost it (the program that put it ended, the backend was cleaned); put it again"
    )


def _quietly(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except (FreightError, OSError, Exception):  # noqa: BLE001 - clean-up on a path that already fails
        pass
