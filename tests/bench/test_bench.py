"""`python -m freight bench`: it runs every workload at tiny sizes and writes results.json,
report.md and the PNG plots; --compare and --list work (--compare also against results files
written before allocator states and peak memory); bad options are usage errors. The report
holds like against like; mid sizes carry two allocator states, large ones run a child per
peer, and sizes of 1 MiB and more a peak-memory probe. The timings themselves are not checked
(no wall-clock thresholds in tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from freight.bench import causes, ratios, report
from freight.bench.alloc import glibc_version
from freight.bench.harness import KiB, MiB, parse_size
from freight.bench.peers import peer_named
from freight.bench.runner import Settings, run
from freight.bench.workloads import WORKLOADS, select, workload_named
from support import ROOT

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
    proc = _bench(
        "--quick", "--max-size", "4KiB", "--repeat", "1", "--no-memory", "--no-progress", "--out", str(out), cwd=out
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "wrote" in proc.stdout
    return out


def test_results_json_holds_every_workload_and_direction(quick_run: Path) -> None:
    results = json.loads((quick_run / "results.json").read_text())
    assert results["schema"] == "freight-bench/2"
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
        # measured here, and in a second allocator state too from 64 KiB (the compressible
        # workload's smallest size); no peak-memory probe under --no-memory
        two_states = workload_named(m["workload"]).approx_bytes(m["size"]) >= 64 * KiB
        assert m["state"] == "warm" and set(m["states"]) == ({"warm", "fresh"} if two_states else {"warm"})
        assert m["peak_bytes"] is None
        assert m["states"]["warm"]["median_ns"] == m["median_ns"]
    assert results["memory"]["from_bytes"] is None
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
    assert "freight frames vs pickle-5 oob" in text and "freight (checksum) vs pickle-5" in text
    assert "freight lz4 vs lz4.frame" in text
    # like for like: freight's copying calls never meet out-of-band pickle, whose calls view the data
    slower = text.split("## Where freight is slower", 1)[1].split("\n## ", 1)[0]
    assert "| freight | pickle-5 oob |" not in slower and "| loads | 10 rows | freight | arrow ipc |" not in slower
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


def _m(workload: str, label: str, peer: str, direction: str, ns: float, **states: float) -> dict:
    return {
        "workload": workload, "group": "g", "axis": "bytes", "size": 1, "label": label, "nbytes": 8,
        "peer": peer, "direction": direction, "repeats": 1, "number": 1, "median_ns": ns, "min_ns": ns,
        "payload_bytes": 10, "states": {s: {"median_ns": t} for s, t in states.items()},
    }  # fmt: skip


_PEERS_INFO = {
    "freight": {"ours": True, "reference": False, "zero_copy": []},
    "freight frames": {"ours": True, "reference": False, "zero_copy": ["dumps", "loads"]},
    "copy": {"ours": False, "reference": True, "zero_copy": []},
    "pickle-5": {"ours": False, "reference": False, "zero_copy": []},
    "pickle-5 oob": {"ours": False, "reference": False, "zero_copy": ["dumps", "loads"]},
    "fast": {"ours": False, "reference": False, "zero_copy": []},
    "view-loads": {"ours": False, "reference": False, "zero_copy": ["loads"]},
}


def _results(*measurements: dict) -> dict:
    kind = {"group": "g", "axis": "bytes", "description": "d", "kind": "array"}
    return {"workloads": {"w": kind}, "peers": _PEERS_INFO, "measurements": list(measurements)}


def test_losses_hold_like_against_like() -> None:
    results = _results(
        _m("w", "1 KiB", "freight", "dumps", 100),
        _m("w", "1 KiB", "copy", "dumps", 10),  # a reference is never the "best peer"
        _m("w", "1 KiB", "pickle-5", "dumps", 200),
        _m("w", "1 KiB", "fast", "dumps", 50),
        _m("w", "1 KiB", "pickle-5 oob", "dumps", 1),  # views the data: not freight's like
        _m("w", "1 KiB", "freight frames", "dumps", 2),  # ... but freight frames' like
        _m("w", "1 KiB", "freight", "loads", 100),
        _m("w", "1 KiB", "pickle-5", "loads", 50),  # pickle is also the best: listed once
        _m("w", "1 KiB", "view-loads", "loads", 1),  # a zero-copy loads: frames' like, not freight's
        _m("w", "1 KiB", "freight frames", "loads", 4),
        _m("w", "1 KiB", "pickle-5 oob", "loads", 8),
    )
    lost = {(c["direction"], c["ours"], c["other"]): c["ratio"] for c in ratios.losses(results)}
    assert lost == {
        ("dumps", "freight", "fast"): 0.5,
        ("dumps", "freight frames", "pickle-5 oob"): 0.5,
        ("loads", "freight", "pickle-5"): 0.5,
        ("loads", "freight frames", "view-loads"): 0.25,
    }
    assert report.fmt_ratio(0.5) == "**0.50×**" and report.fmt_ratio(2) == "2.00×"
    text = "\n".join(report.losses_table(results))
    assert "| w | dumps | 1 KiB | freight | fast | **0.50×** |" in text
    assert "| freight | pickle-5 oob |" not in text and "| freight | view-loads |" not in text


def test_a_win_must_hold_in_every_allocator_state() -> None:
    # faster than pickle-5 with the heap warm, slower in a fresh process: a loss, at the fresh ratio
    results = _results(
        _m("w", "1 MiB", "freight", "dumps", 100, warm=100, fresh=400),
        _m("w", "1 MiB", "pickle-5", "dumps", 150, warm=150, fresh=300),
    )
    (c,) = [c for c in ratios.comparisons(results) if c["other"] == "pickle-5" and not c["best"]]
    assert c["by_state"] == {"warm": 1.5, "fresh": 0.75}
    assert c["ratio"] == 0.75 and c["state"] == "fresh"
    (lost,) = ratios.losses(results)
    assert (lost["ours"], lost["other"], lost["ratio"]) == ("freight", "pickle-5", 0.75)
    assert "warm 1.50×, fresh 0.75×" in "\n".join(report.losses_table(results))


def test_a_losing_checksum_cell_carries_its_measured_one_core_floor() -> None:
    # copy 100, freight unchecked 110, checked 210 (hashing 100), pickle-5 120: the floor (copy +
    # hash = 200) is itself slower than pickle-5: no one-core implementation wins the cell.
    info = dict(_PEERS_INFO, **{"freight (checksum)": {"ours": True, "reference": False, "zero_copy": []}})
    cell = [
        _m("w", "1 MiB", "copy", "loads", 100),
        _m("w", "1 MiB", "freight", "loads", 110),
        _m("w", "1 MiB", "freight (checksum)", "loads", 210),
    ]
    results = {**_results(*cell, _m("w", "1 MiB", "pickle-5", "loads", 120)), "peers": info}
    (lost,) = [c for c in ratios.losses(results) if c["ours"] == "freight (checksum)"]
    text = causes.cause(lost, ratios.index(results))
    assert "copy 100 ns + hash 100 ns" in text and "at best 0.60×" in text and "no one-core" in text
    assert text in "\n".join(report.losses_table(results))
    # A peer the floor beats: the loss is freight's own, and the cause says so.
    results = {**_results(*cell, _m("w", "1 MiB", "pickle-5", "loads", 205)), "peers": info}
    (lost,) = [c for c in ratios.losses(results) if c["ours"] == "freight (checksum)"]
    assert "at best 1.02× (the rest is freight's)" in causes.cause(lost, ratios.index(results))


def test_an_arrow_ipc_loss_is_set_against_the_read_that_checks() -> None:
    info = dict(_PEERS_INFO, **{
        "arrow ipc": {"ours": False, "reference": False, "zero_copy": ["loads"]},
        causes.CHECKED_IPC: {"ours": False, "reference": True, "zero_copy": ["loads"]},
        causes.VALIDATED_IPC: {"ours": False, "reference": True, "zero_copy": ["loads"]},
    })  # fmt: skip

    def cause_with(checked_ns: float) -> str:
        results = {
            **_results(
                _m("w", "1M rows", "freight frames", "loads", 100),
                _m("w", "1M rows", "arrow ipc", "loads", 10),
                _m("w", "1M rows", causes.CHECKED_IPC, "loads", checked_ns),
                _m("w", "1M rows", causes.VALIDATED_IPC, "loads", 400),
            ),
            "peers": info,
        }
        (lost,) = ratios.losses(results)
        # the checked and validated reads are references, never the best peer
        assert lost["other"] == "arrow ipc"
        return causes.cause(lost, ratios.index(results))

    # The read plus the checks is slower than the unchecked read: a floor no checking reader beats.
    text = cause_with(80)
    assert "takes 80 ns against 10 ns: at best 0.12× (no checking reader measured wins here)" in text
    assert "validate(full=True) takes 400 ns" in text
    # A floor faster than the unchecked read: the loss is freight's own.
    assert "at best 2.00× (the rest is freight's)" in cause_with(5)


@pytest.fixture(scope="module")
def states_run() -> dict:
    """numpy-float64 up to 4 MiB, with the thresholds moved down so that every regime shows up
    at small sizes: 16 and 256 KiB in two allocator states, 4 MiB a child per peer and probed."""
    settings = replace(Settings.make(True, max_bytes=4 * MiB, repeat=1), states_from=16 * KiB, isolate_from=4 * MiB)
    peers = tuple(peer_named(p) for p in ("freight", "freight frames", "copy", "pickle-5", "pickle-5 oob"))
    return run(select("numpy-float64"), settings, progress=False, peers=peers)


def test_mid_sizes_are_measured_in_two_allocator_states(states_run: dict) -> None:
    results = states_run
    assert results["errors"] == []
    assert {"warm", "fresh", "isolated"} <= set(results["allocator"])
    by_label: dict[str, set[tuple[str, ...]]] = {}
    for m in results["measurements"]:
        by_label.setdefault(m["label"], set()).add((m["state"], *sorted(m["states"])))
        assert m["states"][m["state"]]["median_ns"] == m["median_ns"]
        assert all(s["median_ns"] > 0 and s["repeats"] == 1 for s in m["states"].values())
    assert by_label == {
        "1 KiB": {("warm", "warm")},
        "16 KiB": {("warm", "fresh", "warm")},
        "256 KiB": {("warm", "fresh", "warm")},
        "4 MiB": {("isolated", "isolated")},
    }
    # each comparison of a two-state size keeps both ratios and is held to the worse
    results["comparisons"] = ratios.comparisons(results)
    mid = [c for c in results["comparisons"] if c["label"] == "256 KiB"]
    assert {(c["ours"], c["other"]) for c in mid if not c["best"]} == {
        ("freight", "pickle-5"),
        ("freight frames", "pickle-5 oob"),
    }
    for c in mid:
        assert set(c["by_state"]) == {"warm", "fresh"} and c["ratio"] == min(c["by_state"].values())


def test_peak_memory_column_for_a_4_mib_array(states_run: dict, tmp_path: Path) -> None:
    results = states_run
    peaks = {(m["peer"], m["direction"]): m["peak_bytes"] for m in results["measurements"] if m["label"] == "4 MiB"}
    assert results["memory"]["methods"] and results["memory"]["notes"] == []
    for peer in ("freight", "copy", "pickle-5"):  # each copies the 4 MiB once, each way
        assert peaks[peer, "dumps"] > 0
        assert peaks[peer, "loads"] is None or peaks[peer, "loads"] > 0
    # a call that views the data adds no copy of it
    assert peaks["freight frames", "dumps"] < 1 * MiB and peaks["pickle-5 oob", "dumps"] < 1 * MiB
    assert all(m["peak_bytes"] is None for m in results["measurements"] if m["label"] != "4 MiB")
    text = report.render(dict(results, plots=[]))
    table = text.split("### peak memory", 1)[1]
    row = next(line for line in table.splitlines() if line.startswith("| 4 MiB |"))
    assert row.count(" / ") == 5 and "MiB" in row


def _as_schema_1(results: dict) -> dict:
    """A results file as written before allocator states, peak memory and zero_copy."""
    old = json.loads(json.dumps(results))
    old["schema"] = "freight-bench/1"
    for key in ("allocator", "memory", "freight_defaults", "comparisons"):
        old.pop(key, None)
    for info in old["peers"].values():
        info.pop("zero_copy", None)
    for m in old["measurements"]:
        for key in ("state", "states", "peak_bytes"):
            m.pop(key)
    return old


def test_compare_and_render_read_results_written_before_states(states_run: dict, tmp_path: Path) -> None:
    old = _as_schema_1(states_run)
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(states_run))
    text = report.compare(str(tmp_path / "old.json"), str(tmp_path / "new.json"), threshold=0.0)
    assert f"{len(old['measurements'])} measurements in both" in text
    assert "like-for-like ratios" in text
    # an old file's peers are paired by today's table: still like with like
    assert not [c for c in ratios.losses(old) if c["ours"] == "freight" and c["other"] == "pickle-5 oob"]
    assert report.render(dict(old, plots=[])).startswith("# freight bench")
    committed = ROOT / "benchmarks" / "results" / "results.json"
    if committed.exists():  # the results in the repository, whatever schema they are in
        proc = _bench("--compare", str(committed), str(tmp_path / "new.json"), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "measurements in both" in proc.stdout


def test_render_writes_report_and_plots_from_a_results_file(quick_run: Path, tmp_path: Path) -> None:
    proc = _bench("--render", str(quick_run / "results.json"), "--out", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "report.md").read_text().startswith("# freight bench")
    assert {p.name for p in tmp_path.glob("*.png")} == {p.name for p in quick_run.glob("*.png")}


def test_render_merges_workloads_measured_again(states_run: dict, tmp_path: Path) -> None:
    # An earlier run of two workloads, and a later one of numpy-float64 alone: the merge keeps
    # the other workload's rows and takes the later rows for the one measured again.
    other = [dict(m, workload="records", median_ns=m["median_ns"] * 3) for m in states_run["measurements"]]
    earlier = dict(states_run, measurements=states_run["measurements"] + other, started="earlier")
    earlier["workloads"] = {**states_run["workloads"], "records": states_run["workloads"]["numpy-float64"]}
    later = dict(states_run, started="later")
    later["measurements"] = [dict(m, median_ns=m["median_ns"] / 2) for m in states_run["measurements"]]
    (tmp_path / "earlier.json").write_text(json.dumps(earlier))
    (tmp_path / "later.json").write_text(json.dumps(later))
    out = tmp_path / "out"
    proc = _bench("--render", str(tmp_path / "earlier.json"), "--merge", str(tmp_path / "later.json"),
                  "--out", str(out), "--no-plots", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    merged = json.loads((out / "results.json").read_text())
    assert merged["remeasured"] == {"numpy-float64": "later"}
    assert len(merged["measurements"]) == len(earlier["measurements"])
    assert sorted(m["median_ns"] for m in merged["measurements"] if m["workload"] == "numpy-float64") == sorted(
        m["median_ns"] for m in later["measurements"]
    )
    assert sorted(m["median_ns"] for m in merged["measurements"] if m["workload"] == "records") == sorted(
        m["median_ns"] for m in other
    )
    assert "Measured again since: numpy-float64 (later)." in (out / "report.md").read_text()
    # A run measured with other settings is refused, saying which differ; --merge needs --render.
    (tmp_path / "quick.json").write_text(json.dumps(dict(later, settings=dict(later["settings"], point_s=99.0))))
    proc = _bench("--render", str(tmp_path / "earlier.json"), "--merge", str(tmp_path / "quick.json"),
                  "--out", str(out), "--no-plots", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2 and "different settings (point_s)" in proc.stderr
    proc = _bench("--merge", str(tmp_path / "later.json"), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 2 and "goes with --render" in proc.stderr
    # A run missing a peer the earlier one measured that workload with (not installed) is refused.
    peers = sorted({m["peer"] for m in later["measurements"]})
    fewer = dict(later, measurements=[m for m in later["measurements"] if m["peer"] != peers[-1]])
    (tmp_path / "fewer.json").write_text(json.dumps(fewer))
    proc = _bench("--render", str(tmp_path / "earlier.json"), "--merge", str(tmp_path / "fewer.json"),
                  "--out", str(out), "--no-plots", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2 and f"numpy-float64 without {peers[-1]}" in proc.stderr


def test_engines_summary_scores_targets_and_marks_same_path(tmp_path: Path) -> None:
    from freight.bench import engines

    def row(engine: str, workload: str, serializer: str, seconds: float, **extra: str) -> dict:
        return {"engine": engine, "workload": workload, "serializer": serializer, "tasks": 10, "seconds": seconds,
                "bytes": 1, **extra}  # fmt: skip

    rows = [
        row("dask", "tiny tasks", "default", 1.0), row("dask", "tiny tasks", "freight", 1.04),
        row("dask", "tiny tasks", "freight", 0.99), row("dask", "tiny tasks", "freight", 0.5),  # the median counts
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


def test_engines_targets_follow_the_engines_issue() -> None:
    from freight.bench.engines import target

    assert target("closures carrying arrays", "dask") == 1.0  # "must not make them slower"
    assert target("200k-row frames, worker to worker", "dask") == 1.5
    assert target("closures carrying arrays", "scaler") == 1.5
    assert target("tiny tasks", "mpi4py") == 0.95
    assert target("64 MiB arrays", "celery") == 1.5
    assert target("64 MiB arrays", "joblib") == 10.0
    assert target("100k-row DataFrames", "multiprocessing") == 5.0  # issue 31


def test_peers_are_timed_as_user_code_calls_them() -> None:
    # A keyword held by a partial costs each call a dict: pickle's small dumps looked 115 ns
    # slower than a user's `pickle.dumps(x, protocol=5)`. Options are passed positionally.
    import pickle
    from functools import partial

    from freight.bench.peers import bound, peer_named

    for name in ("pickle-5", "cloudpickle"):
        dumps, _ = peer_named(name).codec
        call = bound(dumps, 12345)
        assert isinstance(call, partial) and call.keywords == {}, name
        assert call() == pickle.dumps(12345, protocol=5) == dumps(12345)


def test_the_checked_arrow_floor_reads_the_strings_and_refuses_what_it_cannot_check() -> None:
    import pyarrow as pa

    from freight.bench.peers import peer_named

    dumps, loads = peer_named("arrow ipc (checked)").codec
    table = pa.table({"i": [1, 2], "s": ["a", "é"], "l": pa.array(["x", "y"], pa.large_string())})
    payload = dumps(table)
    assert len(payload.strings) == 2 and loads(payload).equals(table)
    # a floor without the checks a column needs would read too low: not measured
    with pytest.raises(NotImplementedError, match="list<item: int64>"):
        dumps(pa.table({"x": pa.array([[1], [2]])}))


@pytest.mark.parametrize("imported_first", [False, True])
def test_the_fresh_state_puts_arrow_on_the_system_allocator(imported_first: bool) -> None:
    # Arrow's own pool keeps its pages between calls: left on it, the fresh state would compare
    # a warm pool with everyone else's fresh mappings.
    script = (
        ("import pyarrow\n" if imported_first else "") + "from freight.bench.alloc import arrow_on_malloc\n"
        "arrow_on_malloc()\n"
        "import pyarrow as pa\n"
        "print(pa.default_memory_pool().backend_name)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "system"


@pytest.mark.skipif(glibc_version() is None, reason="the allocator states are glibc's")
def test_the_fresh_state_drains_heap_holes_so_that_a_large_buffer_is_a_new_mapping() -> None:
    # Pinning glibc's mmap threshold is not enough: a free hole in the heap serves a large
    # request first, and its pages are resident (a fresh-state row would time warm memory).
    script = """
import ctypes
from freight.bench.alloc import _libc, drain_heap, pin_mmap_threshold
libc = _libc()
assert libc is not None and pin_mmap_threshold()
def mapped(n):
    ptr = libc.malloc(n)
    flag = bool(ctypes.c_size_t.from_address(ptr - 8).value & 2)
    libc.free(ptr)
    return flag
small = [libc.malloc(4000) for _ in range(2000)]   # 8 MB of small chunks on the heap
keep = libc.malloc(4000)                           # above them: the heap cannot shrink
for ptr in small:
    libc.free(ptr)                                 # one free hole of 8 MB
print(mapped(1 << 20), drain_heap() > 0, mapped(1 << 20), mapped(256 << 10))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True", "True"]
