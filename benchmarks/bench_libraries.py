"""Benchmarks of freight's serializers for data libraries, against each library's own formats
and pickle, measured in one run.

Run from a source checkout (``make bench`` runs it after the core and compression benchmarks)::

    python benchmarks/bench_libraries.py            # full run: 1e6-row frames, 256 MiB tensors
    python benchmarks/bench_libraries.py --quick    # 1e5 rows, 32 MiB, fewer repetitions
    python benchmarks/bench_libraries.py --cases pt --json results.json

Cases (targets from the data-library issue; see benchmarks/README.md):

p. pandas DataFrame, 1e6 rows x 8 columns (int64, int32, float64, float32, bool, datetime with
   tz, categorical, strings): round trip vs pickle protocol 5 and vs parquet through BytesIO.
l. polars DataFrame of the same shape: round trip vs ``write_ipc``/``read_ipc`` and pickle.
t. torch, a 256 MiB float32 tensor: round trip vs ``torch.save``/``torch.load`` through BytesIO
   and vs safetensors' ``save``/``load`` bytes functions.
a. pyarrow Table with 256 MiB of numeric columns: ``dumps_frames`` + ``loads_frames(zero_copy=True)``.
f. TensorFlow, a 256 MiB float32 tensor, vs ``tf.io.serialize_tensor``/``parse_tensor`` (no target).

A round trip is ``loads(dumps(x))`` (bytes out, a new, writable object back), timed as one call.
Times are medians of single calls, the operations of a case interleaved (see harness.py).
ratio = peer time / freight time: above 1, freight is faster. Exit status 0 unless something
fails to round-trip (2), or ``--strict`` and a target is missed (1).
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import pickle
import platform
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

import freight
from harness import MiB, fmt_bytes, fmt_ns, ncpu, print_table, time_interleaved


class Config:
    def __init__(self, quick: bool):
        self.quick = quick
        self.rows = 100_000 if quick else 1_000_000
        self.tensor_mib = 32 if quick else 256
        self.repeat = 3 if quick else 7


@dataclass
class Result:
    case: str
    name: str
    time_ns: float
    payload_bytes: int | None


@dataclass
class Target:
    case: str
    name: str
    measured: str
    required: str
    passed: bool


class Report:
    def __init__(self) -> None:
        self.results: list[Result] = []
        self.targets: list[Target] = []
        self.errors: list[str] = []
        self.versions: dict[str, str] = {}

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.errors.append(what)
            print(f"  ERROR: {what}", file=sys.stderr)

    def round_trips(self, case: str, fns: dict[str, Callable[[], Any]], sizes: dict[str, int | None], repeat: int) -> dict[str, float]:
        """Times the round trips interleaved; records and returns their medians by name."""
        times = {name: t.median_ns for name, t in time_interleaved(fns, repeat).items()}
        for name, ns in times.items():
            self.results.append(Result(case, name, ns, sizes.get(name)))
        return times

    def ratio(self, case: str, times: dict[str, float], peer: str, at_least: float) -> None:
        """Target: ``peer`` takes at least ``at_least`` times as long as freight."""
        r = times[peer] / times["freight"]
        self.targets.append(Target(case, f"freight vs {peer}", f"{r:.2f}x", f">= {at_least}x", r >= at_least))

    def print_case(self, case: str, title: str) -> None:
        print(f"\n== {case}. {title} ==")
        rows = [r for r in self.results if r.case == case]
        base = next((r.time_ns for r in rows if r.name == "freight"), None)
        print_table(
            ["serializer", "round trip", "ratio", "payload"],
            [
                [
                    r.name,
                    fmt_ns(r.time_ns),
                    f"{r.time_ns / base:.2f}x" if base else "-",
                    fmt_bytes(r.payload_bytes) if r.payload_bytes is not None else "-",
                ]
                for r in rows
            ],
        )
        targets = [t for t in self.targets if t.case == case]
        if targets:
            print()
            print_table(
                ["target", "measured", "required", "result"],
                [[t.name, t.measured, t.required, "PASS" if t.passed else "MISS"] for t in targets],
            )
        sys.stdout.flush()


def freight_round_trip(x: Any) -> Callable[[], Any]:
    return lambda: freight.loads(freight.dumps(x))


def pickle_round_trip(x: Any) -> Callable[[], Any]:
    return lambda: pickle.loads(pickle.dumps(x, protocol=5))


def through_bytesio(write: Callable[[Any, io.BytesIO], Any], read: Callable[[io.BytesIO], Any], x: Any) -> Callable[[], Any]:
    def run() -> Any:
        buf = io.BytesIO()
        write(x, buf)
        buf.seek(0)
        return read(buf)

    return run


def payload_size(write: Callable[[Any, io.BytesIO], Any], x: Any) -> int:
    buf = io.BytesIO()
    write(x, buf)
    return buf.tell()


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


def case_pandas(report: Report, cfg: Config) -> None:
    import pandas as pd

    report.versions["pandas"] = pd.__version__
    n = cfg.rows
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "i64": rng.integers(0, 1 << 40, n),
            "i32": rng.integers(0, 1000, n, dtype=np.int32),
            "f64": rng.random(n),
            "f32": rng.random(n, dtype=np.float32),
            "flag": rng.random(n) < 0.5,
            "when": pd.date_range("2026-01-01", periods=n, freq="s", tz="Europe/Paris"),
            "kind": pd.Categorical.from_codes(rng.integers(0, 12, n), [f"k{i}" for i in range(12)]),
            "name": pd.array([f"user-{i % 50_000}" for i in range(n)], dtype="str"),
        }
    )
    back = freight.loads(freight.dumps(df), allow_pickle=False)
    report.check(back.equals(df) and (back.dtypes == df.dtypes).all(), "pandas round trip differs")

    def to_parquet(x: Any, buf: io.BytesIO) -> None:
        x.to_parquet(buf)

    fns = {
        "freight": freight_round_trip(df),
        "pickle-5": pickle_round_trip(df),
        "parquet": through_bytesio(to_parquet, pd.read_parquet, df),
    }
    sizes = {
        "freight": len(freight.dumps(df)),
        "pickle-5": len(pickle.dumps(df, protocol=5)),
        "parquet": payload_size(to_parquet, df),
    }
    times = report.round_trips("p", fns, sizes, cfg.repeat)
    report.ratio("p", times, "pickle-5", 1.5)
    report.ratio("p", times, "parquet", 5.0)
    report.targets.append(
        Target("p", "payload vs pickle-5", f"{sizes['freight']:,} vs {sizes['pickle-5']:,} B", "<=", sizes["freight"] <= sizes["pickle-5"])
    )


def case_polars(report: Report, cfg: Config) -> None:
    import polars as pl

    report.versions["polars"] = pl.__version__
    n = cfg.rows
    rng = np.random.default_rng(0)
    df = pl.DataFrame(
        {
            "i64": rng.integers(0, 1 << 40, n),
            "i32": rng.integers(0, 1000, n, dtype=np.int32),
            "f64": rng.random(n),
            "f32": rng.random(n, dtype=np.float32),
            "flag": rng.random(n) < 0.5,
            "when": pl.datetime_range(
                pl.datetime(2026, 1, 1), pl.datetime(2026, 1, 1) + pl.duration(seconds=n - 1), "1s", eager=True, time_zone="Europe/Paris"
            ),
            "kind": pl.Series([f"k{i}" for i in rng.integers(0, 12, n)], dtype=pl.Categorical),
            "name": [f"user-{i % 50_000}" for i in range(n)],
        }
    )
    back = freight.loads(freight.dumps(df), allow_pickle=False)
    report.check(back.equals(df) and back.schema == df.schema, "polars round trip differs")

    def to_ipc(x: Any, buf: io.BytesIO) -> None:
        x.write_ipc(buf)

    fns = {
        "freight": freight_round_trip(df),
        "write_ipc/read_ipc": through_bytesio(to_ipc, pl.read_ipc, df),
        "pickle-5": pickle_round_trip(df),
    }
    sizes = {
        "freight": len(freight.dumps(df)),
        "write_ipc/read_ipc": payload_size(to_ipc, df),
        "pickle-5": len(pickle.dumps(df, protocol=5)),
    }
    times = report.round_trips("l", fns, sizes, cfg.repeat)
    report.ratio("l", times, "write_ipc/read_ipc", 1.0)
    report.ratio("l", times, "pickle-5", 2.0)


def case_torch(report: Report, cfg: Config) -> None:
    import safetensors
    import safetensors.torch
    import torch

    report.versions.update(torch=torch.__version__, safetensors=safetensors.__version__)
    t = torch.from_numpy(np.random.default_rng(0).random(cfg.tensor_mib * MiB // 4, dtype=np.float32))
    back = freight.loads(freight.dumps(t), allow_pickle=False)
    report.check(torch.equal(back, t), "torch round trip differs")

    def st_round_trip() -> Any:
        return safetensors.torch.load(safetensors.torch.save({"t": t}))["t"]

    fns = {
        "freight": freight_round_trip(t),
        "torch.save/load": through_bytesio(torch.save, torch.load, t),
        "safetensors save/load": st_round_trip,
    }
    sizes = {
        "freight": len(freight.dumps(t)),
        "torch.save/load": payload_size(torch.save, t),
        "safetensors save/load": len(safetensors.torch.save({"t": t})),
    }
    times = report.round_trips("t", fns, sizes, cfg.repeat)
    report.ratio("t", times, "torch.save/load", 3.0)
    report.ratio("t", times, "safetensors save/load", 1.0)


def case_arrow(report: Report, cfg: Config) -> None:
    import pyarrow as pa

    report.versions["pyarrow"] = pa.__version__
    rows = cfg.tensor_mib * MiB // 8 // 4
    rng = np.random.default_rng(0)
    table = pa.table(
        {
            "a": rng.random(rows),
            "b": rng.integers(0, 1 << 40, rows),
            "c": rng.random(rows),
            "d": rng.integers(0, 1 << 40, rows),
        }
    )
    back = freight.loads_frames(freight.dumps_frames(table), zero_copy=True)
    report.check(back.equals(table), "pyarrow round trip differs")

    def ipc_round_trip() -> Any:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return pa.ipc.open_stream(sink.getvalue()).read_all()

    fns = {
        "freight": lambda: freight.loads_frames(freight.dumps_frames(table), zero_copy=True),
        "Arrow IPC stream (info)": ipc_round_trip,
    }
    times = report.round_trips("a", fns, {"freight": table.nbytes, "Arrow IPC stream (info)": None}, max(cfg.repeat, 9))
    ms = times["freight"] / 1e6
    report.targets.append(Target("a", f"dumps_frames + loads_frames(zero_copy), {fmt_bytes(table.nbytes)}", f"{ms:.3f} ms", "< 1 ms", ms < 1.0))


def case_tensorflow(report: Report, cfg: Config) -> None:
    import tensorflow as tf

    report.versions["tensorflow"] = tf.__version__
    t = tf.constant(np.random.default_rng(0).random(cfg.tensor_mib * MiB // 4, dtype=np.float32))
    back = freight.loads(freight.dumps(t), allow_pickle=False)
    report.check(bool(tf.reduce_all(back == t)), "tensorflow round trip differs")
    fns = {
        "freight": freight_round_trip(t),
        "tf.io.serialize_tensor/parse_tensor": lambda: tf.io.parse_tensor(tf.io.serialize_tensor(t), tf.float32),
        "pickle-5": pickle_round_trip(t),
    }
    sizes = {"freight": len(freight.dumps(t)), "pickle-5": len(pickle.dumps(t, protocol=5))}
    report.round_trips("f", fns, sizes, cfg.repeat)


CASES: dict[str, tuple[str, Callable[[Report, Config], None]]] = {
    "p": ("pandas DataFrame, 8 columns", case_pandas),
    "l": ("polars DataFrame, 8 columns", case_polars),
    "t": ("torch float32 tensor", case_torch),
    "a": ("pyarrow Table, zero-copy frames", case_arrow),
    "f": ("TensorFlow float32 tensor (information, no target)", case_tensorflow),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_libraries.py", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1e5 rows and 32 MiB tensors, fewer repetitions")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--cases", default="".join(CASES), help=f"a subset of {''.join(CASES)!r} (default: all)")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any target is missed")
    args = parser.parse_args(argv)
    for key in args.cases:
        if key not in CASES:
            parser.error(f"unknown case {key!r} (choose from {''.join(CASES)!r})")

    cfg = Config(args.quick)
    print(
        f"freight library benchmarks ({'quick' if cfg.quick else 'full'} mode: {cfg.rows:,} rows, "
        f"{cfg.tensor_mib} MiB tensors, {cfg.repeat} repetitions) - Python {platform.python_version()}, "
        f"numpy {np.__version__}, {ncpu()} CPUs"
    )
    print("Round trip = loads(dumps(x)); times are medians; ratio = time / freight's time (> 1: freight is faster).")
    report = Report()
    started = time.perf_counter()
    for key in args.cases:
        title, runner = CASES[key]
        try:
            runner(report, cfg)
        except Exception as exc:  # noqa: BLE001 - report the failure, run the other cases
            traceback.print_exc()
            report.check(False, f"case {key} failed: {type(exc).__name__}: {exc}")
        report.print_case(key, title)
        gc.collect()
    elapsed = time.perf_counter() - started

    misses = [t for t in report.targets if not t.passed]
    print(f"\nVersions: {', '.join(f'{k} {v}' for k, v in report.versions.items())}")
    print(f"Targets: {len(report.targets) - len(misses)}/{len(report.targets)} PASS in {elapsed:.1f} s")
    for t in misses:
        print(f"  MISS: {t.name}: {t.measured} (required {t.required})")
    for e in report.errors:
        print(f"  ERROR: {e}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "versions": report.versions,
                    "elapsed_s": elapsed,
                    "results": [asdict(r) for r in report.results],
                    "targets": [asdict(t) for t in report.targets],
                    "errors": report.errors,
                },
                fh,
                indent=2,
            )
        print(f"wrote {args.json}")
    if report.errors:
        return 2
    return 1 if args.strict and misses else 0


if __name__ == "__main__":
    sys.exit(main())
