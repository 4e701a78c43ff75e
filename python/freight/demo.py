"""A realistic mixed workload, end to end: ``python -m freight demo [--store DIR]``.

Builds a few numpy arrays (a 64 MiB float64 series, an int32 image stack, a structured array),
a 100k-row pandas DataFrame with several dtypes, a closure and nested metadata; saves each one
in a local folder store (:func:`freight.storage.open`, one file per object), loads it back (read,
and memory-mapped), checks that it is equal to the original, then compares payload size and
dumps/loads time with pickle (protocol 5) and cloudpickle.

Needs numpy and pandas (``pip install freight[pandas]``). Exits non-zero if a check fails.
"""

from __future__ import annotations

import datetime as _dt
import os
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["main", "build_objects"]

DEFAULT_STORE = "freight-demo-store"
MiB = 1 << 20


def _fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _fmt_ms(ns: float | None) -> str:
    if ns is None:
        return "-"
    ms = ns / 1e6
    if ms < 0.1:
        return f"{ns / 1e3:.1f} µs"
    return f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"


def _make_scorer(weights: list[float], bias: float) -> Callable[[list[float]], float]:
    """A closure: a function defined inside a function, capturing local state."""
    norm = sum(abs(w) for w in weights) or 1.0

    def score(features: list[float]) -> float:
        return bias + sum(w * f for w, f in zip(weights, features)) / norm

    return score


def build_objects() -> dict[str, tuple[str, Any]]:
    """name -> (description, object)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(42)

    prices = rng.standard_normal(64 * MiB // 8).cumsum()  # 64 MiB float64
    images = rng.integers(0, 4096, size=(16, 512, 512), dtype=np.int32)  # 16 MiB int32 stack
    trades_dtype = np.dtype([("id", "<i8"), ("price", "<f8"), ("qty", "<i4"), ("symbol", "S8"), ("buy", "?")])
    trades = np.zeros(200_000, dtype=trades_dtype)
    trades["id"] = np.arange(trades.size)
    trades["price"] = rng.uniform(10, 500, trades.size).round(2)
    trades["qty"] = rng.integers(1, 1000, trades.size)
    trades["symbol"] = rng.choice(np.array([b"AAPL", b"MSFT", b"GOOG", b"AMZN", b"NVDA"]), trades.size)
    trades["buy"] = rng.random(trades.size) < 0.5

    n = 100_000
    start = pd.Timestamp("2024-01-01")
    frame = pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "value": rng.standard_normal(n),
            "ratio": rng.random(n).astype(np.float32),
            "count": rng.integers(0, 100, n, dtype=np.int16),
            "flag": rng.random(n) < 0.3,
            "when": start + pd.to_timedelta(rng.integers(0, 86_400 * 365, n), unit="s"),
            "city": pd.Categorical(rng.choice(["Paris", "Lima", "Osaka", "Cairo", "Oslo"], n)),
            "label": [f"item-{i % 997}" for i in range(n)],
        }
    )
    frame.index.name = "row"

    scorer = _make_scorer([0.5, -1.25, 2.0, 0.75], bias=0.1)

    metadata = {
        "experiment": "freight-demo",
        "created": _dt.datetime(2024, 5, 17, 12, 30, tzinfo=_dt.timezone.utc),
        "version": (1, 4, 2),
        "tags": ["numpy", "pandas", "closures"],
        "params": {"learning_rate": 1e-3, "epochs": 20, "layers": [64, 32, 16], "dropout": None},
        "runs": [
            {"seed": s, "ok": s % 3 != 0, "loss": round(1.0 / (s + 1), 6), "notes": {"host": f"node-{s}"}}
            for s in range(50)
        ],
        "blob": bytes(range(256)),
    }

    return {
        "prices": ("float64 array, 64 MiB", prices),
        "images": ("int32 image stack 16x512x512", images),
        "trades": ("structured array, 200k records", trades),
        "frame": ("DataFrame, 100k rows x 8 cols", frame),
        "scorer": ("closure", scorer),
        "metadata": ("nested dict metadata", metadata),
    }


def _verify(name: str, original: Any, loaded: Any) -> str | None:
    """None if equal, else a description of the difference."""
    import numpy as np
    import pandas as pd

    try:
        if isinstance(original, np.ndarray):
            if not isinstance(loaded, np.ndarray):
                return f"expected an ndarray, got {type(loaded).__name__}"
            if loaded.dtype != original.dtype or loaded.shape != original.shape:
                return f"dtype/shape {loaded.dtype}{loaded.shape} != {original.dtype}{original.shape}"
            if not np.array_equal(loaded, original):
                return "array contents differ"
            return None
        if isinstance(original, pd.DataFrame):
            pd.testing.assert_frame_equal(loaded, original)
            return None
        if callable(original):
            probe = [1.0, 2.0, -3.0, 0.5]
            got, want = loaded(probe), original(probe)
            return None if got == want else f"calling it gave {got!r}, expected {want!r}"
        return None if loaded == original else "values differ"
    except AssertionError as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else "assertion failed"
    except Exception as exc:  # noqa: BLE001 - any failure to compare is a failed check
        return f"{type(exc).__name__}: {exc}"


def _median_ns(fn: Callable[[], Any], min_repeat: int = 3, budget_s: float = 0.05) -> tuple[float, Any]:
    """Median wall time of at least ``min_repeat`` calls (more, up to 200, for fast calls, until
    ``budget_s`` is spent) and the last result."""
    times: list[int] = []
    result = None
    spent = 0
    while len(times) < min_repeat or (spent < budget_s * 1e9 and len(times) < 200):
        result = None
        t0 = time.perf_counter_ns()
        result = fn()
        dt = time.perf_counter_ns() - t0
        times.append(dt)
        spent += dt
    return statistics.median(times), result


# Why a row of the demo can be below 1.0x, measured (see docs/ARCHITECTURE.md and the closing
# notes of the performance issue): printed under the table when it is. None is known today: the
# closure ("scorer"), which loaded ~5% slower than cloudpickle while it was a pickle island, is
# freight's own function node since 2026-11-29 (about twice as fast both ways).
_WHY_SLOWER: dict[str, str] = {}
_WHY_NOISE = (
    "The demo times each object a few times on whatever else the machine runs; `freight bench`\n"
    "   measures each size in two allocator states and reports where freight is slower and why."
)


def _table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> None:
    right = right or set()
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    print("  " + fmt(headers).rstrip())
    print("  " + "  ".join("-" * w for w in widths))
    for r in rows:
        print("  " + fmt(r).rstrip())


def main(store: str | None = None) -> int:
    """Runs the demo; returns the exit status (0: every object round-tripped)."""
    try:
        import numpy  # noqa: F401
        import pandas  # noqa: F401
    except ImportError as exc:
        print(f"freight demo needs numpy and pandas: {exc} (pip install 'freight[pandas]')", file=sys.stderr)
        return 1
    import cloudpickle

    import freight

    store = store or DEFAULT_STORE
    os.makedirs(store, exist_ok=True)
    started = time.perf_counter()

    print(f"freight {getattr(freight, '__version__', '?')} demo - store: {os.path.abspath(store)}")
    print("Building objects ...", flush=True)
    objects = build_objects()

    # 1. Through the local folder store: save, load (read, and memory-mapped), verify.
    import freight.storage

    folder = freight.storage.open(store)
    print()
    print(f"Round trip through the folder store ({folder.url}): save, load, load(mmap=True):")
    failures: list[str] = []
    store_rows = []
    for name, (desc, obj) in objects.items():
        key = f"{name}.frt"
        try:
            t0 = time.perf_counter_ns()
            folder.save(key, obj)
            t1 = time.perf_counter_ns()
            loaded = folder.load(key)
            t2 = time.perf_counter_ns()
            mapped = folder.load(key, mmap=True)
            t3 = time.perf_counter_ns()
        except Exception as exc:  # noqa: BLE001 - report every object, then fail
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
            store_rows.append([name, desc, "-", "-", "-", "-", f"FAIL ({type(exc).__name__})"])
            continue
        problem = _verify(name, obj, loaded) or _verify(name, obj, mapped)
        if problem:
            failures.append(f"{name}: {problem}")
        store_rows.append(
            [
                name,
                desc,
                _fmt_bytes(folder.info(key)["size"]),
                _fmt_ms(t1 - t0),
                _fmt_ms(t2 - t1),
                _fmt_ms(t3 - t2),
                "OK" if problem is None else "FAIL",
            ]
        )
        del loaded, mapped
    _table(["object", "what", "stored", "save", "load", "load mmap", "verified"], store_rows, right={2, 3, 4, 5})
    print("  (save compresses with lz4 where samples shrink, fsyncs, and renames into place;")
    print("   load(mmap=True) returns read-only arrays viewing the file, no copy, for frames stored")
    print("   uncompressed: save(key, obj, compression='none') for values you will map.)")

    # 2. In memory against pickle-5 and cloudpickle: payload size, dumps and loads time.
    print()
    print("Compared with pickle (protocol 5) and cloudpickle, in memory (medians of 3 or more calls):")
    codecs: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
        "freight": (freight.dumps, freight.loads),
        "pickle-5": (lambda o: pickle.dumps(o, protocol=5), pickle.loads),
        "cloudpickle": (lambda o: cloudpickle.dumps(o, protocol=5), pickle.loads),
    }
    size_rows, time_rows = [], []
    slower: list[tuple[str, str]] = []
    for name, (_desc, obj) in objects.items():
        sizes: dict[str, int | None] = {}
        dump_t: dict[str, float | None] = {}
        load_t: dict[str, float | None] = {}
        for codec, (dumps, loads) in codecs.items():
            try:
                # The lambdas run now, inside this iteration (B023); `del blob` below confuses F821.
                dump_t[codec], blob = _median_ns(lambda: dumps(obj))  # noqa: B023
                sizes[codec] = len(blob)
                load_t[codec], back = _median_ns(lambda: loads(blob))  # noqa: B023, F821
                if codec == "freight":
                    problem = _verify(name, obj, back)
                    if problem:
                        failures.append(f"{name} (freight.loads in memory): {problem}")
                del blob, back
            except Exception as exc:  # noqa: BLE001 - plain pickle cannot take a closure
                sizes[codec] = dump_t[codec] = load_t[codec] = None
                if codec == "freight":
                    failures.append(f"{name} (freight in memory): {type(exc).__name__}: {exc}")

        # pickle-5 where it can serialize the object, else cloudpickle (closures).
        peer = "pickle-5" if dump_t.get("pickle-5") else "cloudpickle"

        def ratio(d: dict[str, float | None], peer: str = peer, name: str = name) -> str:
            f, p = d.get("freight"), d.get(peer)
            if not (f and p):
                return "n/a"
            if p / f < 1.0:
                slower.append((name, peer))
            suffix = "" if peer == "pickle-5" else f" (vs {peer})"
            return f"{p / f:.1f}x{suffix}"

        size_rows.append([name] + [_fmt_bytes(sizes[c]) if sizes[c] is not None else "can't" for c in codecs])
        time_rows.append(
            [name]
            + [_fmt_ms(dump_t[c]) if dump_t[c] is not None else "can't" for c in codecs]
            + [_fmt_ms(load_t[c]) if load_t[c] is not None else "can't" for c in codecs]
            + [ratio(dump_t), ratio(load_t)]
        )

    print()
    print("Payload size:")
    _table(["object", "freight", "pickle-5", "cloudpickle"], size_rows, right={1, 2, 3})
    print()
    print("Time (speedup = pickle-5 time / freight time; > 1 means freight is faster):")
    _table(
        [
            "object",
            "dumps freight",
            "pickle-5",
            "cloudpickle",
            "loads freight",
            "pickle-5",
            "cloudpickle",
            "dumps speedup",
            "loads speedup",
        ],
        time_rows,
        right=set(range(1, 9)),
    )
    print('  (pickle-5 "can\'t": plain pickle cannot serialize closures; freight and cloudpickle can:')
    print("   their speedup is against cloudpickle.)")
    for name, peer in dict.fromkeys(slower):
        print(f"  {name}: slower than {peer} here.\n   {_WHY_SLOWER.get(name, _WHY_NOISE)}")

    elapsed = time.perf_counter() - started
    print()
    if failures:
        print(f"FAILED: {len(failures)} check(s) failed in {elapsed:.1f} s:", file=sys.stderr)
        for f in failures:
            print(f"  - {f}", file=sys.stderr)
        return 1
    first = os.path.join(store, "frame.frt")
    print(f"All {len(objects)} objects round-tripped and verified in {elapsed:.1f} s.")
    print(f"Try: python -m freight inspect {first}   or   python -m freight verify {first}")
    return 0
