"""What the multiprocessing, concurrent.futures and joblib integrations share: a value turned
into a pickle reduction that carries a carrier ``Ref`` (:mod:`freight.carrier`, its
``SharedMemory`` backend, read once), and the function that gets it back on the other side.

The reduction is ``(freight.integrations._shared_frames.load, (ref, zero_copy))``: ``ref`` is the
reference's wire form, holding the small frames and naming the segment with the large ones (and
the received segments lent on unchanged); the receiver maps them, unlinks the segment as it opens
it and acknowledges the loans. A value with no large frame, or one shared memory cannot take
(none, or full), travels as :func:`inband`: every frame in the pickle stream.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import freight
from freight import carrier
from freight.exceptions import RefError

__all__ = ["reduce_value", "inband", "load", "options", "set_options"]


class _Catching(threading.local):
    failed: list[Exception] | None = None


class _Sent(threading.local):
    # class attributes: a thread's first read finds them, instead of raising AttributeError inside
    # getattr(local, name, default) (0.5 µs, twice on every message a process pool pickles)
    n = 0


_LOCK = threading.Lock()
# What this process does when it *receives*: the sender's message cannot loosen it.
_OPTIONS: dict[str, Any] = {"allow_pickle": True, "threshold": carrier.THRESHOLDS["processes"], "trusted": ()}
_BACKEND = carrier.SharedMemory()
#: While ``CATCHING.failed`` is a list (the multiprocessing integration's ``loads`` sets it), a
#: reference that cannot be read is appended to it instead of raised: that ``loads`` fails the
#: whole message in the way its receiver can report (a Pool's handler threads stop at any error).
CATCHING = _Catching()
#: Per thread, how many shared-memory references reduce_value has handed out (``SENT.n``): the
#: multiprocessing integration's ``dumps`` marks a message that holds any, so that its ``loads``
#: sets up for them (CATCHING, the tracker's held-back messages) only then.
SENT = _Sent()


def sent() -> int:
    return SENT.n


def options() -> dict[str, Any]:
    return dict(_OPTIONS)


def set_options(**kwargs: Any) -> None:
    with _LOCK:
        _OPTIONS.update(kwargs)


def reduce_value(
    obj: Any,
    frames: Sequence[Any],
    writable: Callable[[int, Any], bool] | bool,
    zero_copy: bool,
) -> tuple[Any, ...] | None:
    """The reduction of ``obj`` from its ``freight.dumps_frames`` output, or None when no frame
    reaches the threshold or shared memory cannot take them (the caller keeps pickle's way).

    ``writable(i, frame)`` (or one bool for every frame) says whether frame ``i`` backs a writable
    array on the sender's side: the receiver then gets a writable, private (copy-on-write) view
    that freight's ``loads`` uses in place; a read-only one otherwise (Arrow buffers, read-only
    arrays), which freight's Arrow path keeps without the copy it makes of writable memory.
    """
    limit = _OPTIONS["threshold"]
    if not any(memoryview(f).nbytes >= limit for f in frames):  # limit ≥ 1 (install checks it)
        return None
    try:
        ref = carrier.put(carrier.Frames(frames), _BACKEND, threshold=limit, writable=writable)
    except RefError:
        return None  # /dev/shm missing or full: the pipe, as without freight (nothing was left behind)
    SENT.n += 1
    return (load, (bytes(ref), zero_copy))


def inband(frames: Sequence[Any], zero_copy: bool = False) -> tuple[Any, ...]:
    """The reduction with every frame in the pickle stream (small values, or no shared memory)."""
    return (load, (None, zero_copy, [bytes(f) for f in frames]))


def load(ref: bytes | None, zero_copy: bool, frames: list[Any] | None = None, *older: Any) -> Any:
    """Rebuilds a value sent by :func:`reduce_value` or :func:`inband` (called by the unpickler).

    Raises:
        freight.RefError: the reference is not one, not this machine's, or names something outside
            freight's segments; ``RefGoneError`` when its segment is gone (read already, or its
            program ended, or ``/dev/shm`` was cleaned). Nothing is left mapped or in ``/dev/shm``.
    """
    if older:  # (header, parts, sources, writable, zero_copy[, order]): freight before the carrier
        raise RefError(
            "this value was sent by an older freight (its own shared-memory format, before the carrier's "
            "references): run the same freight version in every process of the program"
        )
    if ref is not None:
        try:
            frames = carrier.get_frames(ref, _BACKEND)
        except RefError as exc:
            failed = CATCHING.failed
            if failed is None:
                raise
            failed.append(exc)
            return None
    return freight.loads_frames(frames, zero_copy=zero_copy, allow_pickle=_OPTIONS["allow_pickle"])
