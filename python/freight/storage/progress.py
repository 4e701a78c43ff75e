"""A progress bar for long transfers, as an optional extra (``pip install freight[progress]``,
which installs tqdm).

>>> from freight.storage.progress import progress
>>> with progress(total_bytes, "save run-3/prices") as bar:
...     ...                 # the transfer
...     bar.update(total_bytes)

The bar is shown only when all of these hold: ``total_bytes`` is at least :data:`THRESHOLD`
(64 MiB), the stream (stderr by default) is a terminal, and tqdm can be imported. Otherwise
``progress`` is a no-op that costs a comparison: never an error, never output. ``bar.write(text)``
prints a line (to stdout by default) without tearing the bar apart.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

__all__ = ["THRESHOLD", "Progress", "progress"]

THRESHOLD = 64 << 20
"""Transfers smaller than this (in bytes) show no bar."""


class Progress:
    """What ``progress`` yields: ``update(nbytes)`` moves the bar, ``note(text)`` shows a short
    text after it (the key being copied), ``write(text)`` prints a line. Without a bar the
    first two do nothing and ``write`` is ``print``."""

    def __init__(self, bar: Any = None, tqdm: Any = None) -> None:
        self._bar = bar
        self._tqdm = tqdm

    @property
    def active(self) -> bool:
        """Whether a bar is shown."""
        return self._bar is not None

    def update(self, nbytes: int) -> None:
        if self._bar is not None:
            self._bar.update(nbytes)

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(text)  # redrawn now: a large value may take a while

    def write(self, text: str, file: IO[str] | None = None) -> None:
        out = sys.stdout if file is None else file
        if self._tqdm is not None:
            self._tqdm.write(text, file=out)  # clears the bar, prints, draws the bar again
        else:
            print(text, file=out)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):  # no isatty, or a closed stream
        return False


def _tqdm_class() -> Any:
    try:
        from tqdm import tqdm
    except Exception:  # noqa: BLE001 - not installed, or a broken install: no bar, never an error
        return None
    return tqdm


@contextmanager
def progress(total_bytes: int, description: str = "", *, file: IO[str] | None = None) -> Iterator[Progress]:
    """A bar of ``total_bytes`` bytes labelled ``description``, on ``file`` (default: stderr),
    when the transfer is large, ``file`` is a terminal and tqdm is installed; a no-op otherwise.
    The bar is removed when the block ends."""
    stream = sys.stderr if file is None else file
    if total_bytes < THRESHOLD or not _is_terminal(stream):
        yield Progress()
        return
    tqdm = _tqdm_class()
    if tqdm is None:
        yield Progress()
        return
    try:
        bar = tqdm(
            total=total_bytes,
            desc=description,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            file=stream,
            leave=False,
            dynamic_ncols=True,
        )
    except Exception:  # noqa: BLE001 - an incompatible tqdm: no bar rather than a failed transfer
        yield Progress()
        return
    try:
        yield Progress(bar, tqdm)
    finally:
        bar.close()
