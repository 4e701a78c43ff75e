"""ProxyStore, end to end: two stores over ``FileConnector``s in one temporary folder, one with
ProxyStore's default serializer (``proxystore.serialize``: ``np.save`` for arrays, pickle 5 for
pandas, IPC for polars, pickle/cloudpickle otherwise), one from ``freight_store``; default and
freight measured in the same run, interleaved round by round (each row: the best of 5 rounds,
3 for the seed, 1 with quick).

Workloads (:mod:`freight.bench.engines.tasks`, plus the seed's):

* "tiny values (put + get)" (for the shared "tiny tasks"): ``put`` then ``get`` of a small int,
  in this process (a pool round trip would dominate: this is the store's own per-object cost);
* "64 MiB arrays", "100k-row DataFrames", "closures carrying arrays": the client proxies each
  value, a spawn ``ProcessPoolExecutor`` of 2 workers resolves it, runs the task (echo, or call
  the closure) and proxies its result back through the same store, which the client resolves
  (proxies with ``evict=True``: each file is removed once resolved, as one-shot data is);
* "seed: rand(10000, 10000) put/get": ProxyStore issue #591's case, ``store.put`` then
  ``store.get`` of ``numpy.random.rand(10000, 10000)`` (800 MB; 2000 x 2000 with quick).
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from freight.bench.engines import tasks

SEED = "seed: rand(10000, 10000) put/get"
TINY = "tiny values (put + get)"


def _task(workload: str, proxy: Any, i: int) -> Any:
    """Runs in a worker: resolves the argument, runs the task, proxies the result back."""
    from proxystore.proxy import extract, get_factory

    value = extract(proxy)
    if workload == "closures carrying arrays":
        return tasks.call(value, i)  # a float: no proxy for it
    store = get_factory(proxy).get_store()
    return store.proxy(tasks.echo(value), evict=True, populate_target=False)


def _batch(pool: Any, store: Any, workload: str, values: list[Any]) -> list[Any]:
    from proxystore.proxy import Proxy, extract

    if workload == "tiny tasks":
        return [store.get(store.put(tasks.inc(v))) for v in values]
    proxies = [store.proxy(v, evict=True, populate_target=False) for v in values]
    results = list(pool.map(_task, [workload] * len(values), proxies, range(len(values))))
    return [extract(r) if isinstance(r, Proxy) else r for r in results]


def _check(workload: str, values: list[Any], results: list[Any]) -> None:
    if workload == "tiny tasks":
        if results != [v + 1 for v in values]:
            raise AssertionError("tiny tasks: wrong results")
        return
    tasks.check(workload, values, results)


def _seed(store: Any, n: int) -> float:
    import numpy as np

    x = np.random.rand(n, n)
    t0 = time.perf_counter()
    key = store.put(x)
    y = store.get(key)
    seconds = time.perf_counter() - t0
    store.evict(key)
    if not np.array_equal(x, y):
        raise AssertionError("seed: the array came back different")
    return seconds


def run(quick: bool) -> list[dict[str, Any]]:
    """Rows ``{"engine": "proxystore", "workload", "serializer", "tasks", "seconds", "bytes"}``."""
    from proxystore.connectors.file import FileConnector
    from proxystore.store import Store

    from freight.integrations.proxystore import freight_store

    rounds = 1 if quick else 5  # this machine's noise needs several (the seed: 3, it is 800 MB)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="freight-bench-proxystore-") as folder:
        stores = {
            "default": Store("freight-bench-default", FileConnector(f"{folder}/default"), cache_size=0),
            "freight": freight_store("freight-bench-freight", FileConnector(f"{folder}/freight"), cache_size=0),
        }
        ctx = multiprocessing.get_context("spawn")
        try:
            with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
                for workload, n_full, n_quick in tasks.WORKLOADS:
                    values = tasks.inputs(workload, n_quick if quick else n_full)
                    best = {"default": float("inf"), "freight": float("inf")}
                    for store in stores.values():  # warm up: worker imports, first stores
                        _batch(pool, store, workload, values[:2])
                    for r in range(rounds):
                        for mode in ("default", "freight") if r % 2 == 0 else ("freight", "default"):
                            t0 = time.perf_counter()
                            results = _batch(pool, stores[mode], workload, values)
                            seconds = time.perf_counter() - t0
                            _check(workload, values, results)
                            del results
                            best[mode] = min(best[mode], seconds)
                    name = TINY if workload == "tiny tasks" else workload
                    for mode, seconds in best.items():
                        rows.append(
                            {"engine": "proxystore", "workload": name, "serializer": mode,
                             "tasks": len(values), "seconds": seconds, "bytes": tasks.nbytes(values)}
                        )  # fmt: skip
                    del values
            n = 2000 if quick else 10000
            best = {"default": float("inf"), "freight": float("inf")}
            for r in range(min(rounds, 3)):
                for mode in ("default", "freight") if r % 2 == 0 else ("freight", "default"):
                    best[mode] = min(best[mode], _seed(stores[mode], n))
            seed = SEED if n == 10000 else f"seed: rand({n}, {n}) put/get"
            for mode, seconds in best.items():
                rows.append({"engine": "proxystore", "workload": seed, "serializer": mode, "tasks": 1,
                             "seconds": seconds, "bytes": n * n * 8})  # fmt: skip
        finally:
            for store in stores.values():
                store.close()
    return rows
