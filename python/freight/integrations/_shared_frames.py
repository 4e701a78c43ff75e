"""What the multiprocessing, concurrent.futures and joblib integrations share: a value turned
into a pickle reduction whose large frames travel through shared memory (:mod:`freight.shm`),
and the function that rebuilds it on the other side.

The reduction is ``(freight.integrations._shared_frames.load, (header, parts, sources, writable,
zero_copy))``: ``parts`` holds each frame, either its bytes (small frames, in the pickle stream)
or ``None`` (its bytes are in a segment); ``sources`` lists the segments holding the frames left
out, in order, each ``("new", name, layout)`` (written for this message) or ``("lent", loan,
layout)`` (a segment this process received and sends on unchanged, :func:`freight.shm.lend`),
``layout`` being each of its frames' ``(offset, length)``; ``writable`` has one flag per frame
left out, in the same order.
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

    A large frame that lies, unchanged, in a segment this process received is lent on rather than
    written again (:func:`freight.shm.lend`); the others are written into one new segment.
    """
    threshold = _OPTIONS["threshold"]
    header, body = frames[0], frames[1:]
    big = [i for i, f in enumerate(body) if memoryview(f).nbytes >= threshold]
    if not big:
        return None
    lent: dict[int, list[tuple[int, int, int]]] = {}  # mapping start -> [(frame, offset, length)]
    mappings: dict[int, Any] = {}
    to_write = []
    for i in big:
        found = shm.lender(body[i])
        if found is None:
            to_write.append(i)
            continue
        mapping, offset = found
        mappings[mapping.lo] = mapping
        lent.setdefault(mapping.lo, []).append((i, offset, memoryview(body[i]).nbytes))
    sources: list[tuple[Any, ...]] = []
    order: list[int] = []  # frames in the order their views come out of the sources
    for lo, entries in lent.items():
        loan = shm.lend(mappings[lo])
        if loan is None:  # lent before and not yet acknowledged: written like the others
            to_write += [i for i, _, _ in entries]
            continue
        sources.append(("lent", loan, [(off, n) for _, off, n in entries]))
        order += [i for i, _, _ in entries]
    if to_write:
        to_write.sort()
        segment = shm.share([body[i] for i in to_write])
        if segment is None:
            if not sources:
                return None
            # no room for the rest: small enough to matter less, they travel in the stream
        else:
            name, layout = segment
            sources.append(("new", name, layout))
            order += to_write
    shared = set(order)
    # small frames: a copy each into the stream, as pickle makes; None marks a frame in a segment
    parts: list[Any] = [None if i in shared else bytes(f) for i, f in enumerate(body)]
    flags = [writable(i, body[i]) if callable(writable) else writable for i in order]
    return (load, (bytes(header), parts, sources, flags, zero_copy, order))


def inband(frames: Sequence[Any], zero_copy: bool = False) -> tuple[Any, ...]:
    """The reduction with every frame in the pickle stream (small values, or no shared memory)."""
    return (load, (bytes(frames[0]), [bytes(f) for f in frames[1:]], None, [], zero_copy))


def load(
    header: bytes,
    parts: list[Any],
    sources: Any,
    writable: list[bool],
    zero_copy: bool,
    order: Sequence[int] | None = None,
) -> Any:
    """Rebuilds a value sent by :func:`reduce_value` (called by the unpickler)."""
    if sources:
        views: list[Any] = []
        flags = iter(writable)
        for kind, where, layout in sources:
            w = [next(flags) for _ in layout]
            views += shm.open_lent(where, layout, w) if kind == "lent" else shm.attach(where, layout, w)
        parts = list(parts)
        for i, view in zip(order if order is not None else range(len(views)), views):
            parts[i] = view
    return freight.loads_frames([header, *parts], zero_copy=zero_copy, allow_pickle=_OPTIONS["allow_pickle"])
