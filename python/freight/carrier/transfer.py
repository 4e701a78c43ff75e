"""put, get, release and sweep: a value's frames into a backend and a :class:`Ref` back, and the
threshold policy that decides which frames leave."""

from __future__ import annotations

from typing import Any

from freight import _api
from freight.carrier import ref as _ref
from freight.carrier.backend import Backend, open_backend
from freight.carrier.ref import ALIGN, READ_ONCE, Lifetime, Ref, keys_of
from freight.exceptions import FreightError, OptionError, RefError, RefGoneError

__all__ = ["THRESHOLD", "Frames", "threshold", "carries", "put", "get", "get_frames", "release", "sweep"]

#: Frames of at least this many bytes go to the backend; smaller ones travel inside the reference.
#: One default for every integration, measured on Celery (redis) and Parsl (a store): below it, the
#: round trip to the backend costs more than carrying the bytes in the message does; above it, the
#: engine's own handling of a large message (base64 in JSON, a copy and a pickle per hop) costs
#: several times what serializing does. docs/carrier.md gives the measurements. Integrations may
#: set their own (multiprocessing's shared memory pays off from 64 KiB: no server round trip), and
#: every call may pass ``threshold=``.
THRESHOLD = 1 << 20


class Frames(list):  # type: ignore[type-arg]
    """Marks what :func:`put` is given as frames already encoded (``freight.dumps_frames``'
    output, or ``[payload]`` for one ``freight.dumps`` payload) rather than a value to encode."""


def threshold(value: int | None = None) -> int:
    """The threshold in force: ``value`` (an integration's or a call's) or :data:`THRESHOLD`."""
    if value is None:
        return THRESHOLD
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
) -> Ref:
    """Carries ``value`` (or :class:`Frames`) out of band: its frames of at least ``threshold``
    bytes (default :data:`THRESHOLD`) are stored in ``backend`` as one object, the others travel
    inside the returned :class:`Ref`. ``codec`` (default ``freight.DEFAULT``) encodes the value
    and, when it has a key, signs the reference. Nothing is stored when no frame is that large.

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
    entries: list[tuple[Any, int]] = []
    parts: list[Any] = []
    size = 0
    for v in views:
        if carries(v.nbytes, limit):
            pad = -size % ALIGN
            if pad:
                parts.append(bytes(pad))
            parts.append(v)
            size += pad + v.nbytes
            entries.append((None, v.nbytes))
        else:
            entries.append((v.tobytes(), v.nbytes))
    expires = _ref.now_ms() + int(life.ttl * 1000) if life.ttl else 0
    key = ""
    if size:
        key = backend.new_key(expires)
        try:
            backend.put_frames(key, parts, ttl=life.ttl)
        except RefError:
            raise
        except Exception as exc:  # noqa: BLE001 - the backend's own errors: redis, OSError, StorageError
            _quietly(backend.delete, key)
            raise _failed(backend, f"store {size} bytes", exc) from exc
    signing = keys_of(codec.options.key)
    return Ref.build(backend.name, backend.location, key, life, expires, size, entries, signing[0] if signing else None)


def _resolve(ref: Any, backend: Backend | None, codec: Any) -> tuple[Ref, Backend | None]:
    """The parsed, checked reference and its backend: the signature first, then whose it is."""
    ref = ref if isinstance(ref, Ref) else Ref.from_bytes(ref)
    ref.check(codec.options.key)
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
    if not backend.owns(ref.key):
        raise RefError(
            f"this reference names the key {ref.key[:200]!r}, outside the backend's namespace {backend.namespace!r}: "
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
        return [inline for inline, _ in ref.frames]
    assert backend is not None
    if ref.expired():
        _quietly(backend.delete, ref.key)
        raise RefGoneError(
            f"the value this reference names ({ref.backend} {ref.key}) expired: its ttl has passed and it was "
            "removed; put it again with a longer ttl"
        )
    consume = ref.lifetime.kind == "read-once"
    try:
        data = backend.get(ref.key, consume=consume)
    except Exception as exc:  # noqa: BLE001 - the backend's own errors
        raise _failed(backend, f"read {ref.key}", exc) from exc
    if data is None:
        raise RefGoneError(_gone(ref))
    whole = _bytes(data)
    if whole.nbytes != ref.size:
        if not consume:
            _quietly(backend.delete, ref.key)
        raise RefError(
            f"the object {ref.key} in the {ref.backend} backend holds {whole.nbytes} bytes, not the {ref.size} "
            "its reference names: it was truncated or replaced; nothing of it was decoded. Put the value again"
        )
    frames, at = [], 0
    for inline, n in ref.frames:
        if inline is not None:
            frames.append(inline)
        else:
            at += -at % ALIGN
            frames.append(whole[at : at + n])
            at += n
    return frames


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
        try:
            backend.delete(ref.key)
        except Exception as exc:  # noqa: BLE001
            raise _failed(backend, f"delete {ref.key}", exc) from exc


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
