"""Forged payloads: arbitrary metadata (and frames) under any serializer tag, written by the real
encoder, for the tests of what loading does with hostile input (tests/security/test_hostile_*).

A serializer registered on a separate ``freight.Freight()`` writes whatever it is handed under a
built-in tag, and plain ``freight.loads`` reads it back with the built-in serializer. Cases that
could crash the interpreter run in a child (:func:`run_isolated`), which imports this module too.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import tracemalloc
from typing import Any

import freight
from support import child_env

_FORGER = freight.Freight()
_BOXES: dict[str, type] = {}


class _Writer:
    """Writes a box's metadata and frames as they are: what a serializer of ``tag`` would have written."""

    safe = True

    def serialize(self, box: Any) -> tuple[Any, list]:
        return box.meta, box.frames

    def deserialize(self, meta: Any, frames: list) -> Any:
        raise AssertionError("only for writing")


def node(tag: str, meta: Any, frames: Any = ()) -> Any:
    """A value that the forger writes as a node of ``tag`` with this metadata and frames (to nest
    one forged node inside another's metadata)."""
    cls = _BOXES.get(tag)
    if cls is None:
        cls = _BOXES[tag] = type("Box", (), {})
        _FORGER.register(_Writer(), tag=tag, types=(cls,))
    box = cls()
    box.meta, box.frames = meta, list(frames)
    return box


def forge(tag: str, meta: Any, frames: Any = ()) -> bytes:
    """A payload holding one node of ``tag`` with this metadata and frames."""
    return _FORGER.dumps(node(tag, meta, frames))


def load_or_refuse(blob: bytes, **options: Any) -> tuple[bool, Any]:
    """(True, None) when loading raises DeserializationError, else (False, value)."""
    try:
        return False, freight.loads(blob, allow_pickle=False, **options)
    except freight.DeserializationError:
        return True, None


# What every child program starts with: the names the forging code above gives a test.
CHILD_PRELUDE = """\
import sys
import numpy as np
import freight
from support.forging import forge, load_or_refuse, node, print_refusals
"""


def run_isolated(*parts: str, stdin: bytes | None = None, expect: str = "REFUSED") -> str:
    """Runs ``parts`` (after CHILD_PRELUDE, each dedented) in a fresh interpreter, which prints
    what happened last: REFUSED when loading raised DeserializationError, or what the test asks
    for (a program that goes on to use a loaded value as a program would, which crashed before
    the fix, ends with LOADED). Passes only when the last line printed is ``expect`` and the
    interpreter exited cleanly; returns that line."""
    program = CHILD_PRELUDE + "".join(textwrap.dedent(part) for part in parts)
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", program],
        input=stdin,
        capture_output=True,
        timeout=120,
        env=child_env(TF_CPP_MIN_LOG_LEVEL="3", RUST_BACKTRACE="0"),
    )
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    crashed = " (killed by a signal: a crash)" if proc.returncode < 0 else ""
    last = out.strip().splitlines()[-1] if out.strip() else ""
    assert proc.returncode == 0 and last == expect, (
        f"expected {expect!r} last; exit status {proc.returncode}{crashed}; stdout: {out[-800:]!r}; "
        f"stderr: {err[-1500:]!r}"
    )
    return last


def bytes_retained_after_loading(blobs: list[bytes]) -> int:
    """Bytes still allocated once every blob was loaded (refusals ignored) and garbage collected:
    what caches or leaks keep of the payloads."""
    gc.collect()
    tracemalloc.start()
    try:
        for blob in blobs:
            try:
                freight.loads(blob, allow_pickle=False)
            except freight.DeserializationError:
                pass
        gc.collect()
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def print_refusals(cases: list[tuple[str, str, Any, Any]]) -> None:
    """In a child: loads each forged ``(name, tag, meta, frames)`` case and prints REFUSED when
    loading refused every one, else LOADED and the names of those that loaded (after ``repr`` of
    each, which is where a bad value would crash). A crash fails the test that started the child."""
    loaded = []
    for name, tag, meta, frames in cases:
        refused, value = load_or_refuse(forge(tag, meta, frames))
        if not refused:
            repr(value)
            loaded.append(name)
    gc.collect()
    print(f"LOADED {loaded}" if loaded else "REFUSED")
