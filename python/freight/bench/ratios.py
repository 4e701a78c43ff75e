"""Who is compared with whom, and the ratios: like with like, in every allocator state.

A ratio is **peer time ÷ freight time**: above 1 freight is faster. Each freight row is held
against its baseline and against the fastest peer that does the same work:

- ``freight`` (``dumps``/``loads``: the data copied into one buffer and out of it) against
  pickle-5 in band, and against the fastest peer that copies in that direction;
- ``freight (checksum)`` against pickle-5 in band (its target is a smaller margin: it hashes);
- ``freight frames`` (``dumps_frames``/``loads_frames(zero_copy=True)``: buffers that view the
  data) against pickle-5 out of band, and against the fastest peer that views the data too.

A view costs the same at any size, so a copying call set against one reads 0.00× at 1 GiB and
says nothing: that is why a peer's ``zero_copy`` directions (peers.py) decide who it meets.
``copy`` is a reference line, never a "best peer".

A size measured in several allocator states (``warm``, ``fresh``: see alloc.py) gives a ratio
per state, and the comparison is the **worse** one: a cell is a win only if it holds in either.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from freight.bench.peers import PEERS

DIRECTIONS = ("dumps", "loads")

#: the peer each freight row is held against first
BASELINES = {"freight": "pickle-5", "freight frames": "pickle-5 oob", "freight (checksum)": "pickle-5"}
#: the freight rows also held against the fastest like-for-like peer
AGAINST_BEST = ("freight", "freight frames")
#: compressed rows: each codec against the same codec outside freight, then the fastest
COMPRESS_PAIRS = [("freight lz4", "lz4.frame"), ("freight zstd-3", "zstandard-3"), ("freight lz4", "best")]

_ZERO_COPY = {p.name: sorted(p.zero_copy) for p in PEERS}

Row = dict[str, dict[str, Any]]  # peer -> measurement, for one workload, size and direction


@dataclass
class Comparison:
    ours: str
    other: str  # the peer held against (the fastest one's name for "best")
    ratio: float  # other's time ÷ ours, the worse over the allocator states
    state: str  # the state that ratio comes from
    by_state: dict[str, float]  # the ratio in every state measured
    best: bool = False  # other was picked as the fastest like-for-like peer


def pairs_for(kind: str) -> list[tuple[str, str]]:
    """``(freight row, peer or "best")`` for a workload kind, in report order."""
    if kind == "compress":
        return COMPRESS_PAIRS
    out = []
    for ours, base in BASELINES.items():
        out.append((ours, base))
        if ours in AGAINST_BEST:
            out.append((ours, "best"))
    return out


def index(results: dict[str, Any]) -> dict[tuple[str, str, str], Row]:
    """(workload, label, direction) -> peer -> measurement"""
    out: dict[tuple[str, str, str], Row] = defaultdict(dict)
    for m in results["measurements"]:
        out[(m["workload"], m["label"], m["direction"])][m["peer"]] = m
    return out


def labels(results: dict[str, Any], workload: str) -> list[str]:
    seen: dict[str, Any] = {}
    for m in results["measurements"]:
        if m["workload"] == workload:
            seen.setdefault(m["label"], m["size"])
    return list(seen)


def states(m: dict[str, Any]) -> dict[str, float]:
    """state -> median of a measurement; files before allocator states have one, unnamed."""
    if m.get("states"):
        return {s: v["median_ns"] for s, v in m["states"].items()}
    return {m.get("state", "-"): m["median_ns"]}


def views(peers_info: dict[str, dict[str, Any]], name: str, direction: str) -> bool:
    """Whether ``name`` views the data in ``direction`` instead of copying it (results files
    written before this was recorded: the peer table as it is now)."""
    info = peers_info.get(name, {})
    return direction in info.get("zero_copy", _ZERO_COPY.get(name, []))


def _candidates(row: Row, ours: str, direction: str, peers_info: dict) -> list[str]:
    """The peers of ``row`` that do what ``ours`` does in ``direction``: not freight's, not a
    reference, and copying exactly where ours copies."""
    mine = views(peers_info, ours, direction)
    return [
        name
        for name in row
        if not peers_info.get(name, {}).get("ours")
        and not peers_info.get(name, {}).get("reference")
        and views(peers_info, name, direction) == mine
    ]


def compare_in(row: Row, ours: str, other: str, direction: str, peers_info: dict) -> Comparison | None:
    """``ours`` against ``other`` (a peer, or "best") in one row, or None where either is missing."""
    if ours not in row:
        return None
    others = _candidates(row, ours, direction, peers_info) if other == "best" else [other]
    by_state: dict[str, float] = {}
    names: dict[str, str] = {}
    for state, t_ours in states(row[ours]).items():
        times = [(states(row[o])[state], o) for o in others if o in row and state in states(row[o])]
        if times:
            t, names[state] = min(times)
            by_state[state] = t / t_ours
    if not by_state:
        return None
    worst = min(by_state, key=by_state.__getitem__)
    return Comparison(ours, names[worst], by_state[worst], worst, by_state, other == "best")


def comparisons(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every like-for-like comparison of a run, for results.json: both states' ratios and the
    worse one, per workload, size and direction."""
    idx = index(results)
    out = []
    for name, info in results["workloads"].items():
        for label in labels(results, name):
            for direction in DIRECTIONS:
                row = idx.get((name, label, direction), {})
                for ours, other in pairs_for(info["kind"]):
                    c = compare_in(row, ours, other, direction, results["peers"])
                    if c is not None:
                        out.append({"workload": name, "label": label, "direction": direction, **asdict(c)})
    return out


def losses(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The comparisons freight loses (worse ratio below 1), each (freight row, peer) once per
    cell: pickle-5 being also the fastest peer is one loss, not two."""
    out = []
    seen = set()
    for c in comparisons(results):
        key = (c["workload"], c["label"], c["direction"], c["ours"], c["other"])
        if c["ratio"] < 1 and key not in seen:
            seen.add(key)
            out.append(c)
    return out


__all__ = ["BASELINES", "Comparison", "DIRECTIONS", "comparisons", "compare_in", "index", "losses", "pairs_for"]
