"""Run by the ``mpi4py`` engine benchmark under ``mpiexec -n 2``: ``python -m
freight.bench.engines._mpi_program MODE [--quick]``, MODE ``default`` (mpi4py's pickle),
``freight`` (``install()``, one message per value) or ``wrap`` (``wrap(comm)``, freight's frames
as separate messages). Rank 0 sends each value to rank 1, which sends back the result (a round trip
per task: blocking sends of large values both ways at once would deadlock); rank 0 prints the rows
as JSON on its last line."""

from __future__ import annotations

import json
import sys
from typing import Any

from mpi4py import MPI

from freight.bench.engines import tasks

ENGINE = {"default": "mpi4py", "freight": "mpi4py", "wrap": "mpi4py wrap"}


def main(mode: str, quick: bool) -> None:
    comm = MPI.COMM_WORLD
    if mode != "default":
        import freight.integrations.mpi4py as fm

        fm.install()
        if mode == "wrap":
            comm = fm.wrap(comm)
    if comm.Get_rank() == 1:
        while (msg := comm.recv(source=0)) is not None:
            fn, value = msg
            comm.send(getattr(tasks, fn)(value), dest=0)
        return

    def batch(workload: str, values: list[Any]) -> list[Any]:
        if workload == "closures carrying arrays":
            return [fn(i) for i, fn in enumerate(values)]  # pickle cannot send closures: local in all modes
        fn = "inc" if workload == "tiny tasks" else "echo"
        out = []
        for v in values:
            comm.send((fn, v), dest=1)
            out.append(comm.recv(source=1))
        return out

    serializer = "default" if mode == "default" else "freight"
    rows = tasks.measure_workloads(ENGINE[mode], serializer, quick, batch)
    comm.send(None, dest=1)
    print(json.dumps(rows), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], "--quick" in sys.argv)
