"""Run by the ``mpi4py`` engine benchmark under ``mpiexec -n 2``: ``python -m
freight.bench.engines._mpi_program ROUNDS [--quick]``. Each round measures every mode, in an order
that alternates between rounds so that machine noise hits them alike: ``default`` (mpi4py's
pickle), ``freight`` (``install()``, one message per value) and ``wrap`` (``wrap(comm)``: small
values in one message, large frames as messages of their own). Rank 0 sends each value to rank 1,
which sends back the result (a round trip per task: blocking sends of large values both ways at
once would deadlock); rank 0 prints the rows of every round as JSON on its last line."""

from __future__ import annotations

import json
import sys
from typing import Any

from mpi4py import MPI

import freight.integrations.mpi4py as fm
from freight.bench.engines import tasks

MODES = ("default", "freight", "wrap")
ENGINE = {"default": "mpi4py", "freight": "mpi4py", "wrap": "mpi4py wrap"}


def _communicator(mode: str) -> Any:
    """The communicator of ``mode``, with mpi4py's pickle switched to match (on this rank)."""
    if mode == "default":
        fm.uninstall()
        return MPI.COMM_WORLD
    fm.install()
    return fm.wrap(MPI.COMM_WORLD) if mode == "wrap" else MPI.COMM_WORLD


def _serve(comm: Any) -> None:
    """Rank 1: runs what rank 0 sends until it sends None."""
    while (msg := comm.recv(source=0)) is not None:
        fn, value = msg
        comm.send(getattr(tasks, fn)(value), dest=0)


def _measure(mode: str, comm: Any, quick: bool) -> list[dict[str, Any]]:
    def batch(workload: str, values: list[Any]) -> list[Any]:
        if workload == "closures carrying arrays":
            return [fn(i) for i, fn in enumerate(values)]  # pickle cannot send closures: local in all modes
        fn = "inc" if workload == "tiny tasks" else "echo"
        out = []
        for v in values:
            comm.send((fn, v), dest=1)
            out.append(comm.recv(source=1))
        return out

    rows = tasks.measure_workloads(ENGINE[mode], "default" if mode == "default" else "freight", quick, batch)
    comm.send(None, dest=1)
    return rows


def main(rounds: int, quick: bool) -> None:
    rank = MPI.COMM_WORLD.Get_rank()
    rows: list[dict[str, Any]] = []
    for r in range(rounds):
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            comm = _communicator(mode)
            MPI.COMM_WORLD.Barrier()
            if rank == 1:
                _serve(comm)
            else:
                rows += _measure(mode, comm, quick)
    if rank == 0:
        print(json.dumps(rows), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), "--quick" in sys.argv)
