"""Core benchmarks for freight, measured against its peers in one run.

Run from a source checkout (``make bench`` runs exactly this)::

    python benchmarks/bench_core.py            # full run: 256 MiB array, ~2-3 minutes
    python benchmarks/bench_core.py --quick    # 32 MiB array, fewer repetitions
    python benchmarks/bench_core.py --json results.json

Every number is a median over several repetitions, timed with ``time.perf_counter_ns`` and the
garbage collector off. Small operations are timed in loops (``timeit`` style: each repetition
runs the call ``number`` times, ``number`` is calibrated so that one repetition lasts a few tens
of milliseconds) and reported per call. Ratios are ``peer time / freight time``: above 1 means
freight is faster. Each target is checked and marked PASS or MISS. See benchmarks/README.md.

This is not a pytest test; the exit status is 0 unless ``--strict`` is given and a target is
missed (or something fails to round-trip, which is always an error).
"""

from __future__ import annotations

import gc
import io
import os
import pickle
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy is a benchmark requirement
    sys.exit("bench_core.py needs numpy (pip install numpy)")

try:
    import cloudpickle
except ImportError:  # pragma: no cover - cloudpickle is a dependency of freight
    sys.exit("bench_core.py needs cloudpickle (pip install cloudpickle)")

import freight

# Run as a script: its folder is on sys.path.
from core_peak_memory import peak_memory  # noqa: E402
from core_report import Report, absolute, check, compare  # noqa: E402
from freight.bench.harness import MiB, Timing, finish, parse_args, time_large
from freight.bench.harness import time_small as harness_time_small

# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


class Config:
    def __init__(self, quick: bool):
        self.quick = quick
        # Small operations: repetitions of a calibrated loop.
        self.small_repeat = 5 if quick else 7
        self.small_target_s = 0.015 if quick else 0.04  # length of one repetition
        self.small_min_number = 1_000 if quick else 10_000
        self.small_max_number = 100_000
        self.small_max_repeat_s = 0.25 if quick else 0.5  # cap on one repetition
        # Large operations: one call per repetition.
        self.large_repeat = 5 if quick else 9
        self.array_mib = 32 if quick else 256
        self.frame_sizes_mib = sorted({1, self.array_mib})


def time_small(fn: Callable[[], Any], cfg: Config, *, min_number: int | None = None) -> Timing:
    """Per-call median of ``cfg.small_repeat`` calibrated loops (the shared harness's time_small)."""
    return harness_time_small(
        fn,
        repeat=cfg.small_repeat,
        target_s=cfg.small_target_s,
        min_number=cfg.small_min_number if min_number is None else min_number,
        max_number=cfg.small_max_number,
        max_sample_s=cfg.small_max_repeat_s,
    )


# --------------------------------------------------------------------------------------------
# Helpers for the peers
# --------------------------------------------------------------------------------------------


def pickle5_dumps(x: Any) -> bytes:
    return pickle.dumps(x, protocol=5)


def np_save(arr: np.ndarray) -> bytes:
    bio = io.BytesIO()
    np.save(bio, arr, allow_pickle=False)
    return bio.getvalue()


def np_load(buf: Any) -> np.ndarray:
    return np.load(io.BytesIO(buf), allow_pickle=False)


def pickle5_oob_dumps(x: Any) -> tuple[bytes, list]:
    buffers: list = []
    data = pickle.dumps(x, protocol=5, buffer_callback=buffers.append)
    return data, buffers


def pickle5_oob_loads(parts: tuple[bytes, list]) -> Any:
    data, buffers = parts
    return pickle.loads(data, buffers=buffers)


# --------------------------------------------------------------------------------------------
# (a) large arrays
# --------------------------------------------------------------------------------------------


def _fresh_array(nbytes: int) -> np.ndarray:
    return np.random.default_rng(0).random(nbytes // 8)


def case_large(report: Report, cfg: Config) -> None:
    case = "a"
    n_mib = cfg.array_mib
    arr = _fresh_array(n_mib * MiB)
    rep = cfg.large_repeat
    label = f"{n_mib} MiB"

    # Correctness first.
    blob = freight.dumps(arr)
    back = freight.loads(blob)
    check(report, np.array_equal(back, arr), f"freight.loads(freight.dumps({label} array)) differs")
    check(report, bool(back.flags.writeable), "default freight.loads returned a read-only array")
    report.extra["default_loads_writeable"] = bool(back.flags.writeable)
    report.extra["blob_bytes"] = len(blob)
    report.extra["array_bytes"] = arr.nbytes
    del back

    t_copy = time_large(arr.copy, rep)

    # dumps -> bytes
    t_f_dumps = time_large(lambda: freight.dumps(arr), rep)
    t_p_dumps = time_large(lambda: pickle5_dumps(arr), rep)
    t_np_save = time_large(lambda: np_save(arr), rep)
    compare(
        report,
        case,
        f"dumps {label} -> bytes",
        t_f_dumps,
        [
            ("arr.copy()", t_copy, "<= 1.5x arr.copy()", lambda r: r >= 1 / 1.5),
            ("pickle-5 dumps", t_p_dumps, ">= 3x faster", lambda r: r >= 3),
            ("np.save(BytesIO)", t_np_save, ">= 3x faster", lambda r: r >= 3),
        ],
    )

    # default loads (a writable copy, checksums verified)
    pblob = pickle5_dumps(arr)
    npblob = np_save(arr)
    t_f_loads = time_large(lambda: freight.loads(blob), rep)
    t_p_loads = time_large(lambda: pickle.loads(pblob), rep)
    t_np_load = time_large(lambda: np_load(npblob), rep)
    del pblob, npblob
    compare(
        report,
        case,
        f"loads {label} (default: writable)",
        t_f_loads,
        [
            ("arr.copy()", t_copy, "<= 1.5x arr.copy()", lambda r: r >= 1 / 1.5),
            ("pickle-5 loads", t_p_loads, "", None),
            ("np.load(BytesIO)", t_np_load, "", None),
        ],
    )

    # loads(zero_copy=True) of the bytes blob
    zc = freight.loads(blob, zero_copy=True)
    check(report, np.array_equal(zc, arr), "freight.loads(blob, zero_copy=True) differs")
    report.extra["zero_copy_loads_writeable"] = bool(zc.flags.writeable)
    del zc
    del blob
    gc.collect()

    # Constant-time paths, at 1 MiB and at the full size.
    for size_mib in cfg.frame_sizes_mib:
        a = arr if size_mib == n_mib else _fresh_array(size_mib * MiB)
        lab = f"{size_mib} MiB"
        b = freight.dumps(a)
        frames = freight.dumps_frames(a)
        rt = freight.loads_frames(frames)
        check(report, np.array_equal(rt, a), f"loads_frames(dumps_frames({lab} array)) differs")
        del rt
        # Small-op timing (loops), but never fewer than 1,000 calls.
        t_frames = time_small(lambda: freight.dumps_frames(a), cfg, min_number=1_000)
        t_zc = time_small(lambda: freight.loads(b, zero_copy=True), cfg, min_number=1_000)
        zc_frames = freight.loads_frames(frames, zero_copy=True)
        check(report, np.array_equal(zc_frames, a), f"loads_frames(frames, zero_copy=True) ({lab}) differs")
        report.extra[f"zero_copy_loads_frames_writeable_{size_mib}MiB"] = bool(zc_frames.flags.writeable)
        del zc_frames
        t_lf = time_small(lambda: freight.loads_frames(frames, zero_copy=True), cfg, min_number=1_000)
        t_rt = time_small(lambda: freight.loads_frames(freight.dumps_frames(a), zero_copy=True), cfg, min_number=1_000)
        t_lf_default = time_small(lambda: freight.loads_frames(frames), cfg, min_number=100)
        parts = pickle5_oob_dumps(a)
        t_p_oob_d = time_small(lambda: pickle5_oob_dumps(a), cfg, min_number=1_000)
        t_p_oob_l = time_small(lambda: pickle5_oob_loads(parts), cfg, min_number=1_000)
        limit = 50_000
        compare(
            report,
            case,
            f"dumps_frames {lab}",
            t_frames,
            [
                ("pickle-5 out-of-band dumps", t_p_oob_d, "< 50 µs (absolute)", None),
            ],
        )
        report.rows[-1].passed = t_frames.median_ns < limit
        compare(
            report,
            case,
            f"loads(zero_copy=True) {lab}",
            t_zc,
            [
                ("pickle-5 out-of-band loads", t_p_oob_l, "< 50 µs (absolute)", None),
            ],
        )
        report.rows[-1].passed = t_zc.median_ns < limit
        absolute(report, case, f"loads_frames(frames, zero_copy=True) {lab}", t_lf, limit)
        absolute(report, case, f"loads_frames(dumps_frames(x), zero_copy=True) {lab}", t_rt, limit)
        compare(
            report,
            case,
            f"loads_frames(frames) {lab} (default: copies)",
            t_lf_default,
            [],
            note="loads_frames(frames) without zero_copy=True copies into writable memory (like loads), "
            "so it is timed for information only; the constant-time targets use zero_copy=True",
        )
        del b, frames, parts, a
        gc.collect()

    report.extra["copy_ns"] = t_copy.median_ns
    del arr
    gc.collect()


# --------------------------------------------------------------------------------------------
# (b) small values, (c) 10k dicts, (d) closures
# --------------------------------------------------------------------------------------------


def _roundtrip_fns(x: Any) -> dict[str, dict[str, Callable[[], Any]]]:
    fb = freight.dumps(x)
    pb = pickle5_dumps(x)
    cb = cloudpickle.dumps(x, protocol=5)
    f_dumps, f_loads = freight.dumps, freight.loads
    p_dumps, p_loads = pickle.dumps, pickle.loads
    c_dumps = cloudpickle.dumps
    return {
        "freight": {
            "dumps+loads": lambda: f_loads(f_dumps(x)),
            "dumps": lambda: f_dumps(x),
            "loads": lambda: f_loads(fb),
        },
        "pickle-5": {
            "dumps+loads": lambda: p_loads(p_dumps(x, protocol=5)),
            "dumps": lambda: p_dumps(x, protocol=5),
            "loads": lambda: p_loads(pb),
        },
        "cloudpickle": {
            "dumps+loads": lambda: p_loads(c_dumps(x, protocol=5)),
            "dumps": lambda: c_dumps(x, protocol=5),
            "loads": lambda: p_loads(cb),
        },
    }


SMALL_VALUES: list[tuple[str, Any]] = [
    ("int", 123456789),
    ("short str", "hello, freight"),
    ("3-tuple", (1, 2.5, "three")),
    ("10-key dict", {f"key{i}": (i if i % 3 == 0 else (i * 0.5 if i % 3 == 1 else f"v{i}")) for i in range(10)}),
]


def case_small(report: Report, cfg: Config) -> None:
    case = "b"
    for name, value in SMALL_VALUES:
        back = freight.loads(freight.dumps(value))
        check(report, back == value and type(back) is type(value), f"{name} does not round-trip")
        fns = _roundtrip_fns(value)
        for op in ("dumps+loads", "dumps", "loads"):
            t_f = time_small(fns["freight"][op], cfg)
            t_p = time_small(fns["pickle-5"][op], cfg)
            t_c = time_small(fns["cloudpickle"][op], cfg)
            if op == "dumps+loads":
                peers = [
                    ("pickle-5", t_p, "no slower than pickle", lambda r: r >= 1.0),
                    ("cloudpickle", t_c, ">= 3x faster", lambda r: r >= 3.0),
                ]
            else:
                peers = [("pickle-5", t_p, "", None), ("cloudpickle", t_c, "", None)]
            compare(report, case, f"{name}: {op}", t_f, peers)


def make_records(n: int = 10_000) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "score": i * 0.25,
            "name": f"user-{i}",
            "active": i % 2 == 0,
            "parent": None if i % 5 else i - 1,
        }
        for i in range(n)
    ]


def case_records(report: Report, cfg: Config) -> None:
    case = "c"
    records = make_records()
    back = freight.loads(freight.dumps(records))
    check(report, back == records, "10k dicts do not round-trip")
    fns = _roundtrip_fns(records)
    for op in ("dumps+loads", "dumps", "loads"):
        t_f = time_large(fns["freight"][op], cfg.small_repeat, warmup=2)
        t_p = time_large(fns["pickle-5"][op], cfg.small_repeat, warmup=2)
        t_c = time_large(fns["cloudpickle"][op], cfg.small_repeat, warmup=2)
        if op == "dumps+loads":
            peers = [
                ("pickle-5", t_p, ">= 1.5x faster", lambda r: r >= 1.5),
                ("cloudpickle", t_c, "", None),
            ]
        else:
            peers = [("pickle-5", t_p, "", None), ("cloudpickle", t_c, "", None)]
        compare(report, case, f"10k dicts: {op}", t_f, peers)
    report.extra["records_payload_bytes"] = {
        "freight": len(freight.dumps(records)),
        "pickle-5": len(pickle5_dumps(records)),
        "cloudpickle": len(cloudpickle.dumps(records, protocol=5)),
    }


def make_closure() -> Callable[[int], int]:
    data = list(range(100))
    scale = 3

    def weighted(x: int) -> int:
        return sum(data) * scale + x

    return weighted


def make_lambda() -> Callable[[int], int]:
    offset = 7
    return lambda x: x * 2 + offset


def case_closures(report: Report, cfg: Config) -> None:
    case = "d"
    for name, fn in (("closure (captures 100 ints)", make_closure()), ("lambda", make_lambda())):
        back = freight.loads(freight.dumps(fn))
        check(report, back(5) == fn(5), f"{name} does not round-trip")
        try:
            pickle.dumps(fn, protocol=5)
            note = ""
        except Exception as exc:  # noqa: BLE001 - this is the point: pickle cannot
            note = f"pickle cannot serialize a {name.split()[0]} ({type(exc).__name__})"
        fns = _roundtrip_fns_closure(fn)
        for op in ("dumps+loads", "dumps", "loads"):
            t_f = time_small(fns["freight"][op], cfg, min_number=1_000)
            t_c = time_small(fns["cloudpickle"][op], cfg, min_number=1_000)
            if op == "dumps+loads":
                peers = [("cloudpickle", t_c, "<= 1.1x cloudpickle", lambda r: r >= 1 / 1.1)]
            else:
                peers = [("cloudpickle", t_c, "", None)]
            compare(report, case, f"{name}: {op}", t_f, peers, note=note)


def _roundtrip_fns_closure(fn: Callable) -> dict[str, dict[str, Callable[[], Any]]]:
    fb = freight.dumps(fn)
    cb = cloudpickle.dumps(fn, protocol=5)
    f_dumps, f_loads = freight.dumps, freight.loads
    c_dumps, p_loads = cloudpickle.dumps, pickle.loads
    return {
        "freight": {
            "dumps+loads": lambda: f_loads(f_dumps(fn)),
            "dumps": lambda: f_dumps(fn),
            "loads": lambda: f_loads(fb),
        },
        "cloudpickle": {
            "dumps+loads": lambda: p_loads(c_dumps(fn, protocol=5)),
            "dumps": lambda: c_dumps(fn, protocol=5),
            "loads": lambda: p_loads(cb),
        },
    }


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------

CASES = {
    "a": "(a) large float64 array vs arr.copy(), pickle-5, np.save/np.load",
    "b": "(b) small values, per call (dumps+loads is the target)",
    "c": "(c) 10k dicts of scalars (5 keys each), per call",
    "d": "(d) closures and lambdas vs cloudpickle (pickle cannot), per call",
}


def environment(cfg: Config) -> dict[str, Any]:
    return {
        "mode": "quick" if cfg.quick else "full",
        "array_mib": cfg.array_mib,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "freight": getattr(freight, "__version__", "?"),
        "numpy": np.__version__,
        "cloudpickle": cloudpickle.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(
        "bench_core.py",
        "freight core benchmarks: medians and ratios against pickle-5, cloudpickle, numpy.",
        "abcd",
        "32 MiB array instead of 256 MiB, fewer repetitions",
        argv,
    )

    cfg = Config(args.quick)
    env = environment(cfg)
    print(
        f"freight {env['freight']} benchmarks ({env['mode']} mode) - Python {env['python']}, numpy {env['numpy']}, "
        f"cloudpickle {env['cloudpickle']}, {env['cpu_count']} CPUs, {env['platform']}"
    )
    print("Times are medians; ratio = peer time / freight time (> 1: freight is faster).")

    report = Report()
    started = time.perf_counter()
    runners = {"a": case_large, "b": case_small, "c": case_records, "d": case_closures}
    for key in args.cases:
        try:
            runners[key](report, cfg)
        except Exception as exc:  # noqa: BLE001 - report the failure, run the other cases
            traceback.print_exc()
            check(report, False, f"case {key} failed: {type(exc).__name__}: {exc}")
        report.print_case(key, CASES[key])
        if key == "a":
            # Peak memory of dumps, each serializer in a fresh subprocess.
            peak_memory(report, cfg)
    elapsed = time.perf_counter() - started

    passed, checked = report.summary()
    misses = [
        f"{r.operation}{f' vs {r.peer}' if r.peer else ''}: target {r.target}"
        + (f" (ratio {r.ratio:.2f}x)" if r.ratio is not None else "")
        for r in report.rows
        if r.passed is False
    ]
    results = {"environment": env, "extra": report.extra, "rows": [dict(asdict(r), ratio=r.ratio) for r in report.rows]}
    return finish(args, passed, checked, elapsed, misses, report.errors, results)


if __name__ == "__main__":
    sys.exit(main())
