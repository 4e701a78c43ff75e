"""The code blocks of the Markdown files (README.md, docs/), for the tests that run them.

A reader copies one block at a time, so each ```python block must run on its own: the tests run
every block in a fresh namespace (its own imports, nothing from the blocks before it). A block
that cannot run in a test is marked on the line before it with ``<!-- no-test: why -->``.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

_BLOCK = re.compile(r"(?:<!--\s*no-test:\s*(?P<why>.*?)\s*-->\s*\n)?^```python\n(?P<code>.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the block's first line of code
    code: str
    no_test: str | None  # why the block is not run, or None

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def python_blocks(path: Path) -> list[Block]:
    """Every ```python block of ``path``, in order."""
    text = path.read_text()
    blocks = [
        Block(path, text[: m.start("code")].count("\n") + 1, m.group("code"), m.group("why"))
        for m in _BLOCK.finditer(text)
    ]
    # The pattern sees every block: one that it missed would go untested.
    assert len(re.findall(r"^```python\s*$", text, re.M)) == len(blocks), path
    return blocks


def run_alone(block: Block, folder: Path) -> None:
    """Runs ``block`` in a namespace of its own, in ``folder`` (the blocks write files), with
    warnings as errors (a block that warns shows something a reader should not copy). Raises
    what the block raises."""
    namespace: dict[str, object] = {"__name__": "__docs__"}
    here = os.getcwd()
    os.chdir(folder)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            exec(compile(block.code, block.where, "exec"), namespace)  # noqa: S102 - the docs' own code
    finally:
        os.chdir(here)
