"""Task functions and data of the end-to-end engine benchmark. They live in the package so that
every engine's workers import them by reference, as they would a user's module."""

from __future__ import annotations

from typing import Any

MiB = 1 << 20

#: (workload, tasks in a full run, tasks with --quick)
WORKLOADS = (
    ("tiny tasks", 2000, 300),
    ("64 MiB arrays", 8, 4),
    ("100k-row DataFrames", 16, 8),
    ("closures carrying arrays", 100, 40),
)


def inc(x: int) -> int:
    return x + 1


def echo(x: Any) -> Any:
    return x


def call(fn: Any, i: int) -> Any:
    return fn(i)


def array(seed: int, nbytes: int = 64 * MiB) -> Any:
    import numpy as np

    return np.random.default_rng(seed).random(nbytes // 8)


def frame(seed: int, rows: int = 100_000) -> Any:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "i": rng.integers(0, 1 << 40, rows),
            "f": rng.random(rows),
            "s": [f"item-{i % 1000:04d}" for i in range(rows)],
            "c": pd.Categorical(rng.choice(["red", "green", "blue"], rows)),
            "t": pd.date_range("2026-01-01", periods=rows, freq="s"),
        }
    )


def user_frame(seed: int, rows: int = 200_000) -> Any:
    """What a new user's task makes: ints, floats and a string column (pandas' ``str`` dtype)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"i": rng.integers(0, 1 << 40, rows), "f": rng.random(rows), "s": [f"user-{i % 5000:05d}" for i in range(rows)]}
    )


def summarize(df: Any) -> float:
    """What the next task does with it (reads every column)."""
    return float(df["f"].sum()) + float(df["s"].nunique()) + float(df["i"].iloc[-1] % 7)


def closure(seed: int, nbytes: int = MiB) -> Any:
    """A function made inside a function, carrying an array: sent by value."""
    weights = array(seed, nbytes)

    def score(i: int) -> float:
        return float(weights[i % len(weights)] * 2)

    return score


def inputs(workload: str, n: int) -> list[Any]:
    """The values the client sends for ``n`` tasks of a workload (made outside the timing)."""
    if workload == "tiny tasks":
        return list(range(n))
    if workload == "64 MiB arrays":
        return [array(i) for i in range(n)]
    if workload == "100k-row DataFrames":
        return [frame(i) for i in range(n)]
    return [closure(i) for i in range(n)]


def nbytes(values: list[Any]) -> int:
    total = 0
    for v in values:
        if hasattr(v, "nbytes"):
            total += int(v.nbytes)
        elif hasattr(v, "memory_usage"):
            total += int(v.memory_usage(deep=True).sum())
        elif callable(v):
            total += sum(int(getattr(c.cell_contents, "nbytes", 0)) for c in v.__closure__ or ())
    return total


def check(workload: str, values: list[Any], results: list[Any]) -> None:
    """Raises if the results are not what the tasks should return."""
    if len(results) != len(values):
        raise AssertionError(f"{workload}: {len(results)} results for {len(values)} tasks")
    if workload == "tiny tasks":
        ok = results == [v + 1 for v in values]
    elif workload == "64 MiB arrays":
        import numpy as np

        ok = all(np.array_equal(a, b) for a, b in zip(values, results))
    elif workload == "100k-row DataFrames":
        ok = all(a.equals(b) for a, b in zip(values, results))
    else:
        ok = all(r == v(i) for i, (v, r) in enumerate(zip(values, results)))
    if not ok:
        raise AssertionError(f"{workload}: the results differ from the inputs")


def measure_workloads(
    engine: str, serializer: str, quick: bool, batch: Any, workers: Any = None, only: Any = None
) -> list[dict[str, Any]]:
    """Times ``batch(workload, values)`` (which runs the tasks and returns their results) once per
    workload, after a warm-up batch of two, checks the results and returns the rows. ``workers``
    (a callable giving the worker pids) adds ``peak_bytes``: how far the parent's and the workers'
    resident memory rose during the batch and the check (:mod:`freight.bench.engines._peak`).
    ``only=(workload, values)``: that workload alone, on values made by the caller (an engine that
    alternates serializers batch by batch sends both the same values)."""
    import time

    from freight.bench.engines import _peak

    rows = []
    todo = [only] if only is not None else [(w, None) for w, _, _ in WORKLOADS]
    counts = {w: n_quick if quick else n_full for w, n_full, n_quick in WORKLOADS}
    for workload, given in todo:
        values = given if given is not None else inputs(workload, counts[workload])
        batch(workload, values[:2])  # warm up: imports, connections
        base = _peak.reset(_peak.with_parent(workers())) if workers is not None else None
        t0 = time.perf_counter()
        results = batch(workload, values)
        seconds = time.perf_counter() - t0
        check(workload, values, results)
        row = {"engine": engine, "workload": workload, "serializer": serializer, "tasks": len(values),
               "seconds": seconds, "bytes": nbytes(values)}  # fmt: skip
        if workers is not None:
            row["peak_bytes"] = _peak.rise(base)
        rows.append(row)
        del results, values
    return rows
