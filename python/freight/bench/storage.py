"""``freight bench --storage``: values read in part (``Store.lazy``) against whole loads, on a
local folder store and on an S3-compatible server (``s3s-fs`` on loopback: ``make test-server``
installs it into .tools/bin; ``FREIGHT_S3S_FS`` names another binary; without one the S3 rows
are listed as not measured).

Rows (the targets of issue 31, "Values read in part"):

- one array of a dict of 8 float64 arrays of 32 MiB: opening the value and reading that array
  lazily, against ``Store.load`` of the whole value (target: ≤ 0.2× its time); on S3 also the
  bytes read, counted by the lazy value (``lv.bytes_read``: every byte the ranged reads
  returned, the speculative first read of the header included; target: ≤ 1.05× the array's
  stored bytes plus the header);
- a 1,000-row slice of a 10M-row float64 array (76 MiB): bytes read (target: ≤ 1 MiB), and its
  time against the whole load;
- one column of a 10-column, 1M-row pyarrow Table (``lv.columns([name])``) against the whole
  load (target: ≤ 0.2× its time).

Times are the best of at least ``repeat`` calls, lazy and whole interleaved (noise only adds
time), with more rounds while a case has used less than its time budget (the sub-millisecond
reads get dozens: the best of three was noise). Both sides start each call in the same state:
the file in the OS page cache (it was just written and read) and the CPU caches holding other
data (64 MiB written just before: twice a large L3), as a read is in a process that does other
work. (Interleaved without that, the lazy read ran right after the whole load had streamed
76 MiB through the caches while the whole load ran right after the small lazy read: the lazy
side alone paid for cold caches.) Each lazy call opens the value afresh, so it pays for its
header read. Values are written with the
store's defaults (frame checksums, compression where it pays). Writes ``storage.json``,
``storage.md`` and ``storage.png`` (times, lazy against whole, with the bytes read).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from freight.bench.harness import MiB, Target, fmt_bytes, fmt_ns, markdown_table, print_table, print_targets

__all__ = ["main", "measure", "s3_server_binary"]

ARRAYS, ARRAY_BYTES = 8, 32 * MiB
SLICE_ROWS, LONG_ROWS = 1_000, 10_000_000
TABLE_COLUMNS, TABLE_ROWS = 10, 1_000_000
TIME_RATIO, BYTES_RATIO, SLICE_BYTES = 0.2, 1.05, 1 * MiB
_KEY, _SECRET, _BUCKET = "benchkey", "benchsecret-benchsecret", "bench"


def s3_server_binary() -> Path | None:
    """The s3s-fs binary: $FREIGHT_S3S_FS, the repository's .tools/bin/s3s-fs, or one on PATH."""
    named = os.environ.get("FREIGHT_S3S_FS")
    candidates = [Path(named)] if named else []
    candidates.append(Path(__file__).resolve().parents[3] / ".tools" / "bin" / "s3s-fs")
    found = shutil.which("s3s-fs")
    candidates += [Path(found)] if found else []
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


class S3Server:
    """s3s-fs on a free loopback port, serving a temporary folder."""

    def __init__(self, binary: Path, scratch: str):
        self.binary = binary
        self.scratch = scratch

    def __enter__(self) -> S3Server:
        self.tmp = tempfile.TemporaryDirectory(dir=self.scratch)
        (Path(self.tmp.name) / _BUCKET).mkdir()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        args = [str(self.binary), "--host", "127.0.0.1", "--port", str(port), "--access-key", _KEY]
        self.proc = subprocess.Popen(
            [*args, "--secret-key", _SECRET, self.tmp.name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        self.endpoint = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()
        self.tmp.cleanup()

    def store(self) -> Any:
        import freight.storage as fs

        return fs.open(
            f"s3://{_BUCKET}/lazy",
            endpoint_url=self.endpoint,
            access_key_id=_KEY,
            secret_access_key=_SECRET,
            region="us-east-1",
            allow_http=True,
        )


# Written before each timed call (see the module's docstring): twice a 32 MiB L3.
EVICT_BYTES = 64 * MiB
# Rounds past ``repeat`` run while a case has taken less than this (seconds), up to MAX_ROUNDS.
ROUND_BUDGET_S, MAX_ROUNDS = 2.0, 100


class _CacheEvictor:
    """Writes one byte per cache line of EVICT_BYTES, so that what a timed call finds in the
    CPU caches is other data, whichever call ran before it."""

    def __init__(self) -> None:
        import numpy as np

        self._scribble = np.zeros(EVICT_BYTES, dtype=np.uint8)

    def __call__(self) -> None:
        self._scribble[::64] += 1


def _best(fns: dict[str, Any], repeat: int, evict: Any = None) -> tuple[dict[str, int], dict[str, Any], int]:
    """Best time (ns) of each function over at least ``repeat`` rounds (more while the case
    has run under ROUND_BUDGET_S), one call of each per round, each after ``evict()``; each
    one's last result; and the number of rounds."""
    times: dict[str, list[int]] = {name: [] for name in fns}
    last: dict[str, Any] = {}
    started = time.perf_counter()
    rounds = 0
    while rounds < repeat or (rounds < MAX_ROUNDS and time.perf_counter() - started < ROUND_BUDGET_S):
        for name, fn in fns.items():
            last.pop(name, None)  # the previous result (a mapping, a table) released first
            if evict is not None:
                evict()
            t0 = time.perf_counter_ns()
            last[name] = fn()
            times[name].append(time.perf_counter_ns() - t0)
        rounds += 1
    return {name: min(t) for name, t in times.items()}, last, rounds


def _values() -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(0)
    arrays = {f"w{i}": rng.random(ARRAY_BYTES // 8) for i in range(ARRAYS)}
    long = rng.random(LONG_ROWS)
    table = pa.table({f"c{i}": rng.random(TABLE_ROWS) for i in range(TABLE_COLUMNS)})
    return {"arrays": arrays, "long": {"x": long}, "table": table}


def _case(store: Any, backend: str, values: dict[str, Any], repeat: int) -> list[dict[str, Any]]:
    """The three rows of one backend: {case, backend, lazy_ns, whole_ns, bytes_read, ...}."""
    import numpy as np

    rows = []
    evict = _CacheEvictor()
    for name, value in values.items():
        store.save(name, value)
    # one array of eight
    pick = f"w{ARRAYS // 2}"

    def one_array() -> Any:
        lv = store.lazy("arrays")
        return lv, lv[pick].load()

    best, last, rounds = _best({"lazy": one_array, "whole": lambda: store.load("arrays")}, repeat, evict)
    lv, got = last["lazy"]
    assert np.array_equal(got, values["arrays"][pick])
    info = lv.info(pick)
    header = store.info("arrays")["header_length"]
    rows.append(
        dict(
            case=f"one array of {ARRAYS} x {ARRAY_BYTES // MiB} MiB",
            backend=backend,
            lazy_ns=best["lazy"],
            whole_ns=best["whole"],
            rounds=rounds,
            bytes_read=lv.bytes_read,
            requests=lv._reader.source.requests,
            part_bytes=info["stored_bytes"],
            header_bytes=header,
            stored_bytes=store.head("arrays").size,
        )
    )
    # a 1,000-row slice of a 10M-row array
    lo = LONG_ROWS // 2 + 12_345

    def rows_slice() -> Any:
        lv = store.lazy("long")
        return lv, lv["x"][lo : lo + SLICE_ROWS]

    best, last, rounds = _best({"lazy": rows_slice, "whole": lambda: store.load("long")}, repeat, evict)
    lv, got = last["lazy"]
    assert np.array_equal(got, values["long"]["x"][lo : lo + SLICE_ROWS])
    rows.append(
        dict(
            case=f"{SLICE_ROWS:,} rows of a {LONG_ROWS // 1_000_000}M-row float64 array",
            backend=backend,
            lazy_ns=best["lazy"],
            whole_ns=best["whole"],
            rounds=rounds,
            bytes_read=lv.bytes_read,
            requests=lv._reader.source.requests,
            part_bytes=SLICE_ROWS * 8,
            header_bytes=store.info("long")["header_length"],
            stored_bytes=store.head("long").size,
        )
    )
    # one column of a 10-column table
    column = f"c{TABLE_COLUMNS // 2}"

    def one_column() -> Any:
        lv = store.lazy("table")
        return lv, lv.columns([column])

    best, last, rounds = _best({"lazy": one_column, "whole": lambda: store.load("table")}, repeat, evict)
    lv, got = last["lazy"]
    assert got.column_names == [column] and got.column(0).equals(values["table"].column(column))
    rows.append(
        dict(
            case=f"one column of a {TABLE_COLUMNS}-column {TABLE_ROWS // 1_000_000}M-row table",
            backend=backend,
            lazy_ns=best["lazy"],
            whole_ns=best["whole"],
            rounds=rounds,
            bytes_read=lv.bytes_read,
            requests=lv._reader.source.requests,
            part_bytes=TABLE_ROWS * 8,
            header_bytes=store.info("table")["header_length"],
            stored_bytes=store.head("table").size,
        )
    )
    return rows


def _targets(rows: list[dict[str, Any]]) -> list[Target]:
    targets = []
    for r in rows:
        where = f"{r['backend']}: {r['case']}"
        ratio = r["lazy_ns"] / r["whole_ns"]
        if not r["case"].startswith(f"{SLICE_ROWS:,} rows"):
            targets.append(
                Target(
                    "d", f"{where}, time", f"{ratio:.3f}x", f"<= {TIME_RATIO}x whole load", ratio <= TIME_RATIO, ratio
                )
            )
        if r["case"].startswith("one array") and r["backend"] == "s3":
            bound = r["part_bytes"] + r["header_bytes"]
            share = r["bytes_read"] / bound
            targets.append(
                Target(
                    "d",
                    f"{where}, bytes read",
                    f"{share:.4f}x ({fmt_bytes(r['bytes_read'])})",
                    f"<= {BYTES_RATIO}x array + header",
                    share <= BYTES_RATIO,
                    share,
                )
            )
        if r["case"].startswith(f"{SLICE_ROWS:,} rows"):
            n = r["bytes_read"]
            targets.append(Target("d", f"{where}, bytes read", fmt_bytes(n), "<= 1 MiB", n <= SLICE_BYTES, n))
    return targets


def _table_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            r["backend"],
            r["case"],
            fmt_ns(r["lazy_ns"]),
            fmt_ns(r["whole_ns"]),
            f"{r['lazy_ns'] / r['whole_ns']:.3f}x",
            fmt_bytes(r["bytes_read"]),
            str(r["requests"]),
            str(r.get("rounds", "")),
            fmt_bytes(r["stored_bytes"]),
        ]
        for r in rows
    ]


HEADERS = ["store", "read", "lazy", "whole load", "lazy / whole", "bytes read", "requests", "rounds", "stored"]


def measure(quick: bool, repeat: int | None = None, scratch: str | None = None) -> dict[str, Any]:
    """Every row, on the local store and (when there is a server binary) on S3:
    {"rows": [...], "targets": [...], "skipped": [...]}."""
    import freight.storage as fs

    repeat = repeat or (3 if quick else 5)
    scratch = scratch or tempfile.gettempdir()
    values = _values()
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        rows += _case(fs.open(os.path.join(tmp, "store")), "local", values, repeat)
    binary = s3_server_binary()
    if binary is None:
        skipped.append("s3 (no s3s-fs: `make test-server` installs it, or set FREIGHT_S3S_FS)")
    else:
        with S3Server(binary, scratch) as server:
            rows += _case(server.store(), "s3", values, repeat)
    return {"rows": rows, "targets": [t.__dict__ for t in _targets(rows)], "skipped": skipped, "repeat": repeat}


def plot(rows: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['backend']}: {r['case']}" for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.7 * len(rows) + 2.1))
    ys = range(len(rows))
    whole = [r["whole_ns"] / 1e6 for r in rows]
    lazy = [r["lazy_ns"] / 1e6 for r in rows]
    ax.barh([y + 0.2 for y in ys], whole, height=0.4, color="#bbbbbb", label="Store.load (the whole value)")
    ax.barh([y - 0.2 for y in ys], lazy, height=0.4, color="#2ca02c", label="Store.lazy: the part alone")
    for y, r in zip(ys, rows):
        note = f"{r['lazy_ns'] / r['whole_ns']:.3f}x, {fmt_bytes(r['bytes_read'])} read"
        ax.annotate(note, (r["lazy_ns"] / 1e6, y - 0.2), textcoords="offset points", xytext=(4, -3), fontsize=8)
    ax.set_xscale("log")
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds (best of the runs; log scale)")
    ax.set_title("Reading part of a stored value against loading all of it", fontsize=10)
    # Below the axes, in a row: inside them it covered the last bars (the longest, S3's).
    handles, names = ax.get_legend_handles_labels()
    fig.legend(handles, names, fontsize=8, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(quick: bool, out_dir: str, repeat: int | None = None, plots: bool = True) -> int:
    from freight.bench.runner import machine_info

    started = time.time()
    results = measure(quick, repeat)
    m = machine_info()
    targets = [Target(**t) for t in results["targets"]]
    machine = (
        f"{m['cpus']} CPUs ({m['cpu_model']}), Python {m['python']}; {'quick' if quick else 'full'} run, "
        f"best of {results['repeat']}-{MAX_ROUNDS} rounds per case (rounds column), each call after "
        f"{EVICT_BYTES // MiB} MiB written (CPU caches cold, files in the page cache), {time.time() - started:.0f} s."
    )
    print(f"== values read in part: Store.lazy against Store.load ({machine}) ==")
    print_table(HEADERS, _table_rows(results["rows"]))
    print_targets(targets)
    for s in results["skipped"]:
        print(f"not measured: {s}")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "storage.json"), "w") as fh:
        json.dump({"machine": m, **results}, fh, indent=1)
    target_rows = [[t.name, t.measured, t.required, "PASS" if t.passed else "MISS"] for t in targets]
    text = (
        "# Values read in part\n\n"
        + machine
        + "\n\n"
        + markdown_table(HEADERS, _table_rows(results["rows"]))
        + "\n\n"
        + markdown_table(["target", "measured", "required", "result"], target_rows)
        + "\n"
        + "".join(f"\nnot measured: {s}\n" for s in results["skipped"])
    )
    with open(os.path.join(out_dir, "storage.md"), "w") as fh:
        fh.write(text)
    wrote = ["storage.json", "storage.md"]
    if plots and results["rows"]:
        try:
            plot(results["rows"], os.path.join(out_dir, "storage.png"))
            wrote.append("storage.png")
        except ImportError:
            print('freight bench: matplotlib is not installed (pip install "freight[bench]"); no plot', file=sys.stderr)
    print(f"wrote {', '.join(f'{out_dir}/{w}' for w in wrote)}")
    return 0
