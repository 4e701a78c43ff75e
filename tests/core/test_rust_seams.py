"""The seams between the extension's Rust and freight's Python (issue 32): tools/check_rust_seams.py
(run by ``make lint``) passes on this tree, and fails, naming the Rust file and line and saying
what to do, on a new private-attribute read, a new run-time import, a name computed at run time,
an entry that no longer matches, a private attribute renamed on the Python side, and an import
the layer contracts do not put below the modules that reach it. The failing cases run the checker
on a copy of the tree with one change."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT

CHECKER = ROOT / "tools" / "check_rust_seams.py"
ALLOWLIST = "tools/rust_seams.toml"
PROBE = "crates/freight-py/src/seam_probe.rs"

pytest.importorskip("tomllib")  # the checker needs Python 3.11's tomllib

# A new function in the extension that reads a Registry attribute nobody listed and imports a
# module of freight nobody listed; the same names in a comment and in a string that is not an
# attribute's name do not count.
PROBE_SOURCE = """\
use pyo3::prelude::*;

// registry.getattr("_in_a_comment") is not a read
pub fn probe(py: Python<'_>, registry: &Bound<'_, PyAny>) -> PyResult<()> {
    let _views = registry.getattr(pyo3::intern!(py, "_secret_view"))?;
    let _note = "obj.getattr(\\"_in_a_string\\")";
    let _futures = py
        .import("freight.futures")?;
    Ok(())
}
"""


def run_checker(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECKER), "--root", str(root)], capture_output=True, text=True, check=False
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """What the checker reads of the repository, copied: the extension's Rust sources, the
    allowlist, pyproject.toml and the Python package (without the built extension)."""
    shutil.copytree(ROOT / "crates/freight-py/src", tmp_path / "crates/freight-py/src")
    shutil.copytree(
        ROOT / "python/freight",
        tmp_path / "python/freight",
        ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"),
    )
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / ALLOWLIST, tmp_path / ALLOWLIST)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} is not in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_the_tree_passes():
    result = run_checker(ROOT)
    assert result.returncode == 0, result.stderr


def test_the_copy_passes(tree: Path):
    result = run_checker(tree)
    assert result.returncode == 0, result.stderr


def test_a_new_private_read_and_a_new_import_fail(tree: Path):
    (tree / PROBE).write_text(PROBE_SOURCE, encoding="utf-8")
    result = run_checker(tree)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    read = [line for line in lines if line.startswith(f"{PROBE}:5: ")]
    assert len(read) == 1, result.stderr
    assert "private Python attribute '_secret_view'" in read[0]
    assert "add _secret_view to [private] there" in read[0] and ALLOWLIST in read[0]
    imported = [line for line in lines if line.startswith(f"{PROBE}:8: ")]
    assert len(imported) == 1, result.stderr
    assert "imports freight.futures at run time" in imported[0]
    assert f"{ALLOWLIST} does not list under [imports]" in imported[0]
    assert "_in_a_comment" not in result.stderr and "_in_a_string" not in result.stderr
    # Listed (the import below the module that reaches it), both pass.
    allowlist = tree / ALLOWLIST
    edit(
        allowlist,
        "[imports]\n",
        '[imports]\n"freight.futures" = { reached_from = ["freight.cli.describe"], reason = "a test" }\n',
    )
    edit(allowlist, "[private]\n", '[private]\n_secret_view = { owner = "freight.registry", reason = "a test" }\n')
    edit(tree / "python/freight/registry.py", "\nclass Registry", "\n_secret_view = None\n\n\nclass Registry")
    result = run_checker(tree)
    assert result.returncode == 0, result.stderr


def test_a_name_computed_at_run_time_fails(tree: Path):
    (tree / PROBE).write_text(
        "pub fn probe(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<()> {\n"
        "    obj.call_method0(name)?;\n"
        "    Ok(())\n"
        "}\n",
        encoding="utf-8",
    )
    result = run_checker(tree)
    assert result.returncode == 1
    assert re.search(
        rf"^{re.escape(PROBE)}:2: Rust reaches a Python attribute by a computed name \(call_method0: 'name'\) "
        r"in fn probe; .*use a literal name, or list this function under \[\[forwarders\]\]",
        result.stderr,
        re.MULTILINE,
    ), result.stderr


def test_a_forwarder_given_a_private_name_fails(tree: Path):
    edit(tree / "crates/freight-py/src/python_types.rs", '"datetime", "timedelta"', '"datetime", "_secret_class"')
    result = run_checker(tree)
    assert result.returncode == 1
    assert re.search(r"^crates/freight-py/src/python_types\.rs:\d+: .*'_secret_class' \(class\)", result.stderr, re.M)


def test_a_private_attribute_renamed_in_python_fails(tree: Path):
    edit(tree / "python/freight/_pickle.py", "def _exception(", "def _rebuild_exception(")
    result = run_checker(tree)
    assert result.returncode == 1
    assert "[private] _exception: freight._pickle no longer defines _exception" in result.stderr
    assert "crates/freight-py/src/encode/pickle_sink.rs:" in result.stderr


def test_entries_that_match_nothing_fail(tree: Path):
    edit(
        tree / ALLOWLIST,
        "[private]\n",
        '[private]\n_gone = { owner = "freight.registry:Registry", reason = "a test" }\n',
    )
    edit(tree / ALLOWLIST, "[imports]\n", '[imports]\njson = { reason = "a test" }\n')
    result = run_checker(tree)
    assert result.returncode == 1
    assert "[private] _gone: Rust no longer reads it: remove the entry" in result.stderr
    assert "[imports] json: Rust no longer imports it: remove the entry" in result.stderr


def test_an_import_the_contracts_do_not_put_below_its_callers_fails(tree: Path):
    # freight._files sits on freight._pickle's layer: a call from it that imports _pickle could
    # close a circle import-linter does not see.
    edit(
        tree / ALLOWLIST,
        '"freight._pickle" = { reached_from = ["freight._api"]',
        '"freight._pickle" = { reached_from = ["freight._api", "freight._files"]',
    )
    result = run_checker(tree)
    assert result.returncode == 1
    assert "[imports] freight._pickle: the import contracts do not put it below freight._files" in result.stderr, (
        result.stderr
    )


def test_a_freight_module_outside_the_contracts_fails(tree: Path):
    (tree / "python/freight/_unlayered.py").write_text("", encoding="utf-8")
    (tree / PROBE).write_text(
        'pub fn probe(py: Python<\'_>) -> PyResult<()> {\n    py.import("freight._unlayered")?;\n    Ok(())\n}\n',
        encoding="utf-8",
    )
    edit(
        tree / ALLOWLIST,
        "[imports]\n",
        '[imports]\n"freight._unlayered" = { reached_from = ["freight._api"], reason = "a test" }\n',
    )
    result = run_checker(tree)
    assert result.returncode == 1
    assert "[imports] freight._unlayered: no layer of pyproject.toml's [tool.importlinter] contracts names it" in (
        result.stderr
    )
