"""What the multiprocessing, concurrent.futures and joblib integrations share: a value turned
into a pickle reduction whose large frames travel through shared memory (:mod:`freight.shm`),
and the function that rebuilds it on the other side.

The reduction is ``(freight.integrations._handoff.load, (header, parts, segment, writable,
zero_copy))``: ``parts`` holds each frame, either its bytes (small frames, in the pickle stream)
or ``None`` (its bytes are in the segment); ``segment`` is ``(name, [(offset, length), ...])``
for the frames left out, or None.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import freight
from freight import shm

__all__ = ["reduce_value", "inband", "load", "options", "set_options"]

_LOCK = threading.Lock()
# What this process does when it *receives*: the sender's message cannot loosen it.
_OPTIONS: dict[str, Any] = {"allow_pickle": True, "threshold": shm.THRESHOLD, "trusted": ()}


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
    threshold = _OPTIONS["threshold"]
    header, body = frames[0], frames[1:]
    big = [i for i, f in enumerate(body) if memoryview(f).nbytes >= threshold]
    if not big:
        return None
    segment = shm.share([body[i] for i in big])
    if segment is None:
        return None
    name, layout = segment
    shared = set(big)
    # small frames: a copy each into the stream, as pickle makes; None marks a frame in the segment
    parts: list[Any] = [None if i in shared else bytes(f) for i, f in enumerate(body)]
    flags = [writable(i, body[i]) if callable(writable) else writable for i in big]
    return (load, (bytes(header), parts, (name, layout), flags, zero_copy))


def inband(frames: Sequence[Any], zero_copy: bool = False) -> tuple[Any, ...]:
    """The reduction with every frame in the pickle stream (small values, or no shared memory)."""
    return (load, (bytes(frames[0]), [bytes(f) for f in frames[1:]], None, [], zero_copy))


def load(header: bytes, parts: list[Any], segment: Any, writable: list[bool], zero_copy: bool) -> Any:
    """Rebuilds a value sent by :func:`reduce_value` (called by the unpickler)."""
    if segment is not None:
        name, layout = segment
        views = iter(shm.attach(name, layout, writable))
        parts = [next(views) if p is None else p for p in parts]
    return freight.loads_frames([header, *parts], zero_copy=zero_copy, allow_pickle=_OPTIONS["allow_pickle"])
