"""What freight's benchmark scripts share: interleaved timing of large operations, number
formatting, tables and the machine's CPU count. Imported by the scripts beside it (they run as
``python benchmarks/<script>.py``, which puts this folder on ``sys.path``)."""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MiB = 1 << 20


@dataclass
class Timing:
    median_ns: float
    repeat: int
    samples_ns: list[float] = field(default_factory=list)


def time_interleaved(fns: dict[str, Callable[[], Any]], repeat: int, warmup: int = 1) -> dict[str, Timing]:
    """Median of ``repeat`` single calls of each function (gc off), the functions interleaved.

    Repetition ``i`` runs the functions in an order rotated by ``i``, so slow drifts of a shared
    machine hit all of them alike. Every function gets ``warmup`` untimed calls first. The
    result of a call is freed outside the timed region.
    """
    names = list(fns)
    samples: dict[str, list[float]] = {n: [] for n in names}
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(warmup):
            for n in names:
                r = fns[n]()
                del r
        for i in range(repeat):
            k = i % len(names)
            for n in names[k:] + names[:k]:
                fn = fns[n]
                t0 = time.perf_counter_ns()
                r = fn()
                t1 = time.perf_counter_ns()
                del r
                samples[n].append(t1 - t0)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {n: Timing(statistics.median(s), repeat, s) for n, s in samples.items()}


def fmt_ns(ns: float | None) -> str:
    if ns is None:
        return "-"
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.3g} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.4g} ms"
    return f"{ns / 1e9:.4g} s"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_rate(bytes_per_s: float | None) -> str:
    if bytes_per_s is None:
        return "-"
    return f"{bytes_per_s / (1 << 30):.2f} GiB/s"


def print_table(headers: list[str], table: list[list[str]]) -> None:
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    print(line)
    print("-" * len(line))
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


@dataclass
class Target:
    """One checked target of a case: what was measured, what is required, whether it holds."""

    case: str
    name: str
    measured: str
    required: str
    passed: bool
    value: float | None = None


def print_targets(targets: list[Target]) -> None:
    if targets:
        print()
        print_table(
            ["target", "measured", "required", "result"],
            [[t.name, t.measured, t.required, "PASS" if t.passed else "MISS"] for t in targets],
        )


def ncpu() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def parse_args(prog: str, description: str, cases: str, quick: str, argv: list[str] | None) -> argparse.Namespace:
    """The options every benchmark script takes: --quick, --json, --cases, --strict."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--cases", default=cases, help=f"which cases to run, a subset of {cases!r} (default: all)")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any target is missed")
    args = parser.parse_args(argv)
    for key in args.cases:
        if key not in cases:
            parser.error(f"unknown case {key!r} (choose from {cases!r})")
    return args


def finish(
    args: argparse.Namespace,
    passed: int,
    checked: int,
    elapsed: float,
    misses: list[str],
    errors: list[str],
    results: dict,
) -> int:
    """Prints the summary (targets passed, one line per miss and per error), writes ``results``
    as JSON when --json was given, and returns the exit status: 2 when something failed to
    round-trip, 1 with --strict and a missed target, else 0."""
    print()
    print(f"Targets: {passed}/{checked} PASS in {elapsed:.1f} s")
    for miss in misses:
        print(f"  MISS: {miss}")
    for error in errors:
        print(f"  ERROR: {error}")
    if args.json:
        results = dict(results, elapsed_s=elapsed, targets_passed=passed, targets_checked=checked, errors=errors)
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
        print(f"wrote {args.json}")
    if errors:
        return 2
    return 1 if args.strict and misses else 0
