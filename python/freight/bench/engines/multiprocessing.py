"""multiprocessing and concurrent.futures, end to end: a ``Pool`` (row ``multiprocessing``) and a
``ProcessPoolExecutor`` (row ``concurrent.futures``) of two forkserver workers, pickle through the
pipe (default) against :func:`freight.integrations.multiprocessing.install` (freight). Values are
task arguments and come back as results (``echo``). Besides the shared workloads it measures
"1 GiB array to one worker and back" (skipped with ``--quick``). Each row also carries
``peak_bytes``: how far the parent's and the workers' resident memory rose during the batch and the
check of its results (:mod:`freight.bench.engines._peak`)."""

from __future__ import annotations

import concurrent.futures
import multiprocessing as mp
import time
from typing import Any

import numpy as np

from freight.bench.engines import _peak, tasks

GIB = "1 GiB array to one worker and back"

#: closures cannot cross ForkingPickler (it pickles functions by reference): both modes call them here
SAME_PATH = {"closures carrying arrays": "plain pickle cannot send closures: called locally in both modes"}


def _batch(runner: Any, workload: str, values: list[Any]) -> list[Any]:
    if workload == "tiny tasks":
        return list(runner(tasks.inc, values))
    if workload == "closures carrying arrays":
        return [fn(i) for i, fn in enumerate(values)]  # plain pickle cannot send closures: local calls
    return list(runner(tasks.echo, values))


def measure(serializer: str, quick: bool) -> list[dict[str, Any]]:
    if serializer == "freight":
        import freight.integrations.multiprocessing as fmp

        fmp.install()
    ctx = mp.get_context("forkserver")
    rows: list[dict[str, Any]] = []
    with ctx.Pool(2) as pool:
        pool.map(time.sleep, [0.2] * 4, chunksize=1)  # both workers up before anything is timed

        def run(w: Any, v: Any) -> Any:
            return _batch(lambda f, xs: pool.map(f, xs, chunksize=1), w, v)

        def workers() -> list[int]:
            return [w.pid for w in pool._pool]  # type: ignore[attr-defined]

        rows += tasks.measure_workloads("multiprocessing", serializer, quick, run, workers)
        if not quick:
            a = tasks.array(0, 1 << 30)
            pool.apply(tasks.echo, (a[:10],))
            base = _peak.reset(_peak.with_parent(workers()))
            t0 = time.perf_counter()
            back = pool.apply(tasks.echo, (a,))
            seconds = time.perf_counter() - t0
            if not np.array_equal(a, back):  # reads every page of the result, as tasks.check does
                raise AssertionError(f"{GIB}: the result differs")
            rows.append({"engine": "multiprocessing", "workload": GIB, "serializer": serializer, "tasks": 1,
                         "seconds": seconds, "bytes": a.nbytes, "peak_bytes": _peak.rise(base)})  # fmt: skip
            del back, a
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as ex:
        list(ex.map(time.sleep, [0.2] * 4))  # both workers up (started on demand) before timing
        rows += tasks.measure_workloads("concurrent.futures", serializer, quick,
                                        lambda w, v: _batch(lambda f, xs: ex.map(f, xs), w, v),
                                        lambda: list(ex._processes))  # fmt: skip
    return rows
