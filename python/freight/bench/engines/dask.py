"""Dask distributed, end to end: a LocalCluster of 2 worker processes, its default serialization
against ``freight.integrations.dask.install``. Values are scattered (``hash=False``), mapped with
``pure=False`` and gathered, so every byte crosses the wire both ways through the serializer."""

from __future__ import annotations

import time
from typing import Any

from freight.bench.engines import tasks


def _batch(client: Any, workload: str, values: list[Any]) -> list[Any]:
    if workload == "tiny tasks":
        return client.gather(client.map(tasks.inc, values, pure=False))
    futures = client.scatter(values, hash=False)
    if workload == "closures carrying arrays":
        return client.gather(client.map(tasks.call, futures, list(range(len(values))), pure=False))
    return client.gather(client.map(tasks.echo, futures, pure=False))


def measure(serializer: str, quick: bool) -> list[dict[str, Any]]:
    from distributed import Client, LocalCluster

    rows = []
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", memory_limit=0
        ) as cluster,
        Client(cluster) as client,
    ):
        if serializer == "freight":
            from freight.integrations import dask as fd

            fd.install(client)
        for workload, n_full, n_quick in tasks.WORKLOADS:
            values = tasks.inputs(workload, n_quick if quick else n_full)
            _batch(client, workload, values[:2])  # warm up: imports, connections
            t0 = time.perf_counter()
            results = _batch(client, workload, values)
            seconds = time.perf_counter() - t0
            tasks.check(workload, values, results)
            rows.append({"engine": "dask", "workload": workload, "serializer": serializer, "tasks": len(values),
                         "seconds": seconds, "bytes": tasks.nbytes(values)})  # fmt: skip
            del results, values
    return rows
