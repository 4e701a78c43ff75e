"""README.md as a test: it stays a front page, and each of its ```python blocks runs on its own, in
a fresh namespace, as a newcomer who copies one block would run it (a copied block once failed
with ``NameError: freight``: it relied on the imports of the block before it). A block that
cannot run here is marked in the README with ``<!-- no-test: why -->`` on the line before it;
only the blocks in ``SKIPPED`` may be. Its figures are checked against the committed results in
tests/docs/test_figures.py, what the guide pages list against the code in tests/docs/test_pages.py."""

from __future__ import annotations

import re

import pytest

import freight
from support import ROOT
from support.markdown import python_blocks, run_alone

README = ROOT / "README.md"
BLOCKS = python_blocks(README)

# The first line of each block the README marks no-test, and why. Keep this small and explicit.
SKIPPED: dict[str, str] = {}

# A front page: what freight is, how to install it, a first example, links into the docs site.
MAX_LINES = 150


def test_the_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_LINES
    assert "pip install freight" in text
    for command in ("make demo", "make test"):
        assert command in text, command
    assert "](docs/getting-started.md" in text  # the way into the site


def test_the_readme_has_python_blocks_and_skips_only_the_listed_ones():
    assert len(BLOCKS) >= 1
    skipped = {b.code.splitlines()[0]: b.no_test for b in BLOCKS if b.no_test is not None}
    assert skipped == SKIPPED


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.no_test is None], ids=lambda b: b.where)
def test_each_readme_python_block_runs_on_its_own(block, tmp_path):
    try:
        run_alone(block, tmp_path)
    except Exception as exc:
        pytest.fail(f"the README's python block at line {block.line} fails on its own: {type(exc).__name__}: {exc}")


def test_the_first_example_is_about_ten_lines():
    code = [line for line in BLOCKS[0].code.splitlines() if line.strip()]
    assert len(code) <= 12, code


def test_every_extra_the_readme_names_exists():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for group in re.findall(r"freight\[([a-z0-9_,-]+)\]", README.read_text()):
        for extra in group.split(","):
            assert extra in extras, extra
    assert freight.__version__
