"""freight.integrations.mpi4py: programs run under ``mpiexec -n 2`` (Open MPI, from `make
openmpi`), started from here; rank 0 reports what it checked as JSON."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("mpi4py")

pytestmark = pytest.mark.timeout(120)

_HERE = os.path.dirname(os.path.abspath(__file__))


def mpiexec(*args: str) -> dict:
    binary = shutil.which("mpiexec")
    if binary is None:
        pytest.fail("mpiexec is not installed: run `make openmpi` (apt-get install openmpi-bin libopenmpi-dev)")
    # root in containers: Open MPI refuses to run as root without both variables; 2 ranks may
    # exceed the cores it counts (--oversubscribe)
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "PYTHONPATH": os.pathsep.join(
               p for p in (_HERE, os.environ.get("PYTHONPATH")) if p)}  # fmt: skip
    cmd = [binary, "-n", "2", "--oversubscribe", sys.executable, os.path.join(_HERE, "mpi_program.py"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=100, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_lowercase_methods_in_band_and_out_of_band():
    report = mpiexec()
    assert report.pop("size") == 2
    assert report == {
        "inband_send": True, "inband_writeable": True, "inband_bcast": True,
        "inband_scatter_gather": True, "inband_allgather": True,
        "oob_send": True, "oob_writeable": True, "oob_bcast": True,
        "oob_scatter_gather": True, "oob_allgather": True, "inband_sizes": True,
        "wire_is_freight": True,
    }  # fmt: skip


def test_pickle_refused_with_allow_pickle_false():
    assert mpiexec("refuse") == {"size": 2, "refused": "UnsafePayloadError"}


def test_wrap_sends_small_values_in_one_message_and_large_ones_out_of_band():
    assert mpiexec("wrap") == {
        "size": 2, "small_one_message": True, "plain_recv_of_frames": True, "isend_large": True,
        "ssend_small": True, "sendrecv": True, "several_frames": True, "any_source_large": True,
        "mprobe": True, "scalars_one_message": True,
    }  # fmt: skip
