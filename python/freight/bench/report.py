"""report.md from a results dict, and ``--compare`` of two results files.

Ratios are **peer time / freight time**: above 1 freight is faster, below 1 it is slower, and the
report marks those in bold. Each workload compares freight with pickle-5 (the default everyone
has) and with the fastest peer at that size ("best peer": any peer that is not freight's and not
the ``copy`` reference).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from freight.bench.harness import fmt_bytes, fmt_ns, markdown_table
from freight.bench.peers import BASELINE

DIRECTIONS = ("dumps", "loads")

#: for these workload kinds, which freight row is compared with which peer ("best": the fastest)
PAIRS: dict[str, list[tuple[str, str]]] = {
    "compress": [("freight lz4", "lz4.frame"), ("freight zstd-3", "zstandard-3"), ("freight lz4", "best")],
}
DEFAULT_PAIRS = [("freight", BASELINE), ("freight", "best")]


def _index(results: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, dict[str, Any]]]:
    """(workload, label, direction) -> peer -> measurement"""
    out: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for m in results["measurements"]:
        out[(m["workload"], m["label"], m["direction"])][m["peer"]] = m
    return out


def _labels(results: dict[str, Any], workload: str) -> list[str]:
    seen: dict[str, Any] = {}
    for m in results["measurements"]:
        if m["workload"] == workload:
            seen.setdefault(m["label"], m["size"])
    return list(seen)


def _peer_order(results: dict[str, Any], workload: str) -> list[str]:
    return list(dict.fromkeys(m["peer"] for m in results["measurements"] if m["workload"] == workload))


def best_peer(row: dict[str, dict[str, Any]], peers_info: dict[str, dict[str, bool]]) -> tuple[str, float] | None:
    """The fastest peer that is neither freight's nor a reference, and its median."""
    cands = [
        (m["median_ns"], name)
        for name, m in row.items()
        if not peers_info.get(name, {}).get("ours") and not peers_info.get(name, {}).get("reference")
    ]
    if not cands:
        return None
    t, name = min(cands)
    return name, t


def ratio(row: dict[str, dict[str, Any]], ours: str, other: str, peers_info: dict) -> tuple[float, str] | None:
    """(other time / our time, other's name) for one size and direction, or None."""
    if ours not in row:
        return None
    if other == "best":
        best = best_peer(row, peers_info)
        if best is None:
            return None
        other, t = best
    elif other in row:
        t = row[other]["median_ns"]
    else:
        return None
    return t / row[ours]["median_ns"], other


def fmt_ratio(r: float) -> str:
    return f"{r:.2f}×" if r >= 1 else f"**{r:.2f}×**"


def pairs_for(kind: str) -> list[tuple[str, str]]:
    return PAIRS.get(kind, DEFAULT_PAIRS)


def _workload_section(results: dict[str, Any], name: str, idx: dict) -> list[str]:
    info = results["workloads"][name]
    peers_info = results["peers"]
    peers = _peer_order(results, name)
    labels = _labels(results, name)
    lines = [f"## {name}", "", f"{info['description']}."]
    skipped = [s for s in results["skipped"] if s["workload"] == name]
    if skipped:
        lines += ["", "Not measured: " + "; ".join(f"{s['peer']} ({s['reason']})" for s in skipped) + "."]
    pairs = pairs_for(info["kind"])
    for direction in DIRECTIONS:
        headers = ["size", *peers]
        headers += [f"{a} vs {'best peer' if b == 'best' else b}" for a, b in pairs]
        if direction == "dumps":
            headers.append("payload ÷ " + ("raw" if info["kind"] == "compress" else BASELINE))
        rows = []
        for label in labels:
            row = idx.get((name, label, direction), {})
            cells = [label] + [fmt_ns(row[p]["median_ns"]) if p in row else "-" for p in peers]
            for a, b in pairs:
                r = ratio(row, a, b, peers_info)
                cells.append("-" if r is None else fmt_ratio(r[0]) + (f" ({r[1]})" if b == "best" else ""))
            if direction == "dumps":
                cells.append(_payload_ratio(row, info["kind"]))
            rows.append(cells)
        lines += ["", f"### {direction}", "", markdown_table(headers, rows)]
    return lines


def _payload_ratio(row: dict[str, dict[str, Any]], kind: str) -> str:
    if kind == "compress":
        parts = [
            f"{p.removeprefix('freight ')} {m['payload_bytes'] / m['nbytes']:.3f}"
            for p, m in row.items()
            if m["nbytes"]
        ]
        return ", ".join(parts) if parts else "-"
    if "freight" in row and BASELINE in row and row[BASELINE]["payload_bytes"]:
        return f"{row['freight']['payload_bytes'] / row[BASELINE]['payload_bytes']:.3f}"
    return "-"


def losses(results: dict[str, Any]) -> list[tuple[str, str, str, str, float]]:
    """Every (workload, direction, size, compared peer, ratio) where freight is slower."""
    idx = _index(results)
    out = []
    for name, info in results["workloads"].items():
        for label in _labels(results, name):
            for direction in DIRECTIONS:
                row = idx.get((name, label, direction), {})
                seen = set()
                for a, b in pairs_for(info["kind"]):
                    r = ratio(row, a, b, results["peers"])
                    if r is not None and r[0] < 1 and (a, r[1]) not in seen:
                        seen.add((a, r[1]))
                        out.append((name, direction, label, f"{a} vs {r[1]}", r[0]))
    return out


TABLES = ("pandas", "polars", "pyarrow")


def tables_summary(results: dict[str, Any], idx: dict) -> list[str]:
    """The tables issue's view: pickle-5 time ÷ freight time per row count, each direction, and
    freight's payload size ÷ pickle-5's, for the DataFrame and Table workloads measured."""
    present = [w for w in TABLES if any(k[0] == w for k in idx)]
    if not present:
        return []
    header = ["rows"] + [f"{w} {d}" for w in present for d in ("dumps", "loads")] + [f"{w} size" for w in present]
    rows = []
    for label in _labels(results, present[0]):
        cells = [label]
        sizes = []
        for w in present:
            for d in ("dumps", "loads"):
                row = idx.get((w, label, d), {})
                mine, theirs = row.get("freight"), row.get("pickle-5")
                if mine and theirs:
                    r = theirs["median_ns"] / mine["median_ns"]
                    cells.append(fmt_ratio(r))
                else:
                    cells.append("–")
            row = idx.get((w, label, "dumps"), {})
            mine, theirs = row.get("freight"), row.get("pickle-5")
            ok = mine and theirs and mine.get("payload_bytes") and theirs.get("payload_bytes")
            sizes.append(f"{mine['payload_bytes'] / theirs['payload_bytes']:.2f}" if ok else "–")
        rows.append(cells + sizes)
    return [
        "",
        "## Tables against pickle-5",
        "",
        "pickle-5 time ÷ freight time (`dumps`/`loads`, checksums on), and freight's payload size ÷ pickle-5's.",
        "",
        markdown_table(header, rows),
    ]


def render(results: dict[str, Any], plots: Iterable[str] = ()) -> str:
    m = results["machine"]
    s = results["settings"]
    idx = _index(results)
    lines = [
        "# freight bench",
        "",
        f"{results['started']}, {results['elapsed_s']} s, {'quick' if s['quick'] else 'full'} run. "
        f"{m['cpus']} CPUs ({m['cpu_model']}), Python {m['python']}, {m['platform']}.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(m["versions"].items())) + ".",
        "",
        "Times are medians per call (samples of all peers interleaved). Ratios are **peer time ÷ "
        "freight time**: above 1 freight is faster; **bold** marks where freight is slower. "
        "`freight` is `dumps` / `loads` (checksums written and verified); `freight frames` is "
        "`dumps_frames` / `loads_frames(zero_copy=True)`; `copy` is `arr.copy()`, the one-copy "
        "floor. freight's compression runs on all cores; lz4.frame and zstandard on one, blosc2 "
        "on all.",
    ]
    lines += tables_summary(results, idx)
    lost = losses(results)
    lines += ["", "## Where freight is slower", ""]
    if lost:
        rows = [[w, d, label, vs, f"{r:.2f}×"] for w, d, label, vs, r in lost]
        lines.append(markdown_table(["workload", "direction", "size", "compared", "ratio"], rows))
    else:
        lines.append("Nowhere in this run.")
    if results["errors"]:
        lines += ["", "## Errors", ""] + [f"- {e}" for e in results["errors"]]
    plots = list(plots)
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    for name in results["workloads"]:
        if any(k[0] == name for k in idx):
            lines += [""] + _workload_section(results, name, idx)
        else:
            reasons = [f"{x['peer']}: {x['reason']}" for x in results["skipped"] if x["workload"] == name]
            lines += ["", f"## {name}", "", "Not measured: " + ("; ".join(reasons) or "no sizes selected") + "."]
    not_installed = sorted({x["peer"] for x in results["skipped"] if "not installed" in x["reason"]} - {"*"})
    if not_installed:
        lines += ["", f"Peers not installed (skipped): {', '.join(not_installed)}."]
    return "\n".join(lines) + "\n"


def compare(old_path: str, new_path: str, threshold: float = 0.10) -> str:
    """What got faster or slower from one results file to another, beyond ``threshold``."""
    with open(old_path) as fh:
        old = json.load(fh)
    with open(new_path) as fh:
        new = json.load(fh)

    def key(m: dict[str, Any]) -> tuple[str, str, str, str]:
        return (m["workload"], m["label"], m["peer"], m["direction"])

    before = {key(m): m for m in old["measurements"]}
    changes = []
    common = 0
    for m in new["measurements"]:
        b = before.get(key(m))
        if b is None:
            continue
        common += 1
        r = m["median_ns"] / b["median_ns"]
        if abs(math.log(r)) >= math.log1p(threshold):
            changes.append((r, key(m), b["median_ns"], m["median_ns"], m["payload_bytes"] - b["payload_bytes"]))
    lines = [f"{old_path} -> {new_path}: {common} measurements in both, {len(changes)} changed by ≥ {threshold:.0%}"]
    if (
        old["machine"].get("cpu_model") != new["machine"].get("cpu_model")
        or old["machine"]["cpus"] != new["machine"]["cpus"]
    ):
        lines.append("warning: the two runs are from different machines; compare with care")
    for title, pick in (("faster", lambda r: r < 1), ("slower", lambda r: r > 1)):
        sel = sorted((c for c in changes if pick(c[0])), key=lambda c: c[0] if title == "faster" else -c[0])
        if not sel:
            continue
        lines += ["", f"{title} ({len(sel)}):"]
        for r, (w, label, peer, d), t0, t1, dsize in sel:
            extra = f", payload {dsize:+d} B" if dsize else ""
            lines.append(
                f"  {w:18} {label:>12} {peer:16} {d:5} {fmt_ns(t0):>10} -> {fmt_ns(t1):>10}  {1 / r:.2f}×{extra}"
            )
    return "\n".join(lines)


__all__ = ["compare", "fmt_bytes", "losses", "render"]
