"""Peak memory of one ``dumps`` and one ``loads`` call, per peer, each in a fresh process.

Extra copies are what users of Ray and Dask complain about most, and time does not show them:
a serializer can be fast and still hold three copies of a 1 GiB array at its peak. So for every
peer and every size of 1 MiB or more, a child process makes the value, then records the
resident high-water mark (VmHWM) over one ``dumps`` and then over one ``loads``, each reset to
the resident size just before the call. What is reported is **the peak above what was resident
before the call**: the input (the value for ``dumps``, the payload for ``loads``) is already
resident then, so the figure is what the call added. A serializer that copies the data once
into its output shows about 1× the data size; an out-of-band ``dumps`` that views the array
shows about 0.

Each peer gets its own process because a high-water mark belongs to a whole process: another
peer's buffers, freed but still resident in the heap, would let a later peer's call reuse them
and look cheaper than it is. Within the child, the heap is trimmed (``malloc_trim``) before
each measured call for the same reason.

Where the kernel will not reset VmHWM (``/proc/self/clear_refs`` not writable, or before Linux
4.0), ``dumps`` is the rise of VmHWM over its value after the value was made, a lower bound (the
making may have peaked higher), and ``loads`` is not measured; results.json says which method
was used.
"""

from __future__ import annotations

import gc
from typing import Any

from freight.bench import child
from freight.bench.alloc import malloc_trim, peak_rss, reset_peak, rss
from freight.bench.peers import Peer, peer_named
from freight.bench.workloads import Workload, workload_named

EXACT = "VmHWM reset before each call"
LOWER_BOUND = "VmHWM rise over the value's own peak (dumps only; lower bound)"


def _settle() -> None:
    """Frees what can be freed and gives the heap's free pages back, so that the call that
    follows has to fault in whatever it allocates (and the high-water mark sees it)."""
    gc.collect()
    malloc_trim()


def probe(workload: str, size: Any, peer: str) -> dict[str, Any]:
    """Runs in a child: ``{"dumps": bytes, "loads": bytes | None, "method": str}``."""
    w, p = workload_named(workload), peer_named(peer)
    dumps, loads = p.codec
    # Set-up first (imports, registries, thread pools), on the smallest size: it is paid once per
    # process, and a probe that counted it would blame a 1 MiB call for pandas' import.
    small = w.make(w.sizes[0])
    for _ in range(2):
        back = loads(dumps(small))
    del small, back
    obj = w.make(size)
    _settle()
    exact = reset_peak()
    before = rss() if exact else peak_rss()
    if before is None:
        raise RuntimeError("no /proc/self/status: peak memory cannot be read here")
    payload = dumps(obj)
    peak_dumps = max(0, (peak_rss() or 0) - before)
    peak_loads = None
    if exact:
        _settle()
        reset_peak()
        before = rss() or 0
        back = loads(payload)
        peak_loads = max(0, (peak_rss() or 0) - before)
        del back
    return {"dumps": peak_dumps, "loads": peak_loads, "method": EXACT if exact else LOWER_BOUND}


def peaks(w: Workload, size: Any, peers: list[Peer], notes: list[str]) -> dict[str, dict[str, Any]]:
    """Every peer's probe at ``size``, each in its own child. A probe that fails (or whose child
    dies, out of memory say) is left out, with a line in ``notes``: the peer's timings stand."""
    out = {}
    for p in peers:
        try:
            out[p.name] = child.call(probe, w.name, size, p.name)
        except child.ChildError as exc:
            notes.append(f"{w.name} at {w.label(size)}: {p.name}'s peak memory: {str(exc).splitlines()[0][:200]}")
    return out


__all__ = ["EXACT", "LOWER_BOUND", "peaks", "probe"]
