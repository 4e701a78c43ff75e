"""Peak memory of a batch, for the shared-memory engines: how far the resident memory of the parent
and of its worker processes rose above what they held before the batch.

Each process's high-water mark (``VmHWM`` in ``/proc/<pid>/status``) is reset to its current
resident size before the batch (``echo 5 > /proc/<pid>/clear_refs``) and read after it; the rise
is the sum over the processes of high-water mark minus resident size before. A shared-memory page
counts in each process that touched it through its mapping (the receiver that reads it); a
segment written but never mapped counts nowhere, so the caller reads the marks after it has
touched the results (``tasks.check``). The sum of the processes' peaks is at least their peak
together: the figure errs high. Linux only: elsewhere (or without permission) it is None.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"no {field} for {pid}")


def reset(pids: Iterable[int]) -> dict[int, int] | None:
    """Resets each process's high-water mark; returns its resident bytes now (None: unsupported)."""
    base = {}
    try:
        for pid in pids:
            with open(f"/proc/{pid}/clear_refs", "w") as fh:
                fh.write("5")
            base[pid] = _status_kib(pid, "VmRSS") * 1024
    except OSError:
        return None
    return base


def rise(base: dict[int, int] | None) -> int | None:
    """Bytes by which the processes' high-water marks rose above ``base`` (from :func:`reset`)."""
    if base is None:
        return None
    try:
        return sum(max(0, _status_kib(pid, "VmHWM") * 1024 - rss) for pid, rss in base.items())
    except OSError:
        return None


def with_parent(worker_pids: Iterable[int]) -> list[int]:
    return [os.getpid(), *worker_pids]
