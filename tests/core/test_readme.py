"""README.md as a test: its ```python blocks run, in order, in one namespace (as a doctest file
runs), in a temporary folder; what it lists (inspect's keys, the errors, the command line's
options) is checked against the code. A block that cannot run here is marked in the README with
``<!-- no-test: why -->`` on the line before it; only the blocks in ``SKIPPED`` may be."""

from __future__ import annotations

import argparse
import ast
import re
import warnings

import pytest

import freight
import freight.exceptions
from support import ROOT

README = (ROOT / "README.md").read_text()

# The first line of each block the README marks no-test, and why. Keep this small and explicit.
SKIPPED: dict[str, str] = {}

_BLOCK = re.compile(r"(?:<!--\s*no-test:\s*(?P<why>.*?)\s*-->\s*\n)?```python\n(?P<code>.*?)^```", re.S | re.M)


def python_blocks() -> list[tuple[int, str, str | None]]:
    """(line number, code, no-test reason or None) of every ```python block."""
    return [
        (README[: m.start("code")].count("\n") + 1, m.group("code"), m.group("why")) for m in _BLOCK.finditer(README)
    ]


def test_the_readme_has_python_blocks_and_skips_only_the_listed_ones():
    blocks = python_blocks()
    assert len(blocks) >= 5
    assert len(re.findall(r"^```python$", README, re.M)) == len(blocks)  # the pattern sees them all
    skipped = {code.splitlines()[0]: why for _, code, why in blocks if why is not None}
    assert skipped == SKIPPED


def test_the_readme_python_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the blocks write result.frt and ./results
    namespace: dict[str, object] = {"__name__": "readme"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a block that warns shows something a reader should not copy
            for line, code, why in python_blocks():
                if why is not None:
                    continue
                try:
                    exec(compile(code, f"README.md:{line}", "exec"), namespace)  # noqa: S102 - the README's code
                except Exception as exc:
                    pytest.fail(f"the README's python block at line {line} fails: {type(exc).__name__}: {exc}")
    finally:
        try:  # the serializers block registers one globally (and unregisters it when it runs through)
            freight.unregister("myapp.Point")
        except freight.UnknownTagError:
            pass


# --------------------------------------------------------------------------------------------
# What the README lists, against the code
# --------------------------------------------------------------------------------------------


def _payload_info_keys() -> list[str]:
    """The keys of ``PayloadInfo`` in python/freight/_freight.pyi (what ``inspect`` returns)."""
    tree = ast.parse((ROOT / "python" / "freight" / "_freight.pyi").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PayloadInfo")
    return [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]


def test_the_inspect_key_list_is_payload_info():
    match = re.search(r"`inspect` returns a dict with fixed keys(.*?) and `tree`", README, re.S)
    assert match, "the README no longer describes inspect's keys"
    named = [*re.findall(r"`(\w+)`", match.group(1)), "tree"]
    keys = _payload_info_keys()
    assert len(keys) == 11
    assert [k for k in named if k in keys] == keys  # every key, in PayloadInfo's order
    assert set(named) - set(keys) <= {"PayloadInfo", "checksum_ok"}  # the class; a FrameInfo key


def test_the_error_list_names_every_public_error():
    section = README[README.index("## Errors") : README.index("## Command line")]
    for name in freight.exceptions.__all__:
        assert f"`{name}`" in section, name
    for name in ("MissingKeyError", "RayNotStartedError", "InstallError"):  # the integrations' own
        assert name in section, name


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option not in ("--help", "--version")
    }


def test_every_command_line_option_is_documented():
    from freight import cli
    from freight.bench import _parser as bench_parser

    section = README[README.index("## Command line") : README.index("## Performance")]
    parser = cli._parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        assert f"python -m freight {name}" in section, name
        for option in _options(command):
            short = [s for a in command._actions if option in a.option_strings for s in a.option_strings if len(s) == 2]
            assert option in section or any(f"[{s}]" in section or f" {s} " in section for s in short), (name, option)
    for option in _options(bench_parser()):
        assert option in section, ("bench", option)
