"""The code of the documentation: every ```python block of the getting-started page and the user
guide runs on its own (a fresh namespace: its own imports), as a reader who copies one block
runs it; the blocks of the other pages (integrations that need a cluster, the format, the
architecture) must at least compile. A block that cannot run here says why with
``<!-- no-test: why -->`` on the line before it."""

from __future__ import annotations

import pytest

import freight
from support import ROOT
from support.markdown import python_blocks, run_alone

DOCS = ROOT / "docs"
RUN = [DOCS / "getting-started.md", *sorted((DOCS / "guide").glob("*.md"))]
COMPILE = sorted(set(DOCS.rglob("*.md")) - set(RUN))

RUN_BLOCKS = [b for page in RUN for b in python_blocks(page)]
COMPILE_BLOCKS = [b for page in COMPILE for b in python_blocks(page)]


def _id(block) -> str:
    return f"{block.path.relative_to(DOCS)}:{block.line}"


def test_the_guide_has_examples_and_none_is_skipped():
    assert len(RUN_BLOCKS) >= 10
    assert [_id(b) for b in RUN_BLOCKS if b.no_test is not None] == []


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=_id)
def test_each_guide_block_runs_on_its_own(block, tmp_path):
    try:
        run_alone(block, tmp_path)
    except Exception as exc:
        pytest.fail(f"{_id(block)} fails when run on its own: {type(exc).__name__}: {exc}")
    finally:
        try:  # the serializers example registers one globally (and unregisters it when it runs through)
            freight.unregister("myapp.Point")
        except freight.UnknownTagError:
            pass


@pytest.mark.parametrize("block", COMPILE_BLOCKS, ids=_id)
def test_the_other_blocks_compile(block):
    compile(block.code, block.where, "exec")
