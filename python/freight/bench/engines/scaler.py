"""Scaler, end to end: a local SchedulerClusterCombo of 2 workers, Scaler's default serializer
(cloudpickle) against ``FreightSerializer()``. Values are arguments of ``client.map`` and come back
as results, so they cross the wire both ways through the serializer."""

from __future__ import annotations

import socket
from typing import Any

from freight.bench.engines import tasks


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _batch(client: Any, workload: str, values: list[Any]) -> list[Any]:
    if workload == "tiny tasks":
        return client.map(tasks.inc, values)
    if workload == "closures carrying arrays":
        return client.map(tasks.call, values, list(range(len(values))))
    return client.map(tasks.echo, values)


def measure(serializer: str, quick: bool) -> list[dict[str, Any]]:
    from scaler import Client, SchedulerClusterCombo

    address = f"tcp://127.0.0.1:{_free_port()}"
    cluster = SchedulerClusterCombo(n_workers=2, address=address, logging_level="WARNING")
    try:
        if serializer == "freight":
            from freight.integrations.scaler import FreightSerializer

            client = Client(address=address, serializer=FreightSerializer())
        else:
            client = Client(address=address)
        try:
            rows = tasks.measure_workloads("scaler", serializer, quick, lambda w, v: _batch(client, w, v))
        finally:
            client.disconnect()
    finally:
        cluster.shutdown()
    return rows
