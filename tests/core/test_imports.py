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
CORE = ["freight", "freight._api", "freight._files", "freight._freight", "freight.exceptions", "freight.registry"]

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
