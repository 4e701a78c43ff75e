"""What a losing cell's own run says about why it loses: a floor measured beside it.

A cell of "Where freight is slower" carries a cause when the same run measured what bounds it:

- ``freight (checksum)`` against a peer that checks nothing: the one-core floor is one copy (the
  ``copy`` row or freight's own unchecked call, whichever is faster) plus the hash over the bytes
  (what checksums add to freight's own time, xxh3 at tens of GB/s): when even that floor is
  slower than the peer, no one-core writer or reader that checks every byte can win the cell.
  (A second core costs more to wake than it saves at these sizes on the machines measured:
  docs/ARCHITECTURE.md, "Compression, checksums and signatures".)
- ``freight frames`` against ``arrow ipc``: Arrow's IPC reader checks no offsets and no UTF-8,
  which untrusted bytes need before pyarrow or polars reads them (docs/SECURITY.md). The floor
  is ``arrow ipc (checked)``: the same read followed by only those checks, one pass over each
  string column's offsets and text at freight-core's speed (memory-bound: it grows with rows
  where the unchecked read stays flat). ``arrow ipc (validated)``, the read followed by
  Arrow's own ``Table.validate(full=True)``, is quoted beside it.

Cells without such a floor carry none: their loss is freight's to fix.
"""

from __future__ import annotations

from typing import Any

from freight.bench.harness import fmt_ns

#: the peer that reads Arrow IPC and then runs Arrow's own full validation
VALIDATED_IPC = "arrow ipc (validated)"
#: the peer that reads Arrow IPC and then makes only the checks memory safety needs
CHECKED_IPC = "arrow ipc (checked)"


def _ns(row: dict[str, Any], peer: str, state: str) -> float | None:
    m = row.get(peer)
    if m is None:
        return None
    states = m.get("states")
    if not states:
        return m["median_ns"]
    return states[state]["median_ns"] if state in states else None


def _checksum_floor(c: dict[str, Any], row: dict[str, Any], nbytes: int) -> str | None:
    state = c["state"]
    copy, plain, checked, other = (_ns(row, p, state) for p in ("copy", "freight", c["ours"], c["other"]))
    if None in (copy, plain, checked, other):
        return None
    hashing = max(checked - plain, 0.0)
    # The cheaper of the two copies measured: `arr.copy()` of a structured dtype copies field by
    # field, far slower than the bytes freight's own copy moves.
    copy = min(copy, plain)
    floor = copy + hashing
    rate = f", {nbytes / hashing:.0f} GB/s" if hashing > 0 else ""
    verdict = "no one-core implementation wins here" if other < floor else "the rest is freight's"
    return (
        f"one-core floor: copy {fmt_ns(copy)} + hash {fmt_ns(hashing)}{rate} = {fmt_ns(floor)} "
        f"against {fmt_ns(other)}: at best {other / floor:.2f}× ({verdict})"
    )


def _arrow_unchecked(c: dict[str, Any], row: dict[str, Any]) -> str | None:
    state = c["state"]
    ours, other = _ns(row, c["ours"], state), _ns(row, c["other"], state)
    floor, validated = _ns(row, CHECKED_IPC, state), _ns(row, VALIDATED_IPC, state)
    if ours is None or other is None or floor is None:
        return None
    verdict = "no checking reader measured wins here" if other < floor else "the rest is freight's"
    full = f"; Arrow's validate(full=True) takes {fmt_ns(validated)}" if validated is not None else ""
    return (
        f"arrow ipc checks no offsets or UTF-8 (unsafe on untrusted bytes); its read plus those checks "
        f"takes {fmt_ns(floor)} against {fmt_ns(other)}: at best {other / floor:.2f}× ({verdict}){full}"
    )


def cause(c: dict[str, Any], idx: dict) -> str:
    """The measured cause of losing comparison ``c`` (an entry of ``ratios.losses``), or ""."""
    row = idx.get((c["workload"], c["label"], c["direction"]), {})
    if c["ours"] == "freight (checksum)":
        any_m = next(iter(row.values()), {})
        return _checksum_floor(c, row, int(any_m.get("nbytes") or 0)) or ""
    if c["ours"] == "freight frames" and c["other"] == "arrow ipc":
        return _arrow_unchecked(c, row) or ""
    return ""


__all__ = ["CHECKED_IPC", "VALIDATED_IPC", "cause"]
