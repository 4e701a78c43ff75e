"""mpi4py, end to end: ``mpiexec -n 2``, rank 0 sending each value to rank 1 and getting the result
back with the lowercase ``send``/``recv``. Default is mpi4py's pickle; freight is measured twice:
``install()`` (row ``mpi4py``: one freight payload per message) and ``wrap(comm)`` (row ``mpi4py
wrap``: large frames as separate messages, not copied). One ``mpiexec`` runs every mode, switching
mpi4py's pickle between them, over several rounds in alternating order (``run``); the default's
rows serve as the baseline of both freight rows (reported under both engine names)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

#: mpi4py's pickle cannot send closures (by reference only): every mode calls them on rank 0
SAME_PATH = {"closures carrying arrays": "pickle cannot send closures: called locally in both modes"}
ROUNDS = 3


def run(quick: bool) -> list[dict[str, Any]]:
    binary = shutil.which("mpiexec")
    if binary is None:
        raise RuntimeError("mpiexec is not installed (apt-get install openmpi-bin libopenmpi-dev)")
    # Open MPI refuses root (containers) without both variables; 2 ranks may exceed the cores it counts
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    program = [sys.executable, "-m", "freight.bench.engines._mpi_program", str(ROUNDS)]
    cmd = [binary, "-n", "2", "--oversubscribe", *program]
    proc = subprocess.run(cmd + (["--quick"] if quick else []), capture_output=True, text=True, timeout=1800, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"mpiexec failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    baseline = [{**row, "engine": "mpi4py wrap"} for row in rows if row["serializer"] == "default"]
    return rows + baseline
