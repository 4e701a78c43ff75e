"""Ray, end to end: a local Ray cluster (``ray.init(num_cpus=2)``), Ray's default serialization
(cloudpickle 5, out-of-band buffers in the shared-memory object store) against freight registered
per type (:mod:`freight.integrations.ray`). Values are task arguments and come back as results.

Both modes run in one cluster, interleaved round by round: the driver installs or uninstalls
freight before each batch, and each task does the same in its worker before it returns (the
registration decides how a process *writes*; any process reads both). Each row's ``seconds`` is
the best of the rounds.

Besides the shared workloads (:mod:`freight.bench.engines.tasks`: ints, numpy arrays, pandas
frames, closures carrying numpy arrays) it measures the types freight is registered for that those
lack: tiny tasks on 4-element torch tensors, 64 MiB torch tensors and 100k-row polars DataFrames.
freight is not registered for ints, numpy or pandas, so on "tiny tasks", "64 MiB arrays",
"100k-row DataFrames" and "closures carrying arrays" both modes take Ray's own path (their ratio
shows the noise).
"""

from __future__ import annotations

import os
import time
from typing import Any

from freight.bench.engines import tasks

MiB = 1 << 20
TINY_TENSORS = "tiny tasks (4-element torch tensors)"
EXTRA_WORKLOADS = ((TINY_TENSORS, 2000, 300), ("64 MiB torch tensors", 8, 4), ("100k-row polars DataFrames", 16, 8))

_MODE: str | None = None  # in each process: "freight" when installed


def _set_mode(mode: str) -> None:
    global _MODE
    if mode != _MODE:
        import freight.integrations.ray as fr

        if mode == "freight":
            fr.install()
        else:
            fr.uninstall()
        _MODE = mode


#: workloads whose values Ray sends the same way with or without freight (freight registers no
#: serializer for their types, by measurement): their ratio is Ray's run-to-run noise
SAME_PATH = {
    "tiny tasks": "ints: Ray's own path",
    "64 MiB arrays": "numpy: Ray's zero-copy path, never freight",
    "100k-row DataFrames": "pandas: Ray's pickle-5 path measured as fast",
    "closures carrying arrays": "functions: Ray's cloudpickle",
}


def _run(mode: str, workload: str, value: Any, i: int) -> Any:
    """The task body: ``tasks.inc``, ``tasks.echo`` or ``tasks.call`` as the workload wants."""
    _set_mode(mode)
    if workload in ("tiny tasks", TINY_TENSORS):
        return tasks.inc(value)
    if workload == "closures carrying arrays":
        return tasks.call(value, i)
    return tasks.echo(value)


def _inputs(workload: str, n: int) -> list[Any]:
    if workload == TINY_TENSORS:
        import torch

        return [torch.arange(4.0) + i for i in range(n)]
    if workload == "64 MiB torch tensors":
        import torch

        return [torch.from_numpy(tasks.array(i, 64 * MiB)) for i in range(n)]
    if workload == "100k-row polars DataFrames":
        import polars as pl

        return [pl.from_pandas(tasks.frame(i)) for i in range(n)]
    return tasks.inputs(workload, n)


def _check(workload: str, values: list[Any], results: list[Any]) -> None:
    if workload == TINY_TENSORS:
        import torch

        ok = all(torch.equal(a + 1, b) for a, b in zip(values, results))
    elif workload == "64 MiB torch tensors":
        import torch

        ok = all(torch.equal(a, b) for a, b in zip(values, results))
    elif workload == "100k-row polars DataFrames":
        ok = all(a.equals(b) for a, b in zip(values, results))
    else:
        tasks.check(workload, values, results)
        return
    if len(results) != len(values) or not ok:
        raise AssertionError(f"{workload}: the results differ from the inputs")


def _nbytes(workload: str, values: list[Any]) -> int:
    if workload in (TINY_TENSORS, "64 MiB torch tensors"):
        return sum(v.numel() * v.element_size() for v in values)
    if workload == "100k-row polars DataFrames":
        return sum(int(v.estimated_size()) for v in values)
    return tasks.nbytes(values)


def run(quick: bool) -> list[dict[str, Any]]:
    """Rows ``{"engine": "ray", "workload", "serializer", "tasks", "seconds", "bytes"}``, default
    and freight measured in the same cluster, interleaved (best of 1 round with ``quick``, else 5)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    import freight.integrations.ray as fr

    rounds = 1 if quick else 5  # Ray's timings here vary 2-4x from batch to batch
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env=fr.runtime_env(),
    )
    rows: list[dict[str, Any]] = []
    try:
        remote = ray.remote(_run)

        def batch(mode: str, workload: str, values: list[Any]) -> list[Any]:
            _set_mode(mode)
            refs = [remote.remote(mode, workload, v, i) for i, v in enumerate(values)]
            return ray.get(refs)

        for workload, n_full, n_quick in tasks.WORKLOADS + EXTRA_WORKLOADS:
            values = _inputs(workload, n_quick if quick else n_full)
            best = {"default": float("inf"), "freight": float("inf")}
            for mode in best:  # warm up both paths (worker imports, first registrations)
                batch(mode, workload, values[:2])
            for r in range(rounds):
                for mode in ("default", "freight") if r % 2 == 0 else ("freight", "default"):
                    t0 = time.perf_counter()
                    results = batch(mode, workload, values)
                    seconds = time.perf_counter() - t0
                    _check(workload, values, results)
                    del results
                    best[mode] = min(best[mode], seconds)
            for mode, seconds in best.items():
                rows.append({"engine": "ray", "workload": workload, "serializer": mode, "tasks": len(values),
                             "seconds": seconds, "bytes": _nbytes(workload, values)})  # fmt: skip
            del values
    finally:
        _set_mode("default")
        ray.shutdown()
    return rows
