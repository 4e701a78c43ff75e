"""The package's import structure (issue 24): every module imports alone, in a fresh interpreter,
whatever was imported before it (an import circle shows up as a module that works only when
another one was imported first); and ``import freight`` runs only the core modules.

The layer order itself (which module may import which) is checked by ``lint-imports`` (the
``[tool.importlinter]`` contracts in pyproject.toml, run by ``make lint``)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import freight

PACKAGE = Path(freight.__file__).parent

# What ``import freight`` runs of freight: the API and what it stands on. The storage package,
# the serializers, the integrations, the CLI and the benchmark load when they are first used.
CORE = [
    "freight",
    "freight._api",
    "freight._files",
    "freight._freight",
    "freight._options",
    "freight.exceptions",
    "freight.registry",
]

# Imports one module in this fresh interpreter and prints what came of it as JSON: {"ok": true}, or
# the third-party library it needs and this environment lacks, or the traceback.
_IMPORT_ONE = """
import importlib, importlib.util, json, sys, traceback
name = sys.argv[1]
try:
    importlib.import_module(name)
    result = {"ok": True}
except ModuleNotFoundError as exc:
    top = (exc.name or "").split(".")[0]
    if top and top != "freight" and importlib.util.find_spec(top) is None:
        result = {"missing": top}
    else:
        result = {"error": traceback.format_exc()}
except BaseException:
    result = {"error": traceback.format_exc()}
print(json.dumps(result))
"""


def _module_names() -> list[str]:
    """Every module of the installed package, found on disk (importing packages to list them would
    import what they import): the .py files and the compiled extension."""
    names = []
    for path in sorted(PACKAGE.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        if path.suffix == ".py":
            parts = path.relative_to(PACKAGE).with_suffix("").parts
        elif path.suffix in (".so", ".pyd") and path.name.startswith("_freight."):
            parts = ("_freight",)
        else:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(("freight", *parts)))
    return names


MODULES = _module_names()


def _import_alone(name: str) -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_ONE, name],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},  # a library's deprecation noise is not ours
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"error": f"exit status {proc.returncode}\n{proc.stdout}\n{proc.stderr}"}
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def imported_alone() -> dict[str, dict[str, str]]:
    """Each module imported in its own interpreter; several at a time (the heavy libraries, torch
    or tensorflow, take seconds each to import)."""
    workers = max(2, min(8, os.cpu_count() or 2))
    with ThreadPoolExecutor(workers) as pool:
        return dict(zip(MODULES, pool.map(_import_alone, MODULES)))


def test_the_package_is_found_whole():
    assert len(MODULES) == len(set(MODULES))
    assert {"freight", "freight._freight", "freight.serializers.pandas", "freight.storage"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_module_imports_alone(name: str, imported_alone: dict[str, dict[str, str]]):
    result = imported_alone[name]
    if "missing" in result:
        # Only a library this environment does not have; freight's own modules never are.
        assert importlib.util.find_spec(result["missing"]) is None
        return
    assert result == {"ok": True}, f"import {name} in a fresh interpreter failed:\n{result['error']}"


def test_import_freight_runs_only_the_core():
    script = "import json, sys, freight; print(json.dumps(sorted(m for m in sys.modules if m.startswith('freight'))))"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == CORE


# --------------------------------------------------------------------------------------------
# Issue 30: ``import freight`` never depends on an optional module being importable
# --------------------------------------------------------------------------------------------

# Blocks the modules named in argv[1] the usual way a test makes a library missing (a None in
# sys.modules: any import of it raises ImportError, yet its name *is* in sys.modules), then
# imports freight and round-trips builtin values, stdlib values with lazily registered
# serializers (OrderedDict, deque, memoryview) and, unless cloudpickle is blocked, a lambda.
_BLOCKED = """
import sys
blocked = sys.argv[1].split(",")
for name in blocked:
    sys.modules[name] = None
import collections, datetime, decimal
import freight
value = {
    "when": datetime.datetime(2024, 1, 2, 3, 4, 5), "items": [1, 2.5, "x", b"y", None, (True, 3j)],
    "d": decimal.Decimal("1.5"), "od": collections.OrderedDict(a=1), "dq": collections.deque([1, 2]),
    "mv": memoryview(b"ab"), "s": {1, 2}, "c": collections.Counter("aab"),
}
back = freight.loads(freight.dumps(value))
assert back == value and type(back["od"]) is collections.OrderedDict and type(back["dq"]) is collections.deque
plain = {k: v for k, v in value.items() if k not in ("dq", "c")}  # deque and Counter travel as pickle
assert freight.loads(freight.dumps(plain), allow_pickle=False) == plain
if "cloudpickle" not in blocked:
    assert freight.loads(freight.dumps(lambda x: x + 1))(1) == 2
for name in blocked:
    assert sys.modules[name] is None, name + " was imported after all"
print("ok")
"""

OPTIONAL = ["numpy", "pandas", "pyarrow", "polars", "scipy", "torch", "tensorflow", "xarray", "cloudpickle", "zoneinfo"]


def _run_blocked(blocked: list[str], script: str = _BLOCKED) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", script, ",".join(blocked)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


@pytest.mark.parametrize("blocked", [[name] for name in OPTIONAL] + [OPTIONAL], ids=[*OPTIONAL, "all"])
def test_import_freight_works_with_an_optional_library_blocked(blocked):
    """Issue 30: ``_api._warm_up`` tested ``"numpy" in sys.modules``, true for a blocked numpy,
    and imported freight's numpy module: ``import freight`` raised ImportError."""
    proc = _run_blocked(blocked)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", f"blocked {blocked}:\n{proc.stderr[-3000:]}"


# The libraries whose serializers freight registers on first use, each with a dependency blocked:
# what still imports works, and what needs the blocked one says so.
_LAZY = """
import sys
blocked = sys.argv[1].split(",")
for name in blocked:
    sys.modules[name] = None
import freight
import numpy as np
arr = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])
out = freight.loads(freight.dumps({"a": np.arange(5), "m": arr}))
assert (out["a"] == np.arange(5)).all() and (out["m"].mask == arr.mask).all()
if "pandas" not in blocked:
    import pandas as pd
    df = pd.DataFrame({"x": np.arange(3), "s": ["a", "b", None]})
    pd.testing.assert_frame_equal(freight.loads(freight.dumps(df)), df)
print("ok")
"""


@pytest.mark.parametrize("blocked", [["pandas"], ["pyarrow"], ["scipy", "torch", "polars", "pyarrow", "xarray"]])
def test_lazily_registered_serializers_work_with_a_library_blocked(blocked):
    pytest.importorskip("numpy")
    proc = _run_blocked(blocked, _LAZY)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", f"blocked {blocked}:\n{proc.stderr[-3000:]}"


def test_import_freight_works_with_numpy_blocked_after_numpy_was_imported():
    """numpy imported, then blocked (a test that hides it after the fact): import freight does
    not import freight.serializers.numpy from the None left in sys.modules."""
    script = (
        "import sys, numpy\nsys.modules['numpy'] = None\n"
        "import freight\nassert freight.loads(freight.dumps([1])) == [1]\nprint('ok')"
    )
    pytest.importorskip("numpy")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
