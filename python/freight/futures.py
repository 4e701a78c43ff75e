"""``freight.futures.ProcessPoolExecutor``: concurrent.futures' process pool with freight inside,
without touching any global state.

    from freight.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(4) as ex:
        means = list(ex.map(column_means, frames))

Each call's function and arguments travel as one freight value (:func:`freight.dumps_frames`),
and so does its result: frames of 256 KiB and more (``freight.carrier.THRESHOLDS["processes"]``)
carried as a ``freight.carrier.Ref`` through shared memory (written once by the sender, mapped
copy-on-write by the receiver), the rest in the pipe. Because
the function goes through freight's pickle bridge (cloudpickle where plain pickle cannot), lambdas
and closures can be submitted too. Nothing is registered anywhere: other pools and queues in the
program keep pickle's behaviour (:func:`freight.integrations.multiprocessing.install` is the
global form).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import freight
from freight.integrations import _shared_frames

__all__ = ["ProcessPoolExecutor"]


class _Parcel:
    """A value that pickles as freight's frames (large ones in shared memory) and unpickles as the
    value itself."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> Any:
        frames = freight.dumps_frames(self.value)
        # Frames are offered writable (copy-on-write, private to the receiver): numpy arrays and
        # pandas blocks are then used in place; Arrow buffers, which freight copies out of
        # writable memory, cost that copy here (the multiprocessing integration sorts them out
        # per type).
        return _shared_frames.reduce_value(self.value, frames, True, False) or _shared_frames.inband(frames)


def _run(call: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]) -> _Parcel:
    fn, args, kwargs = call
    return _Parcel(fn(*args, **kwargs))


class ProcessPoolExecutor(concurrent.futures.ProcessPoolExecutor):
    """:class:`concurrent.futures.ProcessPoolExecutor` whose calls and results travel through
    freight (same constructor, same semantics: exceptions, ``map`` with ``chunksize`` and
    ``timeout``, cancellation)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        return super().submit(_run, _Parcel((fn, args, kwargs)))
