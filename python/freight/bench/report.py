"""report.md from a results dict, and ``--compare`` of two results files.

Ratios are **peer time ÷ freight time** (ratios.py decides who meets whom): above 1 freight is
faster, below 1 it is slower, and the report marks those in bold. Results files written before
allocator states and peak memory were recorded (schema freight-bench/1) render and compare too:
their measurements have one, unnamed, state and no memory column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from freight.bench.causes import cause
from freight.bench.harness import fmt_bytes, fmt_ns, markdown_table
from freight.bench.peers import BASELINE
from freight.bench.ratios import DIRECTIONS, Comparison, compare_in, comparisons, index, labels, losses, pairs_for

STATE_NAMES = {
    "warm": "this process, glibc's mmap threshold raised: buffers reused from the heap",
    "fresh": (
        "a fresh process, the threshold pinned at 128 KiB, the heap's free regions taken before every "
        "sample and Arrow on the system allocator: every buffer of 128 KiB or more a new mapping"
    ),
    "isolated": "each peer alone in a fresh process",
}


def fmt_ratio(r: float) -> str:
    return f"{r:.2f}×" if r >= 1 else f"**{r:.2f}×**"


def _states_note(c: Comparison | dict[str, Any]) -> str:
    """The ratio in each state ("warm 1.20×, fresh 0.85×") where a cell has more than one."""
    by_state = c.by_state if isinstance(c, Comparison) else c["by_state"]
    if len(by_state) < 2:
        return ""
    return ", ".join(f"{s} {r:.2f}×" for s, r in by_state.items())


def _cell(c: Comparison | None) -> str:
    if c is None:
        return "-"
    notes = [c.other] if c.best else []
    if len(c.by_state) > 1:  # the state the ratio is from, then the other's: "fresh; warm 1.57×"
        others = ", ".join(f"{s} {r:.2f}×" for s, r in c.by_state.items() if s != c.state)
        notes.append(f"{c.state}; {others}")
    return fmt_ratio(c.ratio) + (f" ({'; '.join(notes)})" if notes else "")


def _peer_order(results: dict[str, Any], workload: str) -> list[str]:
    return list(dict.fromkeys(m["peer"] for m in results["measurements"] if m["workload"] == workload))


def _pair_title(ours: str, other: str) -> str:
    return f"{ours} vs {'best peer' if other == 'best' else other}"


def _workload_section(results: dict[str, Any], name: str, idx: dict) -> list[str]:
    info = results["workloads"][name]
    peers_info = results["peers"]
    peers = _peer_order(results, name)
    sizes = labels(results, name)
    lines = [f"## {name}", "", f"{info['description']}."]
    skipped = [s for s in results["skipped"] if s["workload"] == name]
    if skipped:
        lines += ["", "Not measured: " + "; ".join(f"{s['peer']} ({s['reason']})" for s in skipped) + "."]
    pairs = [(a, b) for a, b in pairs_for(info["kind"]) if a in peers]
    for direction in DIRECTIONS:
        headers = ["size", *peers] + [_pair_title(a, b) for a, b in pairs]
        if direction == "dumps":
            headers.append("payload ÷ " + ("raw" if info["kind"] == "compress" else BASELINE))
        rows = []
        for label in sizes:
            row = idx.get((name, label, direction), {})
            cells = [label] + [fmt_ns(row[p]["median_ns"]) if p in row else "-" for p in peers]
            cells += [_cell(compare_in(row, a, b, direction, peers_info)) for a, b in pairs]
            if direction == "dumps":
                cells.append(_payload_ratio(row, info["kind"]))
            rows.append(cells)
        lines += ["", f"### {direction}", "", markdown_table(headers, rows)]
    lines += _memory_table(name, peers, sizes, idx)
    return lines


def _memory_table(name: str, peers: list[str], sizes: list[str], idx: dict) -> list[str]:
    """Peak memory each call added, per peer, for the sizes that were probed."""
    rows = []
    for label in sizes:
        d, lo = idx.get((name, label, "dumps"), {}), idx.get((name, label, "loads"), {})
        if not any(m.get("peak_bytes") is not None for m in (*d.values(), *lo.values())):
            continue
        cells = [label]
        for p in peers:
            pd, pl = (r.get(p, {}).get("peak_bytes") for r in (d, lo))
            cells.append(" / ".join("-" if v is None else fmt_bytes(v) for v in (pd, pl)))
        rows.append(cells)
    if not rows:
        return []
    return [
        "",
        "### peak memory",
        "",
        "Resident memory the call added at its peak, `dumps` / `loads` (the input was already resident).",
        "",
        markdown_table(["size", *peers], rows),
    ]


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


TABLES = ("pandas", "polars", "pyarrow")


def _checksums(results: dict[str, Any]) -> str:
    on = results.get("freight_defaults", {}).get("checksum", True)  # /1 files: the default was on
    return "checksums written and verified" if on else "no checksums"


def tables_summary(results: dict[str, Any], idx: dict) -> list[str]:
    """The tables issue's view: pickle-5 time ÷ freight time per row count, each direction, and
    freight's payload size ÷ pickle-5's, for the DataFrame and Table workloads measured."""
    present = [w for w in TABLES if any(k[0] == w for k in idx)]
    if not present:
        return []
    header = ["rows"] + [f"{w} {d}" for w in present for d in DIRECTIONS] + [f"{w} size" for w in present]
    rows = []
    for label in labels(results, present[0]):
        cells = [label]
        sizes = []
        for w in present:
            for d in DIRECTIONS:
                c = compare_in(idx.get((w, label, d), {}), "freight", BASELINE, d, results["peers"])
                cells.append("–" if c is None else fmt_ratio(c.ratio))
            row = idx.get((w, label, "dumps"), {})
            mine, theirs = row.get("freight"), row.get(BASELINE)
            ok = mine and theirs and mine.get("payload_bytes") and theirs.get("payload_bytes")
            sizes.append(f"{mine['payload_bytes'] / theirs['payload_bytes']:.2f}" if ok else "–")
        rows.append(cells + sizes)
    return [
        "",
        "## Tables against pickle-5",
        "",
        f"pickle-5 time ÷ freight time (`dumps`/`loads`, {_checksums(results)}; the worse of the "
        "allocator states where there are two), and freight's payload size ÷ pickle-5's.",
        "",
        markdown_table(header, rows),
    ]


def losses_table(results: dict[str, Any]) -> list[str]:
    lost = losses(results)
    if not lost:
        return ["Nowhere in this run."]
    idx = index(results)
    rows = [
        [
            c["workload"],
            c["direction"],
            c["label"],
            c["ours"],
            c["other"],
            fmt_ratio(c["ratio"]),
            _states_note(c),
            cause(c, idx),
        ]
        for c in lost
    ]
    header = ["workload", "direction", "size", "freight row", "loses to", "ratio", "by state", "measured cause"]
    return [
        "A measured cause is a floor the same run measured (freight.bench.causes): where the floor "
        "itself is slower than the peer, no implementation that keeps freight's checks wins the cell.",
        "",
        markdown_table(header, rows),
    ]


def _intro(results: dict[str, Any]) -> list[str]:
    used = {s for m in results["measurements"] for s in (m.get("states") or {})}
    states = [f"`{s}` ({STATE_NAMES[s]})" for s in STATE_NAMES if s in used]
    memory = results.get("memory") or {}
    text = [
        "Times are medians per call (samples of all peers interleaved, after a warm-up). Ratios are "
        "**peer time ÷ freight time**: above 1 freight is faster; **bold** marks where freight is "
        f"slower. `freight` is `dumps` / `loads` with freight's defaults ({_checksums(results)}); "
        "`freight (checksum)` writes and verifies checksums; `freight frames` is `dumps_frames` / "
        "`loads_frames(zero_copy=True)`; `copy` is `arr.copy()`, the one-copy floor. Like is held "
        "against like: `freight` against pickle-5 in band and peers that copy the data, "
        "`freight frames` against pickle-5 out of band and peers that view it. freight's "
        "compression runs on all cores; lz4.frame and zstandard on one, blosc2 on all.",
    ]
    if states:
        text += [
            "",
            "Allocator states: " + "; ".join(states) + ". Sizes measured in two states are held to the worse "
            "ratio; the tables' times are the first state's.",
        ]
    if memory.get("from_bytes"):
        text += [
            "",
            f"Peak memory: from {fmt_bytes(memory['from_bytes'])} on, each peer in a fresh process, "
            f"resident memory a call added at its peak ({', '.join(memory.get('methods') or ['no probe ran'])}).",
        ]
    return text


def _remeasured(results: dict[str, Any]) -> list[str]:
    """Workloads measured again after the run and merged into its results (same machine and
    settings), each with when: a change that touches only them need not re-run the rest."""
    again = results.get("remeasured") or {}
    if not again:
        return []
    return ["Measured again since: " + ", ".join(f"{w} ({when})" for w, when in sorted(again.items())) + "."]


def render(results: dict[str, Any], plots: Iterable[str] = ()) -> str:
    m = results["machine"]
    s = results["settings"]
    idx = index(results)
    lines = [
        "# freight bench",
        "",
        f"{results['started']}, {results['elapsed_s']} s, {'quick' if s['quick'] else 'full'} run. "
        f"{m['cpus']} CPUs ({m['cpu_model']}), Python {m['python']}, {m['platform']}.",
        *_remeasured(results),
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(m["versions"].items())) + ".",
        "",
        *_intro(results),
    ]
    lines += tables_summary(results, idx)
    lines += ["", "## Where freight is slower", "", *losses_table(results)]
    if results["errors"]:
        lines += ["", "## Errors", ""] + [f"- {e}" for e in results["errors"]]
    notes = (results.get("memory") or {}).get("notes")
    if notes:
        lines += ["", "Peak memory not measured: " + "; ".join(notes) + "."]
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


def _changed(r: float, threshold: float) -> bool:
    return abs(math.log(r)) >= math.log1p(threshold)


def _ratio_changes(old: dict[str, Any], new: dict[str, Any], threshold: float) -> list[str]:
    """The like-for-like ratios that moved by ``threshold`` or more, both files paired the same
    way (ratios.py), worst-first: what a before/after note quotes."""

    def key(c: dict[str, Any]) -> tuple[str, ...]:
        return (c["workload"], c["label"], c["direction"], c["ours"], "best peer" if c["best"] else c["other"])

    before = {key(c): c for c in comparisons(old)}
    moved = []
    for c in comparisons(new):
        b = before.get(key(c))
        if b is not None and _changed(c["ratio"] / b["ratio"], threshold):
            moved.append((c["ratio"] / b["ratio"], key(c), b, c))
    if not moved:
        return []
    lines = ["", f"like-for-like ratios (peer time ÷ freight time) that moved ({len(moved)}):"]
    for _, (w, label, d, ours, vs), b, c in sorted(moved, key=lambda x: x[0]):
        lines.append(f"  {w:18} {label:>12} {d:5} {ours} vs {vs}: {b['ratio']:.2f}× -> {c['ratio']:.2f}×")
    return lines


def compare(old_path: str, new_path: str, threshold: float = 0.10) -> str:
    """What got faster or slower from one results file to another, beyond ``threshold``: each
    peer's time (the first state's median) and the like-for-like ratios."""
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
        if _changed(r, threshold):
            changes.append((r, key(m), b["median_ns"], m["median_ns"], m["payload_bytes"] - b["payload_bytes"]))
    lines = [f"{old_path} -> {new_path}: {common} measurements in both, {len(changes)} changed by ≥ {threshold:.0%}"]
    if (
        old["machine"].get("cpu_model") != new["machine"].get("cpu_model")
        or old["machine"]["cpus"] != new["machine"]["cpus"]
    ):
        lines.append("warning: the two runs are from different machines; compare with care")
    if _checksums(old) != _checksums(new):
        lines.append(f"note: the `freight` row changed defaults: {_checksums(old)} -> {_checksums(new)}")
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
    lines += _ratio_changes(old, new, threshold)
    return "\n".join(lines)


__all__ = ["compare", "fmt_bytes", "fmt_ratio", "losses", "render"]
