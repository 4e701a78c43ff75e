"""Dask distributed, end to end: a LocalCluster of 2 worker processes, its default serialization
against ``freight.integrations.dask.install``. Values are scattered (``hash=False``), mapped with
``pure=False`` and gathered, so every byte crosses the wire both ways through the serializer."""

from __future__ import annotations

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

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", memory_limit=0
        ) as cluster,
        Client(cluster) as client,
    ):
        if serializer == "freight":
            from freight.integrations import dask as fd

            fd.install(client)
        return tasks.measure_workloads("dask", serializer, quick, lambda w, v: _batch(client, w, v))
