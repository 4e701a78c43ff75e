"""Measures one workload at one size, for a set of peers, in the process it runs in.

The data is made once; each peer serializes it once and its round trip is checked (a peer that
fails or changes the value is reported, not timed). Then every call is warmed up (set-up such as
lazy imports must not be calibrated or timed), calibrated (a sample of a fast call is a loop of
about ``sample_s``), and all of them are timed together, interleaved: sample ``i`` runs them in
an order rotated by ``i``, so a drift of the machine hits them alike. The number of samples
adapts so that the point costs about ``point_s`` of machine time, between ``min_repeat`` and
``max_repeat``.

:func:`measure_in` is what a child process runs (runner.py decides which points run where);
it takes names, so that only strings and numbers cross the process boundary.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from freight.bench.alloc import arrow_on_malloc, drain_heap, pin_mmap_threshold
from freight.bench.harness import KiB, MiB, Timing, calibrate, time_interleaved, warm_up
from freight.bench.peers import Peer, bound, payload_size, peer_named
from freight.bench.workloads import Workload, workload_named

#: the allocator states a point can be measured in (see alloc.py and runner.py)
WARM, FRESH, ISOLATED = "warm", "fresh", "isolated"


@dataclass(frozen=True)
class Settings:
    quick: bool
    sample_s: float  # one sample of a fast call lasts about this long
    point_s: float  # machine time spent on one workload size, all peers together
    min_repeat: int
    max_repeat: int
    max_bytes: int | None = None
    #: sizes (approximate data bytes) from here on are measured in both allocator states
    states_from: int = 64 * KiB
    #: sizes from here on time each peer alone in a fresh process
    isolate_from: int = 64 * MiB
    #: data sizes from here on get a peak-memory probe (None: no probes, ``--no-memory``)
    memory_from: int | None = 1 * MiB

    @classmethod
    def make(
        cls, quick: bool, max_bytes: int | None = None, repeat: int | None = None, memory: bool = True
    ) -> Settings:
        if quick:
            s = cls(True, sample_s=0.002, point_s=0.15, min_repeat=3, max_repeat=5, max_bytes=max_bytes)
        else:
            s = cls(False, sample_s=0.01, point_s=1.0, min_repeat=3, max_repeat=11, max_bytes=max_bytes)
        if repeat is not None:
            s = replace(s, min_repeat=repeat, max_repeat=repeat)
        if not memory:
            s = replace(s, memory_from=None)
        return s


@dataclass
class PointResult:
    """One point's timings, ``(peer, direction) -> Timing``, with what is needed around them."""

    nbytes: int
    timings: dict[tuple[str, str], Timing] = field(default_factory=dict)
    payload_bytes: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # peer -> why it was not timed


def first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def measure(
    w: Workload,
    size: Any,
    peers: Sequence[Peer],
    settings: Settings,
    before_sample: Callable[[], Any] | None = None,
) -> PointResult:
    """Checks, warms up, calibrates and times ``peers`` on ``w`` at ``size``, here;
    ``before_sample`` runs, untimed, before each sample."""
    obj = w.make(size)
    out = PointResult(w.nbytes(obj))
    fns: dict[str, Callable[[], Any]] = {}
    payloads: dict[str, Any] = {}
    for peer in peers:
        try:
            dumps, loads = peer.codec
            payload = dumps(obj)
            back = loads(payload)
            same = w.equal(obj, back)
        except Exception as exc:  # noqa: BLE001 - a peer that cannot do this workload is reported
            out.failed[peer.name] = f"fails at {w.label(size)}: {first_line(exc)}"
            continue
        del back
        if not same:
            out.failed[peer.name] = f"changes the value at {w.label(size)} (round trip not equal)"
            continue
        payloads[peer.name] = payload
        out.payload_bytes[peer.name] = payload_size(payload)
        fns[f"{peer.name}\0dumps"] = bound(dumps, obj)
        fns[f"{peer.name}\0loads"] = bound(loads, payload)
    gc.collect()
    # The checked call above paid the set-up (imports, registries); the warm-up's fastest call
    # did not, and it alone decides whether a call is slow enough to be a sample by itself.
    fastest = warm_up(fns, max_ns=settings.sample_s * 1e9)
    numbers: dict[str, int] = {}
    per_sample = 0.0
    for key, fn in fns.items():
        if fastest[key] >= 2 * settings.sample_s * 1e9:  # one call is a sample: no calibration run
            numbers[key] = 1
            per_sample += fastest[key]
            continue
        number, per_call = calibrate(fn, settings.sample_s * 1e9)
        numbers[key] = number
        per_sample += number * per_call
    repeat = int(settings.point_s * 1e9 / per_sample) if per_sample else settings.min_repeat
    repeat = max(settings.min_repeat, min(settings.max_repeat, repeat))
    for key, t in time_interleaved(fns, repeat, warmup=0, numbers=numbers, before_sample=before_sample).items():
        name, direction = key.split("\0")
        out.timings[(name, direction)] = t
    del payloads, fns, obj
    gc.collect()
    return out


def measure_in(state: str, workload: str, size: Any, peers: list[str], settings: Settings) -> PointResult:
    """:func:`measure` by names, in a child process put in ``state`` first."""
    if state == FRESH:
        pin_mmap_threshold()
        arrow_on_malloc()
        drain_heap()
        return measure(workload_named(workload), size, [peer_named(p) for p in peers], settings, drain_heap)
    return measure(workload_named(workload), size, [peer_named(p) for p in peers], settings)


__all__ = ["FRESH", "ISOLATED", "WARM", "PointResult", "Settings", "first_line", "measure", "measure_in"]
