"""A short run of the Python-level fuzzing campaign (``make fuzz`` runs it for minutes): random
mutations of payloads of every built-in serializer, loaded with ``allow_pickle=False`` in child
processes under glibc's heap checks; no crash and no exception other than a FreightError. One
child of 300 mutations per kind: bounded by count, not time, so a busy machine only makes it
slower."""

from __future__ import annotations

import os
import subprocess
import sys

from support import ROOT


def test_mutated_payloads_of_every_serializer_only_raise_freight_errors(tmp_path):
    env = dict(os.environ, PYTHONMALLOC="malloc", MALLOC_CHECK_="3", TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "loads_mutations.py"), "--rounds", "1", "--mutations", "300",
         "--out", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    table = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines() if line and line[0].isalpha()}
    # Every kind ran, and nothing but FreightErrors came out.
    kinds = {kind: counts for kind, counts in table.items() if kind not in ("kind", "all")}
    assert {"builtins", "numpy", "pandas", "polars", "pyarrow", "scipy-csr", "torch", "xarray"} <= set(kinds)
    for kind, counts in kinds.items():
        assert int(counts[0]) >= 300, f"{kind}: {proc.stdout}"
    assert table["all"][1:] == ["0", "0"], proc.stdout
