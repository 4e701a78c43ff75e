"""Runs workloads × sizes × peers and collects every measurement into one results dict.

Where a size is measured depends on how large it is (approximate data bytes, see
``Workload.approx_bytes``), because the state of the process decides the numbers there:

- **small** (under 64 KiB): here, all peers interleaved (point.py). Buffers this small come from
  the heap whatever the allocator's state.
- **mid** (64 KiB to 64 MiB): twice, in two allocator states (alloc.py explains them): ``warm``
  here, where the run raised glibc's mmap threshold first, and ``fresh`` in a child process with
  the threshold pinned at its default. Without this a ratio depended on what the process had
  freed before (numpy 1 MiB dumps against pickle-5: 0.71× in one state, 5.4× in a fresh process). The
  report holds freight to the worse of the two ratios.
- **large** (64 MiB and more): each peer alone in a fresh child process (``isolated``). Timed in
  one process, every peer's payload was resident at once (ten peers at 1 GiB: ~10 GiB), so what
  a call paid to fault its pages in (and, where numpy asks for huge pages, to compact memory)
  depended on the peers before it: two runs in a row here (2 cores) gave freight's 1 GiB
  ``loads`` 1112 and 410 ms, 0.79× and 1.64× pickle-5, the 2× swing this replaces.
  ``malloc_trim`` and gc between peers would not help: those payloads are alive, not free. In a
  child of its own a peer's call meets only its own value and payload; what still varies is
  the machine's own load, since the children run one after the other.

Then, for every size of 1 MiB or more, each peer's peak memory per call is probed, each in a
child of its own (memory.py).
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import platform
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from freight.bench import alloc, child, memory
from freight.bench.harness import Timing, ncpu
from freight.bench.peers import PEERS, Peer, for_kind, freight_defaults
from freight.bench.peers import missing as modules_missing
from freight.bench.point import FRESH, ISOLATED, WARM, PointResult, Settings, first_line, measure, measure_in

__all__ = ["SCHEMA", "Measurement", "Settings", "run"]
from freight.bench.workloads import Workload

SCHEMA = "freight-bench/2"  # /2: states, peak_bytes, allocator, memory; /1 files still load

#: distributions whose versions a results file records, when installed
VERSIONED = (
    "freight", "numpy", "pandas", "polars", "pyarrow", "torch", "cloudpickle", "dill", "proxystore",
    "distributed", "pyfory", "msgspec", "safetensors", "lz4", "zstandard", "blosc2", "matplotlib",
)  # fmt: skip


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
    median_ns: float  # in ``state``: what the plots draw and --compare compares
    min_ns: float
    payload_bytes: int
    state: str = WARM  # "warm" (here) or "isolated" (a child per peer)
    #: every state measured: {"warm": {...}, "fresh": {...}} for mid sizes, one entry otherwise
    states: dict[str, dict[str, float]] = field(default_factory=dict)
    #: peak resident bytes the call added (memory.py), None below 1 MiB or with --no-memory
    peak_bytes: int | None = None


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
    """A tqdm bar when tqdm is installed (``pip install "freight[bench]"`` brings it), else one line per
    step on stderr."""

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


def _isolated(w: Workload, size: Any, peers: list[Peer], settings: Settings) -> PointResult:
    """Each peer timed alone in a child process; one that dies there (out of memory) fails alone."""
    share = replace(settings, point_s=settings.point_s / max(1, len(peers)))
    out: PointResult | None = None
    failed: dict[str, str] = {}
    for p in peers:
        try:
            r = child.call(measure_in, ISOLATED, w.name, size, [p.name], share)
        except child.ChildError as exc:
            failed[p.name] = f"fails at {w.label(size)}: {str(exc).splitlines()[0][:300]}"
            continue
        if out is None:
            out = r
        else:
            out.timings.update(r.timings)
            out.payload_bytes.update(r.payload_bytes)
            out.failed.update(r.failed)
    out = out or PointResult(0)
    out.failed.update(failed)
    return out


def _measure_states(
    w: Workload, size: Any, peers: list[Peer], settings: Settings, errors: list[str]
) -> tuple[PointResult, dict[str, PointResult]]:
    """The point in every state its size calls for: (the primary result, state -> result)."""
    approx = w.approx_bytes(size)
    if approx >= settings.isolate_from:
        r = _isolated(w, size, peers, settings)
        return r, {ISOLATED: r}
    warm = measure(w, size, peers, settings)
    if approx < settings.states_from:
        return warm, {WARM: warm}
    names = [p.name for p in peers if p.name not in warm.failed]
    try:
        fresh = child.call(measure_in, FRESH, w.name, size, names, settings)
    except child.ChildError as exc:
        errors.append(f"{w.name} at {w.label(size)}, fresh process: {str(exc).splitlines()[0]}")
        return warm, {WARM: warm}
    warm.failed.update(fresh.failed)
    return warm, {WARM: warm, FRESH: fresh}


def _entry(t: Timing) -> dict[str, Any]:
    return {"median_ns": t.median_ns, "min_ns": t.min_ns, "repeats": t.repeat, "number": t.number}


@dataclass
class _Log:
    """What a run notes besides measurements."""

    errors: list[str] = field(default_factory=list)  # a point lost (exit status 1)
    notes: list[str] = field(default_factory=list)  # a peak-memory probe lost (the timings stand)
    memory_methods: set[str] = field(default_factory=set)


def _measure_point(
    w: Workload, size: Any, peers: list[Peer], settings: Settings, failed: dict[str, str], log: _Log
) -> list[Measurement]:
    usable = [p for p in peers if p.name not in failed]
    primary, by_state = _measure_states(w, size, usable, settings, log.errors)
    failed.update(primary.failed)
    peaks: dict[str, dict[str, Any]] = {}
    if settings.memory_from is not None and primary.nbytes >= settings.memory_from:
        ok = [p for p in usable if p.name not in primary.failed]
        peaks = memory.peaks(w, size, ok, log.notes)
        log.memory_methods.update(p["method"] for p in peaks.values())
    state = next(iter(by_state))
    out = []
    for (name, direction), t in primary.timings.items():
        if name in primary.failed:  # failed in the other state: not comparable
            continue
        states = {s: _entry(r.timings[name, direction]) for s, r in by_state.items() if (name, direction) in r.timings}
        out.append(
            Measurement(
                workload=w.name,
                group=w.group,
                axis=w.axis,
                size=size,
                label=w.label(size),
                nbytes=primary.nbytes,
                peer=name,
                direction=direction,
                **_entry(t),
                payload_bytes=primary.payload_bytes[name],
                state=state,
                states=states,
                peak_bytes=peaks.get(name, {}).get(direction),
            )
        )
    gc.collect()
    return out


def _preload(plan: list[tuple[Workload, Any, list[Peer]]]) -> None:
    """What the child processes import once, in the forkserver they are forked from."""
    modules = ["numpy", "freight", "freight.bench.point", "freight.bench.memory"]
    for w, _, peers in plan:
        modules += list(w.requires) + [m for p in peers for m in p.requires]
    child.preload(modules)


def run(
    workloads: list[Workload],
    settings: Settings,
    *,
    progress: bool = True,
    peers: tuple[Peer, ...] = PEERS,
) -> dict[str, Any]:
    """Measures ``workloads`` and returns the results dict that results.json holds. Child
    processes look peers up by name: ``peers`` must be drawn from ``PEERS``."""
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
    _preload(plan)
    # The ``warm`` state, for every point measured here: from now on this process serves
    # buffers of up to ~31 MiB from its heap, whatever the points before have freed.
    raised = alloc.raise_mmap_threshold()
    bar = _Progress(len(plan), progress)
    measurements: list[Measurement] = []
    log = _Log()
    errors = log.errors
    failures: dict[str, dict[str, str]] = {}
    try:
        for w, size, usable in plan:
            bar.step(f"{w.name} {w.label(size)}")
            failed = failures.setdefault(w.name, {})
            try:
                measurements += _measure_point(w, size, usable, settings, failed, log)
            except MemoryError:
                errors.append(f"{w.name} at {w.label(size)}: out of memory; skipped the larger sizes")
                bar.write(errors[-1])
            except Exception as exc:  # noqa: BLE001 - one broken workload must not lose the others
                errors.append(f"{w.name} at {w.label(size)}: {first_line(exc)}")
                bar.write(errors[-1] + "\n" + traceback.format_exc())
            bar.advance()
    finally:
        bar.close()
    for wname, failed in failures.items():
        skipped += [{"workload": wname, "peer": p, "reason": r} for p, r in failed.items()]
    used = {p for _, _, u in plan for p in u}
    return {
        "schema": SCHEMA,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "elapsed_s": round(time.time() - started, 1),
        "machine": machine_info(),
        "settings": asdict(settings),
        "freight_defaults": freight_defaults(),
        "allocator": {
            "glibc": alloc.glibc_version(),
            "warm": f"mmap threshold raised to {alloc.RAISE_BLOCK >> 20} MiB" if raised else "this process",
            "fresh": "a fresh process, mmap threshold pinned at 128 KiB" if raised else "a fresh process",
            "isolated": "a fresh process per peer",
            "children": child.METHOD,
        },
        "memory": {
            "from_bytes": settings.memory_from,
            "methods": sorted(log.memory_methods),
            "notes": log.notes,
        },
        "workloads": {
            w.name: {"group": w.group, "axis": w.axis, "description": w.description, "kind": w.kind} for w in workloads
        },
        "peers": {
            p.name: {"ours": p.ours, "reference": p.reference, "zero_copy": sorted(p.zero_copy)}
            for p in peers
            if p in used
        },
        "skipped": skipped,
        "errors": errors,
        "measurements": [asdict(m) for m in measurements],
    }
