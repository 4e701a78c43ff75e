"""What the guide lists, against the code: inspect's keys (docs/guide/checks.md), the public errors
(docs/guide/errors.md), every command and option of the command line (docs/guide/cli.md), the
extras (docs/getting-started.md, against pyproject.toml)."""

from __future__ import annotations

import argparse
import ast
import re

import pytest

import freight
import freight.exceptions
from support import ROOT

DOCS = ROOT / "docs"


def _payload_info_keys() -> list[str]:
    """The keys of ``PayloadInfo`` in python/freight/_freight.pyi (what ``inspect`` returns)."""
    tree = ast.parse((ROOT / "python" / "freight" / "_freight.pyi").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PayloadInfo")
    return [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]


def test_the_inspect_key_list_is_payload_info():
    text = (DOCS / "guide" / "checks.md").read_text()
    match = re.search(r"`inspect` returns a dict with fixed keys(.*?) and `tree`", text, re.S)
    assert match, "docs/guide/checks.md no longer describes inspect's keys"
    named = [*re.findall(r"`(\w+)`", match.group(1)), "tree"]
    keys = _payload_info_keys()
    assert len(keys) == 11
    assert [k for k in named if k in keys] == keys  # every key, in PayloadInfo's order
    assert set(named) - set(keys) <= {"PayloadInfo", "checksum_ok"}  # the class; a FrameInfo key


def test_the_error_list_names_every_public_error():
    text = (DOCS / "guide" / "errors.md").read_text()
    for name in freight.exceptions.__all__:
        assert f"`{name}`" in text, name
    for name in ("MissingKeyError", "RayNotStartedError", "InstallError"):  # the integrations' own
        assert name in text, name


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

    text = (DOCS / "guide" / "cli.md").read_text()
    parser = cli._parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        assert f"python -m freight {name}" in text, name
        for option in _options(command):
            short = [s for a in command._actions if option in a.option_strings for s in a.option_strings if len(s) == 2]
            assert option in text or any(f"[{s}]" in text or f" {s} " in text for s in short), (name, option)
    for option in _options(bench_parser()):
        assert option in text, ("bench", option)


def test_getting_started_lists_every_extra():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    text = (DOCS / "getting-started.md").read_text()
    table = text[text.index("| extras | for |") : text.index("Without an extra")]
    listed = set(re.findall(r"`([a-z0-9]+)`", table))
    assert listed == set(extras) - {"test", "docs"}  # the two for working on freight itself
