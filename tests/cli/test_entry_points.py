"""One entry point: the ``freight`` script and ``python -m freight`` both run
``freight.cli:main``; no other module of the package is a command (the two that run as
``__main__`` are child processes of ``freight bench --engines``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from freight import cli

PACKAGE = Path(cli.__file__).resolve().parents[1]
ROOT = PACKAGE.parents[1]


def test_the_script_and_python_m_freight_run_cli_main():
    pyproject = (ROOT / "pyproject.toml").read_text()
    section = pyproject[pyproject.index("[project.scripts]\n") :].split("\n\n", 1)[0].splitlines()[1:]
    assert section == ['freight = "freight.cli:main"']  # (tomllib is 3.11+; freight supports 3.10)
    main = (PACKAGE / "__main__.py").read_text()
    assert "from freight.cli import main" in main
    proc = subprocess.run([sys.executable, "-m", "freight", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("freight ")


def test_no_other_module_is_a_command():
    runnable = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if 'if __name__ == "__main__"' in path.read_text()
    )
    # freight bench --engines starts these as its child processes (one engine per process, and
    # the program mpiexec runs); they print rows for the parent, not for a user.
    assert runnable == ["__main__.py", "bench/engines/__main__.py", "bench/engines/_mpi_program.py"]


def test_bench_without_the_benchmark_package_says_how_to_get_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "freight.bench", None)  # as in an installation without it
    assert cli.main(["bench", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "not part of this installation" in err and "python -m freight bench" in err


@pytest.mark.parametrize("verb", ["inspect", "verify", "ls", "cat", "rm", "cp", "demo", "bench"])
def test_every_verb_is_in_the_one_parser(verb):
    parser = cli._parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert verb in sub.choices
