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

import gc
import io
import pickle
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

import freight
from freight.bench.harness import (
    MiB,
    Target,
    finish,
    fmt_bytes,
    fmt_ns,
    ncpu,
    parse_args,
    print_table,
    print_targets,
    time_interleaved,
)


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

    def round_trips(
        self,
        case: str,
        runs: dict[str, tuple[Callable[[], Any], int | None]],
        repeat: int,
        targets: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        """Times the round trips ``{name: (function, payload size)}`` interleaved and records
        them; ``targets`` maps a peer to how many times freight's time it must take at least.
        Returns the medians by name (and the sizes, by name, under the key "sizes")."""
        times = {
            name: t.median_ns for name, t in time_interleaved({n: fn for n, (fn, _) in runs.items()}, repeat).items()
        }
        for name, ns in times.items():
            self.results.append(Result(case, name, ns, runs[name][1]))
        for peer, at_least in (targets or {}).items():
            r = times[peer] / times["freight"]
            self.targets.append(Target(case, f"freight vs {peer}", f"{r:.2f}x", f">= {at_least}x", r >= at_least))
        return times | {"sizes": {name: size for name, (_, size) in runs.items()}}

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
        print_targets([t for t in self.targets if t.case == case])
        sys.stdout.flush()


def freight_round_trip(x: Any) -> Callable[[], Any]:
    return lambda: freight.loads(freight.dumps(x))


def pickle_round_trip(x: Any) -> Callable[[], Any]:
    return lambda: pickle.loads(pickle.dumps(x, protocol=5))


def through_bytesio(
    write: Callable[[Any, io.BytesIO], Any], read: Callable[[io.BytesIO], Any], x: Any
) -> Callable[[], Any]:
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


def eight_columns(n: int) -> dict[str, Any]:
    """The issue's 1e6 x 8 shape as numpy data: ints, floats, bool, seconds for a tz-aware
    datetime column, category codes (12 categories) and repeated strings."""
    rng = np.random.default_rng(0)
    return {
        "i64": rng.integers(0, 1 << 40, n),
        "i32": rng.integers(0, 1000, n, dtype=np.int32),
        "f64": rng.random(n),
        "f32": rng.random(n, dtype=np.float32),
        "flag": rng.random(n) < 0.5,
        "when": np.datetime64("2026-01-01T00:00:00", "us") + np.arange(n).astype("m8[s]"),
        "kind": rng.integers(0, 12, n),
        "name": [f"user-{i % 50_000}" for i in range(n)],
    }


CATEGORIES = [f"k{i}" for i in range(12)]


def case_pandas(report: Report, cfg: Config) -> None:
    import pandas as pd

    report.versions["pandas"] = pd.__version__
    cols = eight_columns(cfg.rows)
    cols["when"] = pd.DatetimeIndex(cols["when"]).tz_localize("UTC").tz_convert("Europe/Paris")
    cols["kind"] = pd.Categorical.from_codes(cols["kind"], CATEGORIES)
    cols["name"] = pd.array(cols["name"], dtype="str")
    df = pd.DataFrame(cols)
    back = freight.loads(freight.dumps(df), allow_pickle=False)
    report.check(back.equals(df) and (back.dtypes == df.dtypes).all(), "pandas round trip differs")

    def to_parquet(x: Any, buf: io.BytesIO) -> None:
        x.to_parquet(buf)

    sizes = report.round_trips(
        "p",
        {
            "freight": (freight_round_trip(df), len(freight.dumps(df))),
            "pickle-5": (pickle_round_trip(df), len(pickle.dumps(df, protocol=5))),
            "parquet": (through_bytesio(to_parquet, pd.read_parquet, df), payload_size(to_parquet, df)),
        },
        cfg.repeat,
        targets={"pickle-5": 1.5, "parquet": 5.0},
    )["sizes"]
    report.targets.append(
        Target(
            "p",
            "payload vs pickle-5",
            f"{sizes['freight']:,} vs {sizes['pickle-5']:,} B",
            "<=",
            sizes["freight"] <= sizes["pickle-5"],
        )
    )


def case_polars(report: Report, cfg: Config) -> None:
    import polars as pl

    report.versions["polars"] = pl.__version__
    cols = eight_columns(cfg.rows)
    df = pl.DataFrame(cols).with_columns(
        pl.col("when").dt.replace_time_zone("UTC").dt.convert_time_zone("Europe/Paris"),
        pl.col("kind").replace_strict(list(range(12)), CATEGORIES).cast(pl.Categorical),
    )
    back = freight.loads(freight.dumps(df), allow_pickle=False)
    report.check(back.equals(df) and back.schema == df.schema, "polars round trip differs")

    def to_ipc(x: Any, buf: io.BytesIO) -> None:
        x.write_ipc(buf)

    report.round_trips(
        "l",
        {
            "freight": (freight_round_trip(df), len(freight.dumps(df))),
            "write_ipc/read_ipc": (through_bytesio(to_ipc, pl.read_ipc, df), payload_size(to_ipc, df)),
            "pickle-5": (pickle_round_trip(df), len(pickle.dumps(df, protocol=5))),
        },
        cfg.repeat,
        targets={"write_ipc/read_ipc": 1.0, "pickle-5": 2.0},
    )


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

    report.round_trips(
        "t",
        {
            "freight": (freight_round_trip(t), len(freight.dumps(t))),
            "torch.save/load": (through_bytesio(torch.save, torch.load, t), payload_size(torch.save, t)),
            "safetensors save/load": (st_round_trip, len(safetensors.torch.save({"t": t}))),
        },
        cfg.repeat,
        targets={"torch.save/load": 3.0, "safetensors save/load": 1.0},
    )


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

    times = report.round_trips(
        "a",
        {
            "freight": (lambda: freight.loads_frames(freight.dumps_frames(table), zero_copy=True), table.nbytes),
            "Arrow IPC stream (info)": (ipc_round_trip, None),
        },
        max(cfg.repeat, 9),
    )
    ms = times["freight"] / 1e6
    report.targets.append(
        Target(
            "a",
            f"dumps_frames + loads_frames(zero_copy), {fmt_bytes(table.nbytes)}",
            f"{ms:.3f} ms",
            "< 1 ms",
            ms < 1.0,
        )
    )


def case_tensorflow(report: Report, cfg: Config) -> None:
    import tensorflow as tf

    report.versions["tensorflow"] = tf.__version__
    t = tf.constant(np.random.default_rng(0).random(cfg.tensor_mib * MiB // 4, dtype=np.float32))
    back = freight.loads(freight.dumps(t), allow_pickle=False)
    report.check(bool(tf.reduce_all(back == t)), "tensorflow round trip differs")
    report.round_trips(
        "f",
        {
            "freight": (freight_round_trip(t), len(freight.dumps(t))),
            "tf.io.serialize_tensor/parse_tensor": (
                lambda: tf.io.parse_tensor(tf.io.serialize_tensor(t), tf.float32),
                len(tf.io.serialize_tensor(t).numpy()),
            ),
            "pickle-5": (pickle_round_trip(t), len(pickle.dumps(t, protocol=5))),
        },
        cfg.repeat,
    )


CASES: dict[str, tuple[str, Callable[[Report, Config], None]]] = {
    "p": ("pandas DataFrame, 8 columns", case_pandas),
    "l": ("polars DataFrame, 8 columns", case_polars),
    "t": ("torch float32 tensor", case_torch),
    "a": ("pyarrow Table, zero-copy frames", case_arrow),
    "f": ("TensorFlow float32 tensor (information, no target)", case_tensorflow),
}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(
        "bench_libraries.py",
        __doc__.split("\n")[0],
        "".join(CASES),
        "1e5 rows and 32 MiB tensors, fewer repetitions",
        argv,
    )

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

    print(f"\nVersions: {', '.join(f'{k} {v}' for k, v in report.versions.items())}")
    misses = [f"{t.name}: {t.measured} (required {t.required})" for t in report.targets if not t.passed]
    results = {
        "versions": report.versions,
        "results": [asdict(r) for r in report.results],
        "targets": [asdict(t) for t in report.targets],
    }
    return finish(args, len(report.targets) - len(misses), len(report.targets), elapsed, misses, report.errors, results)


if __name__ == "__main__":
    sys.exit(main())
