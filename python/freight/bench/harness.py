"""Timing, formatting and target tables: the one harness that ``freight bench`` and the target
scripts in ``benchmarks/`` share.

Every time is taken with ``time.perf_counter_ns`` with the garbage collector off; a result is
freed outside the timed region. Operations that take microseconds run in calibrated loops
(``number`` calls per sample) so the clock's resolution does not matter.
"""

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

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


@dataclass
class Timing:
    """A per-call median and how it was obtained: ``repeat`` samples of ``number`` calls each."""

    median_ns: float
    repeat: int
    number: int = 1
    samples_ns: list[float] = field(default_factory=list)

    @property
    def min_ns(self) -> float:
        return min(self.samples_ns) if self.samples_ns else self.median_ns


class _GcOff:
    """Collects once, then keeps the collector off inside the block (restored afterwards)."""

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.collect()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()


def loop_ns(fn: Callable[[], Any], number: int) -> int:
    """Nanoseconds for ``number`` calls of ``fn`` (the results are dropped as they come)."""
    if number == 1:
        t0 = time.perf_counter_ns()
        r = fn()
        t1 = time.perf_counter_ns()
        del r
        return t1 - t0
    loop = range(number)
    t0 = time.perf_counter_ns()
    for _ in loop:
        fn()
    return time.perf_counter_ns() - t0


#: untimed calls before a function is calibrated or timed. The first calls of a serializer pay
#: for set-up that the steady state never sees (lazy imports, registry look-ups cached on first
#: use, a thread pool started): freight's first ten dumps of a small array averaged 0.5 ms against
#: ~1 µs afterwards, and a calibration that counted them reported a 7× win as a 0.29× loss.
WARMUP_CALLS = 10


def warm_up(fns: dict[str, Callable[[], Any]], calls: int = WARMUP_CALLS, max_ns: float = 10e6) -> dict[str, float]:
    """Calls every function ``calls`` times, round robin, or fewer for one whose calls have
    taken ``max_ns`` in all (at least once each): a slow call's set-up is lost in its own time.
    Returns each function's fastest call, a per-call time that counts no set-up."""
    spent = dict.fromkeys(fns, 0)
    fastest = dict.fromkeys(fns, float("inf"))
    for i in range(calls):
        for name, fn in fns.items():
            if i and spent[name] >= max_ns:
                continue
            t0 = time.perf_counter_ns()
            r = fn()
            t = time.perf_counter_ns() - t0
            del r
            spent[name] += t
            fastest[name] = min(fastest[name], t)
    return fastest


def time_interleaved(
    fns: dict[str, Callable[[], Any]],
    repeat: int,
    warmup: int = 1,
    numbers: dict[str, int] | None = None,
    before_sample: Callable[[], Any] | None = None,
) -> dict[str, Timing]:
    """Per-call median of ``repeat`` samples of each function, the functions interleaved.

    Sample ``i`` runs the functions in an order rotated by ``i``, so slow drifts of a shared
    machine hit all of them alike. Each function gets ``warmup`` untimed calls first; a sample
    of function ``n`` is ``numbers[n]`` calls (1 by default) divided by that number.
    ``before_sample``, untimed, runs before each sample (the fresh state's ``alloc.drain_heap``).
    """
    names = list(fns)
    numbers = numbers or {}
    samples: dict[str, list[float]] = {n: [] for n in names}
    with _GcOff():
        for _ in range(warmup):
            for n in names:
                r = fns[n]()
                del r
        for i in range(repeat):
            k = i % len(names) if names else 0
            for n in names[k:] + names[:k]:
                number = numbers.get(n, 1)
                if before_sample is not None:
                    before_sample()
                samples[n].append(loop_ns(fns[n], number) / number)
    return {n: Timing(statistics.median(s), repeat, numbers.get(n, 1), s) for n, s in samples.items()}


def calibrate(fn: Callable[[], Any], target_ns: float, max_number: int = 100_000) -> tuple[int, float]:
    """How many calls of ``fn`` make one sample of about ``target_ns``, and the per-call time seen.

    The loop grows tenfold until it lasts a fifth of the target (or reaches ``max_number``).
    """
    number = 1
    while True:
        elapsed = loop_ns(fn, number)
        if elapsed >= target_ns * 0.2 or number >= max_number:
            break
        number *= 10
    per_call = max(elapsed / number, 1.0)
    return max(1, min(max_number, int(target_ns / per_call))), per_call


def time_small(
    fn: Callable[[], Any],
    *,
    repeat: int,
    target_s: float,
    min_number: int = 1,
    max_number: int = 100_000,
    max_sample_s: float = 0.5,
) -> Timing:
    """Per-call median of ``repeat`` calibrated loops of a fast operation (gc off).

    ``min_number`` is enforced only while a sample stays under ``max_sample_s``: an operation
    that is unexpectedly slow (a "constant-time" path that copies) must not stall the run.
    """
    with _GcOff():
        warm_up({"fn": fn}, max_ns=target_s * 1e9)
        number, per_call = calibrate(fn, target_s * 1e9, max_number)
        lo = min(min_number, int(max_sample_s * 1e9 / per_call))
        number = max(1, lo, number)
        samples = [loop_ns(fn, number) / number for _ in range(repeat)]
    return Timing(statistics.median(samples), repeat, number, samples)


def time_large(fn: Callable[[], Any], repeat: int, *, warmup: int = 1) -> Timing:
    """Median of ``repeat`` single calls (gc off). Freeing the result is not timed."""
    return time_interleaved({"fn": fn}, repeat, warmup)["fn"]


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
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_count(n: float) -> str:
    """10, 300, 1k, 30k, 1M, 10M: row and item counts as a reader says them."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size:
            value = n / size
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{n:.0f}"


def fmt_rate(bytes_per_s: float | None) -> str:
    if bytes_per_s is None:
        return "-"
    return f"{bytes_per_s / GiB:.2f} GiB/s"


def parse_size(text: str) -> int:
    """``"64MiB"``, ``"16k"``, ``"1G"``, ``"4096"`` -> bytes (binary units)."""
    s = text.strip().lower().replace(" ", "").removesuffix("b").removesuffix("i")
    scale = {"k": KiB, "m": MiB, "g": GiB}.get(s[-1:], 1)
    number = s[:-1] if scale != 1 else s
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (write it as 4096, 16KiB, 64MiB or 1GiB)") from None
    return int(value * scale)


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


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
    """The options every target script takes: --quick, --json, --cases, --strict."""
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
