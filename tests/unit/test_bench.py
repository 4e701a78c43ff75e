"""`python -m freight bench`: it runs every workload at tiny sizes and writes results.json,
report.md and the PNG plots; --compare and --list work; bad options are usage errors. The
timings themselves are not checked (no wall-clock thresholds in tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from freight.bench import report
from freight.bench.harness import parse_size
from freight.bench.workloads import WORKLOADS, select

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "freight", "bench", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    proc = _bench("--quick", "--max-size", "4KiB", "--repeat", "1", "--no-progress", "--out", str(out), cwd=out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "wrote" in proc.stdout
    return out


def test_results_json_holds_every_workload_and_direction(quick_run: Path) -> None:
    results = json.loads((quick_run / "results.json").read_text())
    assert results["schema"] == "freight-bench/1"
    assert results["errors"] == []
    assert results["machine"]["cpus"] >= 1
    assert "numpy" in results["machine"]["versions"]
    measured = {m["workload"] for m in results["measurements"]}
    assert measured == {w.name for w in WORKLOADS}
    for m in results["measurements"]:
        assert m["direction"] in ("dumps", "loads")
        assert m["median_ns"] > 0 and m["min_ns"] <= m["median_ns"]
        assert m["repeats"] == 1 and m["number"] >= 1
        assert m["payload_bytes"] > 0
    # freight and pickle-5 both measured, in both directions, wherever pickle applies
    for w in WORKLOADS:
        peers = {(m["peer"], m["direction"]) for m in results["measurements"] if m["workload"] == w.name}
        assert {("freight", "dumps"), ("freight", "loads")} <= peers, w.name
        if w.kind not in ("closure", "compress"):
            assert {("pickle-5", "dumps"), ("pickle-5", "loads")} <= peers, w.name
    # a peer that is skipped or fails says why
    for s in results["skipped"]:
        assert s["reason"]


def test_plots_are_pngs_one_per_workload_plus_throughput_and_compression(quick_run: Path) -> None:
    results = json.loads((quick_run / "results.json").read_text())
    expected = {f"{w.name}.png" for w in WORKLOADS} | {"throughput.png", "compression.png"}
    assert set(results["plots"]) == expected
    assert {p.name for p in quick_run.glob("*.png")} == expected
    for name in expected:
        data = (quick_run / name).read_bytes()
        assert data.startswith(PNG_MAGIC), name
        assert len(data) > 10_000, name  # a drawn figure, not an empty canvas
    # and matplotlib reads them back as images of the size written
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg

    h, w, _ = mpimg.imread(quick_run / "numpy-float64.png").shape
    assert w > 1000 and h > 400


def test_report_has_a_section_per_workload_with_ratios(quick_run: Path) -> None:
    text = (quick_run / "report.md").read_text()
    assert text.startswith("# freight bench")
    assert "## Where freight is slower" in text
    for w in WORKLOADS:
        assert f"\n## {w.name}\n" in text
    assert "freight vs pickle-5" in text and "freight vs best peer" in text
    assert "freight lz4 vs lz4.frame" in text
    assert text.count("### dumps") == len(WORKLOADS) and text.count("### loads") == len(WORKLOADS)
    # The tables summary: a row per row count, a ratio per library and direction, a payload ratio.
    summary = text.split("## Tables against pickle-5", 1)[1].split("\n## ", 1)[0]
    header = next(line for line in summary.splitlines() if line.startswith("| rows"))
    assert header.count("dumps") == 3 and header.count("loads") == 3 and header.count("size") == 3
    first = next(line for line in summary.splitlines() if line.startswith("| 10 rows"))
    assert first.count("×") == 6 and "–" not in first


def test_compare_prints_faster_and_slower(quick_run: Path, tmp_path: Path) -> None:
    old = json.loads((quick_run / "results.json").read_text())
    new = json.loads(json.dumps(old))
    first, second = new["measurements"][0], new["measurements"][1]
    first["median_ns"] = first["median_ns"] / 3  # much faster
    second["median_ns"] = second["median_ns"] * 3  # much slower
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    proc = _bench("--compare", "old.json", "new.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "2 changed" in proc.stdout
    assert "faster (1)" in proc.stdout and "slower (1)" in proc.stdout
    assert "3.00×" in proc.stdout and "0.33×" in proc.stdout


def test_list_and_usage_errors(tmp_path: Path) -> None:
    proc = _bench("--list", cwd=tmp_path)
    assert proc.returncode == 0
    for w in WORKLOADS:
        assert w.name in proc.stdout
    proc = _bench("--only", "nosuch", "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "unknown workload nosuch" in proc.stderr
    proc = _bench("--max-size", "lots", "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "not a size" in proc.stderr


def test_only_selects_groups_and_names() -> None:
    assert {w.name for w in select("numpy")} == {"numpy-float64", "numpy-int64", "numpy-structured"}
    assert [w.name for w in select("pandas,records")] == ["pandas", "records"]
    with pytest.raises(ValueError, match="choose from"):
        select("numpy,bogus")


def test_sizes_follow_quick_and_max_size() -> None:
    numpy = select("numpy-float64")[0]
    full = numpy.sizes_for(False, None)
    assert full[0] == 1024 and full[-1] == 1 << 30 and len(full) == 11
    quick = numpy.sizes_for(True, None)
    assert max(quick) <= 64 << 20 and len(quick) < len(full)
    assert numpy.sizes_for(False, parse_size("16KiB")) == [1024, 4096, 16384]
    pandas = select("pandas")[0]
    assert pandas.sizes_for(False, None)[-1] == 10_000_000
    assert parse_size("64MiB") == 64 << 20 and parse_size("1g") == 1 << 30 and parse_size("4096") == 4096


def _m(workload: str, label: str, peer: str, direction: str, ns: float) -> dict:
    return {
        "workload": workload, "group": "g", "axis": "bytes", "size": 1, "label": label, "nbytes": 8,
        "peer": peer, "direction": direction, "repeats": 1, "number": 1, "median_ns": ns, "min_ns": ns,
        "payload_bytes": 10,
    }  # fmt: skip


def test_losses_compare_with_pickle_and_the_best_peer() -> None:
    results = {
        "workloads": {"w": {"group": "g", "axis": "bytes", "description": "d", "kind": "array"}},
        "peers": {
            "freight": {"ours": True, "reference": False},
            "copy": {"ours": False, "reference": True},
            "pickle-5": {"ours": False, "reference": False},
            "fast": {"ours": False, "reference": False},
        },
        "measurements": [
            _m("w", "1 KiB", "freight", "dumps", 100),
            _m("w", "1 KiB", "copy", "dumps", 10),  # a reference is never the "best peer"
            _m("w", "1 KiB", "pickle-5", "dumps", 200),
            _m("w", "1 KiB", "fast", "dumps", 50),
            _m("w", "1 KiB", "freight", "loads", 100),
            _m("w", "1 KiB", "pickle-5", "loads", 50),  # pickle is also the best: listed once
        ],
    }
    lost = report.losses(results)
    assert ("w", "dumps", "1 KiB", "freight vs fast", 0.5) in lost
    assert ("w", "loads", "1 KiB", "freight vs pickle-5", 0.5) in lost
    assert len(lost) == 2
    assert report.fmt_ratio(0.5) == "**0.50×**" and report.fmt_ratio(2) == "2.00×"


def test_render_writes_report_and_plots_from_a_results_file(quick_run: Path, tmp_path: Path) -> None:
    proc = _bench("--render", str(quick_run / "results.json"), "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "report.md").read_text().startswith("# freight bench")
    assert {p.name for p in tmp_path.glob("*.png")} == {p.name for p in quick_run.glob("*.png")}


def test_engines_summary_scores_targets_and_marks_same_path(tmp_path: Path) -> None:
    from freight.bench import engines

    def row(engine: str, workload: str, serializer: str, seconds: float, **extra: str) -> dict:
        return {"engine": engine, "workload": workload, "serializer": serializer, "tasks": 10, "seconds": seconds,
                "bytes": 1, **extra}  # fmt: skip

    rows = [
        row("dask", "tiny tasks", "default", 1.0), row("dask", "tiny tasks", "freight", 1.04),
        row("dask", "tiny tasks", "freight", 0.99),  # the best of the repeats counts
        row("dask", "64 MiB arrays", "default", 2.0), row("dask", "64 MiB arrays", "freight", 1.6),
        row("ray", "64 MiB arrays", "default", 1.0, same_path="numpy"),
        row("ray", "64 MiB arrays", "freight", 2.0, same_path="numpy"),
    ]  # fmt: skip
    lines = {(ln["engine"], ln["workload"]): ln for ln in engines.summary(rows)}
    tiny = lines[("dask", "tiny tasks")]
    assert tiny["freight_s"] == 0.99 and tiny["met"] and tiny["target"] == 0.95
    arrays = lines[("dask", "64 MiB arrays")]
    assert abs(arrays["ratio"] - 1.25) < 1e-9 and not arrays["met"] and arrays["target"] == 1.5
    text = engines.render(list(lines.values()), ["scaler (scaler not installed)"], [], "machine")
    assert "| dask | 64 MiB arrays |" in text and "**missed**" in text
    assert "same path (numpy)" in text and "Not measured: scaler" in text
    engines.plot(list(lines.values()), str(tmp_path / "engines.png"))
    assert (tmp_path / "engines.png").read_bytes().startswith(PNG_MAGIC)
