"""The PNG plots of a results dict (matplotlib, drawn off-screen).

- ``<workload>.png``: time per call against size, log-log, one line per peer, dumps and loads side
  by side (a grouped bar chart for workloads of named cases: small values, closures);
- ``throughput.png``: GiB/s of every peer at each workload's largest size;
- ``compression.png``: compression ratio against throughput, per codec.

A peer keeps its colour in every plot; freight's own lines are drawn thicker, the ``copy``
reference dotted.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from freight.bench.harness import GiB, fmt_bytes, fmt_count
from freight.bench.ratios import DIRECTIONS

_OURS = ("#d62728", "#e377c2", "#8c1c13", "#ff7f0e", "#a05195")  # freight's rows: reds, pink and orange
_OTHERS = (
    "#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#bcbd22", "#7f7f7f", "#08306b",
    "#393b79", "#ff9896", "#00a087", "#f0c808", "#6a3d9a", "#b15928", "#4dbbd5", "#636363",
)  # fmt: skip
# distinct hues, none red or orange (freight's); peers keep their colour across every plot of a run
_REFERENCES = ("#000000", "#9a9a9a", "#5a5a5a")  # reference lines (copy, floors): greys


def _colours(peers: dict[str, dict[str, bool]]) -> dict[str, str]:
    out: dict[str, str] = {}
    ours = [p for p, i in peers.items() if i.get("ours")]
    others = [p for p, i in peers.items() if not i.get("ours")]
    for i, p in enumerate(ours):
        out[p] = _OURS[i % len(_OURS)]
    others = [p for p in others if not peers[p].get("reference")]
    # references (copy, Arrow's validated and checked reads) in shades of grey, each its own
    references = [p for p, info in peers.items() if info.get("reference")]
    for i, p in enumerate(references):
        out[p] = _REFERENCES[i % len(_REFERENCES)]
    for i, p in enumerate(others):
        out[p] = _OTHERS[i % len(_OTHERS)]
    return out


def _style(name: str, peers: dict[str, dict[str, bool]], colours: dict[str, str]) -> dict[str, Any]:
    info = peers.get(name, {})
    style: dict[str, Any] = {"color": colours.get(name, "#333333"), "marker": "o", "markersize": 3, "linewidth": 1.2}
    if info.get("ours"):
        style.update(linewidth=2.6, markersize=5, zorder=5)
    if info.get("reference"):
        style.update(linestyle=":", marker=None)
    if name == "freight frames":
        style.update(linestyle="--")
    if name == "freight (checksum)":
        style.update(linestyle="-.", linewidth=1.8)
    return style


def _seconds(value: float, _pos: Any = None) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if value >= scale:
            v = value / scale
            return f"{v:.0f} {unit}" if v >= 1 else f"{v:.1g} {unit}"
    return f"{value:.0e} s"


def _size_label(axis: str, value: float) -> str:
    return fmt_bytes(value) if axis == "bytes" else fmt_count(value)


def _by_workload(results: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in results["measurements"]:
        out[m["workload"]].append(m)
    return out


def _lines_figure(plt: Any, name: str, info: dict, ms: list[dict], peers: dict, colours: dict) -> Any:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    axis = info["axis"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), sharey=True)
    sizes = sorted({m["size"] for m in ms})
    order = list(dict.fromkeys(m["peer"] for m in ms))
    for ax, direction in zip(axes, DIRECTIONS):
        for peer in order:
            pts = sorted(
                (m["size"], m["median_ns"] / 1e9) for m in ms if m["peer"] == peer and m["direction"] == direction
            )
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, label=peer, **_style(peer, peers, colours))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ticks = sizes if len(sizes) <= 7 else sizes[::2]  # every other one: labels must not touch
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: _size_label(axis, v)))
        ax.yaxis.set_major_formatter(FuncFormatter(_seconds))
        ax.set_xlabel({"bytes": "data size (bytes)", "rows": "rows", "items": "items in the list"}[axis])
        ax.set_title(f"{direction}", fontsize=11)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("time per call (log scale)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.suptitle(f"{name}: {info['description']}", fontsize=12)
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.1 if len(labels) <= 6 else 0.15, 1, 0.95))
    return fig


def _bars_figure(plt: Any, name: str, info: dict, ms: list[dict], peers: dict, colours: dict) -> Any:
    cases = list(dict.fromkeys(m["label"] for m in ms))
    order = list(dict.fromkeys(m["peer"] for m in ms))
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), sharey=True)
    width = 0.8 / max(1, len(order))
    for ax, direction in zip(axes, DIRECTIONS):
        for j, peer in enumerate(order):
            t = {m["label"]: m["median_ns"] / 1e9 for m in ms if m["peer"] == peer and m["direction"] == direction}
            xs = [i + (j - (len(order) - 1) / 2) * width for i, c in enumerate(cases) if c in t]
            ys = [t[c] for c in cases if c in t]
            ax.bar(xs, ys, width=width, label=peer, color=colours.get(peer), edgecolor="white", linewidth=0.5)
        ax.set_yscale("log")
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(_seconds))
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(cases, fontsize=9)
        ax.set_title(direction, fontsize=11)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel("time per call (log scale)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.suptitle(f"{name}: {info['description']}", fontsize=12)
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    return fig


def _plain(value: float, _pos: Any = None) -> str:
    return f"{value:g}"


def _throughput_figure(plt: Any, results: dict, by_w: dict, colours: dict) -> Any | None:
    from matplotlib.ticker import FuncFormatter, NullFormatter

    sized = [w for w, i in results["workloads"].items() if i["axis"] != "case" and by_w.get(w)]
    if not sized:
        return None
    cols = 2
    rows = (len(sized) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(13, 3.2 * rows), squeeze=False)
    for k, name in enumerate(sized):
        ax = axes[k // cols][k % cols]
        ms = by_w[name]
        largest = max(m["size"] for m in ms)
        top = [m for m in ms if m["size"] == largest]
        order = list(dict.fromkeys(m["peer"] for m in top))
        rates = {(m["peer"], m["direction"]): m["nbytes"] / (m["median_ns"] / 1e9) / GiB for m in top}
        ys = range(len(order))
        for off, direction, hatch in ((-0.2, "dumps", None), (0.2, "loads", "//")):
            vals = [rates.get((p, direction), 0.0) for p in order]
            ax.barh([y + off for y in ys], vals, height=0.38, color=[colours.get(p) for p in order],
                    hatch=hatch, edgecolor="white", label=direction)  # fmt: skip
        ax.set_yticks(list(ys))
        ax.set_yticklabels(order, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(_plain))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("GiB/s (log scale; plain: dumps, hatched: loads)", fontsize=8)
        ax.set_title(f"{name} at {top[0]['label']}", fontsize=10)
        ax.grid(True, axis="x", alpha=0.3)
    for k in range(len(sized), rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.suptitle("Throughput at the largest size (data bytes ÷ time per call)", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig


def _compression_figure(plt: Any, results: dict, by_w: dict, colours: dict) -> Any | None:
    from matplotlib.ticker import FuncFormatter, NullFormatter

    names = [w for w, i in results["workloads"].items() if i["kind"] == "compress" and by_w.get(w)]
    if not names:
        return None
    ms = by_w[names[0]]
    largest = max(m["size"] for m in ms)
    top = [m for m in ms if m["size"] == largest]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    for ax, direction in zip(axes, DIRECTIONS):
        for m in (m for m in top if m["direction"] == direction):
            x = m["nbytes"] / (m["median_ns"] / 1e9) / GiB
            y = m["nbytes"] / m["payload_bytes"]
            ours = results["peers"].get(m["peer"], {}).get("ours")
            # a legend, not annotations: codecs with similar figures would print over each other
            ax.scatter([x], [y], s=110 if ours else 60, color=colours.get(m["peer"]), zorder=3,
                       marker="D" if ours else "o", label=m["peer"], edgecolor="white")  # fmt: skip
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(_plain))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"{'compress' if direction == 'dumps' else 'decompress'} throughput, GiB/s (log scale)")
        ax.set_title(direction, fontsize=11)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("compression ratio (raw ÷ stored)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(7, len(labels)), fontsize=9, frameon=False)
    fig.suptitle(f"Compression of {names[0]} ({top[0]['label']}): ratio against throughput", fontsize=12)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    return fig


def write_plots(results: dict[str, Any], out_dir: str) -> list[str]:
    """Draws every plot into ``out_dir`` and returns the file names written (relative)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peers = results["peers"]
    colours = _colours(peers)
    by_w = _by_workload(results)
    written: list[str] = []

    def save(fig: Any, name: str) -> None:
        fig.savefig(os.path.join(out_dir, name), dpi=110)
        plt.close(fig)
        written.append(name)

    for name, info in results["workloads"].items():
        ms = by_w.get(name)
        if not ms:
            continue
        draw = _bars_figure if info["axis"] == "case" else _lines_figure
        save(draw(plt, name, info, ms, peers, colours), f"{name}.png")
    for fname, draw in (("throughput.png", _throughput_figure), ("compression.png", _compression_figure)):
        fig = draw(plt, results, by_w, colours)
        if fig is not None:
            save(fig, fname)
    return written
