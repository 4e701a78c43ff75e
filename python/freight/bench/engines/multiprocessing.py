"""multiprocessing and concurrent.futures, end to end: a ``Pool`` (row ``multiprocessing``) and a
``ProcessPoolExecutor`` (row ``concurrent.futures``) of two forkserver workers, pickle through the
pipe (default) against :func:`freight.integrations.multiprocessing.install` (freight). Values are
task arguments and come back as results (``echo``). Besides the shared workloads it measures
"1 GiB array to one worker and back" (skipped with ``--quick``). Each row also carries
``peak_bytes``: how far the parent's and the workers' resident memory rose during the batch and the
check of its results (:mod:`freight.bench.engines._peak`).

Both pools of a pair run side by side in one process and their batches alternate, ``ROUNDS``
times each (the summary keeps each one's median): on a shared machine the default pool's own time
varied 3-4× between runs, and two child processes measured minutes apart gave ratios that said
more about the machine's load than about freight. The parent installs freight for the freight
pool's batches and uninstalls it for the default pool's (its workers were started without it)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing as mp
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from freight.bench.engines import _peak, tasks

GIB = "1 GiB array to one worker and back"

#: closures cannot cross ForkingPickler (it pickles functions by reference): both modes call them here
SAME_PATH = {"closures carrying arrays": "plain pickle cannot send closures: called locally in both modes"}

#: batches per workload and serializer, alternating default and freight
ROUNDS = {True: 5, False: 7}


def _batch(runner: Any, workload: str, values: list[Any]) -> list[Any]:
    if workload == "tiny tasks":
        return list(runner(tasks.inc, values))
    if workload == "closures carrying arrays":
        return [fn(i) for i, fn in enumerate(values)]  # plain pickle cannot send closures: local calls
    return list(runner(tasks.echo, values))


@contextlib.contextmanager
def _serializer(name: str) -> Iterator[None]:
    """This process pickles with freight inside the block when ``name`` is ``"freight"``."""
    import freight.integrations.multiprocessing as fmp

    if name == "freight":
        fmp.install()
    try:
        yield
    finally:
        fmp.uninstall()


def _pools(kind: str, ctx: Any) -> dict[str, Any]:
    """One started pool per serializer, both workers up before anything is timed."""
    pools = {}
    for serializer in ("default", "freight"):
        with _serializer(serializer):  # a worker installs freight as it starts: see fmp._started
            if kind == "multiprocessing":
                pool = ctx.Pool(2)
                pool.map(time.sleep, [0.2] * 4, chunksize=1)
            else:
                pool = concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx)
                list(pool.map(time.sleep, [0.2] * 4))  # started on demand
        pools[serializer] = pool
    return pools


def _runner(kind: str, pool: Any) -> Any:
    if kind == "multiprocessing":
        return lambda w, v: _batch(lambda f, xs: pool.map(f, xs, chunksize=1), w, v)
    return lambda w, v: _batch(lambda f, xs: pool.map(f, xs), w, v)


def _workers(kind: str, pool: Any) -> Any:
    if kind == "multiprocessing":
        return lambda: [w.pid for w in pool._pool]  # type: ignore[attr-defined]
    return lambda: list(pool._processes)


def _interleaved(kind: str, pools: dict[str, Any], quick: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for workload, n_full, n_quick in tasks.WORKLOADS:
        values = tasks.inputs(workload, n_quick if quick else n_full)
        for r in range(ROUNDS[quick]):
            for serializer in ("default", "freight") if r % 2 == 0 else ("freight", "default"):
                pool = pools[serializer]
                with _serializer(serializer):
                    rows += tasks.measure_workloads(kind, serializer, quick, _runner(kind, pool),
                                                    _workers(kind, pool), only=(workload, values))  # fmt: skip
        del values
    return rows


def _gib(pool: Any, serializer: str) -> dict[str, Any]:
    a = tasks.array(0, 1 << 30)
    pool.apply(tasks.echo, (a[:10],))
    base = _peak.reset(_peak.with_parent([w.pid for w in pool._pool]))
    t0 = time.perf_counter()
    back = pool.apply(tasks.echo, (a,))
    seconds = time.perf_counter() - t0
    if not np.array_equal(a, back):  # reads every page of the result, as tasks.check does
        raise AssertionError(f"{GIB}: the result differs")
    return {"engine": "multiprocessing", "workload": GIB, "serializer": serializer, "tasks": 1,
            "seconds": seconds, "bytes": a.nbytes, "peak_bytes": _peak.rise(base)}  # fmt: skip


def run(quick: bool) -> list[dict[str, Any]]:
    ctx = mp.get_context("forkserver")
    rows: list[dict[str, Any]] = []
    for kind in ("multiprocessing", "concurrent.futures"):
        pools = _pools(kind, ctx)
        try:
            rows += _interleaved(kind, pools, quick)
            if kind == "multiprocessing" and not quick:
                for serializer in ("default", "freight"):
                    with _serializer(serializer):
                        rows.append(_gib(pools[serializer], serializer))
        finally:
            for pool in pools.values():
                if kind == "multiprocessing":
                    pool.terminate()
                    pool.join()
                else:
                    pool.shutdown()
    return rows
