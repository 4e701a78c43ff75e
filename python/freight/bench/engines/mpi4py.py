"""mpi4py, end to end: ``mpiexec -n 2``, rank 0 sending each value to rank 1 and getting the result
back with the lowercase ``send``/``recv``. Default is mpi4py's pickle; freight is measured twice:
``install()`` (row ``mpi4py``: one freight payload per message) and ``wrap(comm)`` (row ``mpi4py
wrap``: freight's frames as separate messages, not copied). The default's rows serve as the
baseline of both (the same run, reported under both engine names)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

#: mpi4py's pickle cannot send closures (by reference only): every mode calls them on rank 0
SAME_PATH = {"closures carrying arrays": "pickle cannot send closures: called locally in both modes"}


def _mpiexec(mode: str, quick: bool) -> list[dict[str, Any]]:
    binary = shutil.which("mpiexec")
    if binary is None:
        raise RuntimeError("mpiexec is not installed (apt-get install openmpi-bin libopenmpi-dev)")
    # Open MPI refuses root (containers) without both variables; 2 ranks may exceed the cores it counts
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    cmd = [binary, "-n", "2", "--oversubscribe", sys.executable, "-m", "freight.bench.engines._mpi_program", mode]
    proc = subprocess.run(cmd + (["--quick"] if quick else []), capture_output=True, text=True, timeout=1200, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"mpiexec ({mode}) failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(serializer: str, quick: bool) -> list[dict[str, Any]]:
    if serializer == "default":
        rows = _mpiexec("default", quick)
        return rows + [{**row, "engine": "mpi4py wrap"} for row in rows]
    return _mpiexec("freight", quick) + _mpiexec("wrap", quick)
