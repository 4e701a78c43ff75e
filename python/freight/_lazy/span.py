"""Where a node of a stored payload's tree lies, as a lazy reader sees it (``LazyHeader``'s
spans): its bytes, the memo slots filled before it, the frames it uses, the memo slots it refers
to outside itself, its offset past any memo marker, its tag, and whether it holds islands of the
payload's pickler session (objects pickled where the walker met them, sharing one pickle memo:
such a node is decoded with the whole value, in tree order, and picked out of it)."""

from __future__ import annotations

from typing import NamedTuple


class Span(NamedTuple):
    start: int
    end: int
    memo_base: int
    frames: list[int]
    outside: list[int]
    at: int  # the node's offset, past its memo marker
    tag: str
    session: bool  # holds islands of the payload's pickler session: decoded with the whole value
