"""Workloads measured again, merged into an earlier run's results (``freight bench --render OLD
--merge NEW``): a change that touches only some workloads re-measures those, on the same
machine and settings, and the report says which were measured again and when."""

from __future__ import annotations

from typing import Any


def merge(base: dict[str, Any], newer: dict[str, Any]) -> dict[str, Any]:
    """``base`` with every workload ``newer`` measured replaced by ``newer``'s rows (and its
    peers added, its errors for them kept); the merged workloads are listed under
    ``remeasured`` with ``newer``'s start time. Refuses runs of different settings, and a
    workload measured again without a peer the earlier run measured it with (a fresh environment
    missing an optional peer would otherwise drop its column silently)."""
    old, new = base["settings"], newer["settings"]
    if old != new:
        differ = sorted(k for k in {*old, *new} if old.get(k) != new.get(k))
        raise ValueError(
            f"cannot merge runs measured with different settings ({', '.join(differ)}): measure the "
            "workloads again with the options of the run they join"
        )
    names = {m["workload"] for m in newer["measurements"]}
    for name in sorted(names):
        missing = _peers(base, name) - _peers(newer, name)
        if missing:
            raise ValueError(
                f"cannot merge: the later run measured {name} without {', '.join(sorted(missing))}, which "
                "the earlier run has (not installed there?): install them (make bench does) and measure again"
            )
    out = dict(base)
    out["measurements"] = [m for m in base["measurements"] if m["workload"] not in names] + newer["measurements"]
    out["peers"] = {**base["peers"], **newer["peers"]}
    out["workloads"] = {**base["workloads"], **{k: v for k, v in newer["workloads"].items() if k in names}}
    out["errors"] = [e for e in base["errors"] if not any(n in str(e) for n in names)] + newer["errors"]
    out["remeasured"] = {**(base.get("remeasured") or {}), **dict.fromkeys(sorted(names), newer["started"])}
    return out


def _peers(run: dict[str, Any], workload: str) -> set[str]:
    return {m["peer"] for m in run["measurements"] if m["workload"] == workload}


__all__ = ["merge"]
