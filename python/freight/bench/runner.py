"""Runs workloads × sizes × peers and collects every measurement into one results dict.

For each workload and size the data is made once; each applicable peer serializes it once and
its round trip is checked (a peer that fails or changes the value is reported, not timed).
Then every peer's ``dumps`` and ``loads`` are timed together, interleaved: sample ``i`` runs all
of them in an order rotated by ``i``. A sample of a fast call is a calibrated loop of about
``sample_s``; the number of samples adapts so that one size costs about ``point_s`` of machine
time, never fewer than ``min_repeat`` nor more than ``max_repeat``.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

from freight.bench.harness import calibrate, ncpu, time_interleaved
from freight.bench.peers import PEERS, Peer, for_kind, payload_size
from freight.bench.peers import missing as modules_missing
from freight.bench.workloads import Workload

SCHEMA = "freight-bench/1"

#: distributions whose versions a results file records, when installed
VERSIONED = (
    "freight", "numpy", "pandas", "polars", "pyarrow", "torch", "cloudpickle", "dill", "proxystore",
    "distributed", "pyfory", "msgspec", "safetensors", "lz4", "zstandard", "blosc2", "matplotlib",
)  # fmt: skip


@dataclass(frozen=True)
class Settings:
    quick: bool
    sample_s: float  # one sample of a fast call lasts about this long
    point_s: float  # machine time spent on one workload size, all peers together
    min_repeat: int
    max_repeat: int
    max_bytes: int | None = None

    @classmethod
    def make(cls, quick: bool, max_bytes: int | None = None, repeat: int | None = None) -> Settings:
        if quick:
            s = cls(True, sample_s=0.002, point_s=0.15, min_repeat=3, max_repeat=5, max_bytes=max_bytes)
        else:
            s = cls(False, sample_s=0.01, point_s=1.0, min_repeat=3, max_repeat=11, max_bytes=max_bytes)
        if repeat is not None:
            s = cls(s.quick, s.sample_s, s.point_s, repeat, repeat, max_bytes)
        return s


@dataclass
class Measurement:
    workload: str
    group: str
    axis: str
    size: Any
    label: str
    nbytes: int
    peer: str
    direction: str  # "dumps" | "loads"
    repeats: int
    number: int
    median_ns: float
    min_ns: float
    payload_bytes: int


def machine_info() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    except OSError:
        pass
    versions = {}
    for dist in VERSIONED:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {
        "cpus": ncpu(),
        "cpu_model": cpu,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "versions": versions,
        "env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "POLARS_MAX_THREADS") if k in os.environ},
    }


class _Progress:
    """A tqdm bar when tqdm is installed (``freight[bench]``), else one line per step on stderr."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.bar = None
        self.enabled = enabled
        self.done = 0
        self.total = total
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="size", file=sys.stderr, dynamic_ncols=True)
            except ImportError:
                pass

    def step(self, what: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(what, refresh=False)
        elif self.enabled:
            print(f"[{self.done + 1}/{self.total}] {what}", file=sys.stderr, flush=True)

    def advance(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)

    def write(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        elif self.enabled:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _measure_point(
    w: Workload, size: Any, peers: list[Peer], settings: Settings, failed: dict[str, str]
) -> list[Measurement]:
    obj = w.make(size)
    nbytes = w.nbytes(obj)
    fns: dict[str, Callable[[], Any]] = {}
    sizes: dict[str, int] = {}
    payloads: dict[str, Any] = {}
    first: dict[str, float] = {}  # the checked call's time: enough to calibrate a slow call
    for peer in peers:
        if peer.name in failed:
            continue
        try:
            dumps, loads = peer.codec
            t0 = time.perf_counter_ns()
            payload = dumps(obj)
            t1 = time.perf_counter_ns()
            back = loads(payload)
            t2 = time.perf_counter_ns()
            same = w.equal(obj, back)
        except Exception as exc:  # noqa: BLE001 - a peer that cannot do this workload is reported
            failed[peer.name] = f"fails at {w.label(size)}: {_first_line(exc)}"
            continue
        del back
        if not same:
            failed[peer.name] = f"changes the value at {w.label(size)} (round trip not equal)"
            continue
        payloads[peer.name] = payload
        sizes[peer.name] = payload_size(payload)
        fns[f"{peer.name}\0dumps"] = partial(dumps, obj)
        fns[f"{peer.name}\0loads"] = partial(loads, payload)
        first[f"{peer.name}\0dumps"], first[f"{peer.name}\0loads"] = t1 - t0, t2 - t1
    # Calibrate each call (this is also its warm-up), then choose how many samples fit.
    numbers: dict[str, int] = {}
    per_sample = 0.0
    gc.collect()
    for key, fn in fns.items():
        if first[key] >= 2 * settings.sample_s * 1e9:  # one call is a sample: no calibration run
            numbers[key] = 1
            per_sample += first[key]
            continue
        number, per_call = calibrate(fn, settings.sample_s * 1e9)
        numbers[key] = number
        per_sample += number * per_call
    repeat = int(settings.point_s * 1e9 / per_sample) if per_sample else settings.min_repeat
    repeat = max(settings.min_repeat, min(settings.max_repeat, repeat))
    timings = time_interleaved(fns, repeat, warmup=0, numbers=numbers)
    out = []
    for key, t in timings.items():
        name, direction = key.split("\0")
        out.append(
            Measurement(
                w.name,
                w.group,
                w.axis,
                size,
                w.label(size),
                nbytes,
                name,
                direction,
                t.repeat,
                t.number,
                t.median_ns,
                t.min_ns,
                sizes[name],
            )  # fmt: skip
        )
    del payloads, fns, obj
    gc.collect()
    return out


def run(
    workloads: list[Workload],
    settings: Settings,
    *,
    progress: bool = True,
    peers: tuple[Peer, ...] = PEERS,
) -> dict[str, Any]:
    """Measures ``workloads`` and returns the results dict that results.json holds."""
    started = time.time()
    skipped: list[dict[str, str]] = []
    plan: list[tuple[Workload, Any, list[Peer]]] = []
    for w in workloads:
        missing = modules_missing(w.requires)
        if missing:
            skipped.append({"workload": w.name, "peer": "*", "reason": f"{', '.join(missing)} not installed"})
            continue
        usable = []
        for p in for_kind(w.kind, peers):
            gone = p.missing()
            if gone:
                skipped.append({"workload": w.name, "peer": p.name, "reason": f"{', '.join(gone)} not installed"})
            else:
                usable.append(p)
        plan += [(w, size, usable) for size in w.sizes_for(settings.quick, settings.max_bytes)]
    bar = _Progress(len(plan), progress)
    measurements: list[Measurement] = []
    errors: list[str] = []
    failures: dict[str, dict[str, str]] = {}
    try:
        for w, size, usable in plan:
            bar.step(f"{w.name} {w.label(size)}")
            failed = failures.setdefault(w.name, {})
            try:
                measurements += _measure_point(w, size, usable, settings, failed)
            except MemoryError:
                errors.append(f"{w.name} at {w.label(size)}: out of memory; skipped the larger sizes")
                bar.write(errors[-1])
            except Exception as exc:  # noqa: BLE001 - one broken workload must not lose the others
                errors.append(f"{w.name} at {w.label(size)}: {_first_line(exc)}")
                bar.write(errors[-1] + "\n" + traceback.format_exc())
            bar.advance()
    finally:
        bar.close()
    for wname, failed in failures.items():
        skipped += [{"workload": wname, "peer": p, "reason": r} for p, r in failed.items()]
    return {
        "schema": SCHEMA,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "elapsed_s": round(time.time() - started, 1),
        "machine": machine_info(),
        "settings": asdict(settings),
        "workloads": {
            w.name: {"group": w.group, "axis": w.axis, "description": w.description, "kind": w.kind} for w in workloads
        },
        "peers": {p.name: {"ours": p.ours, "reference": p.reference} for p in peers if any(p in u for _, _, u in plan)},
        "skipped": skipped,
        "errors": errors,
        "measurements": [asdict(m) for m in measurements],
    }
