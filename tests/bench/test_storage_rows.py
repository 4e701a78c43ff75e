"""``freight bench --storage`` (freight.bench.storage) at toy sizes: every row on the local store
and the S3 server, its targets, and the files it writes."""

from __future__ import annotations

import json

import pytest

from freight.bench import main as bench_main
from freight.bench import storage


def test_storage_rows_at_toy_sizes(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pyarrow")
    if storage.s3_server_binary() is None:
        pytest.skip("no s3s-fs (make test-server)")
    monkeypatch.setattr(storage, "ARRAY_BYTES", 2 << 20)
    monkeypatch.setattr(storage, "LONG_ROWS", 1_000_000)
    monkeypatch.setattr(storage, "TABLE_ROWS", 20_000)
    monkeypatch.setattr(storage, "ROUND_BUDGET_S", 0.0)  # the --repeat rounds alone
    monkeypatch.setattr(storage, "EVICT_BYTES", 1 << 20)
    out = tmp_path / "out"
    assert bench_main(["--storage", "--quick", "--repeat", "1", "--no-plots", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "lazy / whole" in text and ("PASS" in text or "MISS" in text)
    results = json.loads((out / "storage.json").read_text())
    assert [(r["backend"], r["case"].split()[0]) for r in results["rows"]] == [
        (b, c) for b in ("local", "s3") for c in ("one", "1,000", "one")
    ]
    by_name = {t["name"]: t for t in results["targets"]}
    bytes_row = by_name["s3: one array of 8 x 2 MiB, bytes read"]
    assert bytes_row["passed"] and bytes_row["value"] <= 1.05
    assert by_name["s3: 1,000 rows of a 1M-row float64 array, bytes read"]["value"] <= 1 << 20
    assert all(r["rounds"] == 1 for r in results["rows"])
    assert (out / "storage.md").read_text().startswith("# Values read in part")
