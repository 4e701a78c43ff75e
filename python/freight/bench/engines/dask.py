"""Dask distributed, end to end: a LocalCluster of 2 worker processes, its default serialization
against ``freight.integrations.dask.install``. Values are scattered (``hash=False``), mapped with
``pure=False`` and gathered, so every byte crosses the wire both ways through the serializer.

One more workload, where a new user meets DataFrames: "200k-row frames, worker to worker", each
frame (ints, floats, a string column) made by a task on one worker and summarized by a task on
the other, so that it moves between workers (Dask's per-type path, where freight registers
pandas) and only a float comes back."""

from __future__ import annotations

import time
from typing import Any

from freight.bench.engines import tasks

FRAMES_BETWEEN_WORKERS = "200k-row frames, worker to worker"
#: (tasks in a full run, with --quick): each task is a pair (make, summarize)
FRAMES_BETWEEN_WORKERS_TASKS = (16, 8)

#: workloads Dask sends the same way with and without freight: their ratio is the machine's noise
SAME_PATH = {"64 MiB arrays": "numpy: Dask's zero-copy handler either way"}


def _batch(client: Any, workload: str, values: list[Any]) -> list[Any]:
    if workload == "tiny tasks":
        return client.gather(client.map(tasks.inc, values, pure=False))
    futures = client.scatter(values, hash=False)
    if workload == "closures carrying arrays":
        return client.gather(client.map(tasks.call, futures, list(range(len(values))), pure=False))
    return client.gather(client.map(tasks.echo, futures, pure=False))


def _frames_between_workers(client: Any, seeds: list[int]) -> list[float]:
    first, second = sorted(client.scheduler_info()["workers"])[:2]
    made = [client.submit(tasks.user_frame, seed, workers=[first], pure=False) for seed in seeds]
    used = [client.submit(tasks.summarize, frame, workers=[second], pure=False) for frame in made]
    return client.gather(used)


def _measure_frames_between_workers(client: Any, serializer: str, quick: bool) -> dict[str, Any]:
    seeds = list(range(FRAMES_BETWEEN_WORKERS_TASKS[1] if quick else FRAMES_BETWEEN_WORKERS_TASKS[0]))
    _frames_between_workers(client, [1000, 1001])  # warm up: imports, connections
    t0 = time.perf_counter()
    results = _frames_between_workers(client, seeds)
    seconds = time.perf_counter() - t0
    if results != [tasks.summarize(tasks.user_frame(seed)) for seed in seeds]:
        raise AssertionError(f"{FRAMES_BETWEEN_WORKERS}: the summaries differ from the frames'")
    nbytes = int(tasks.user_frame(0).memory_usage(deep=True).sum()) * len(seeds)
    return {"engine": "dask", "workload": FRAMES_BETWEEN_WORKERS, "serializer": serializer, "tasks": len(seeds),
            "seconds": seconds, "bytes": nbytes}  # fmt: skip


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
        rows = tasks.measure_workloads("dask", serializer, quick, lambda w, v: _batch(client, w, v))
        rows.append(_measure_frames_between_workers(client, serializer, quick))
        return rows
