"""Storage benchmarks: freight.storage against the peers a user would reach for, in one run.

    python benchmarks/bench_storage.py            # 1 GiB values (a few minutes on 2 cores)
    python benchmarks/bench_storage.py --quick    # 256 MiB values

Cases (``--cases``):

a. Local folder: ``Store.save`` / ``Store.load`` of a float64 array (stored uncompressed)
   against ``cp`` of a file of the same size on the same disk (both fsync their output);
   ``load(mmap=True)``: verified (the default: each checksummed frame is read once, not copied)
   against the copy it avoids (``load``), and ``verify=False`` (constant time).
b. S3 on a loopback s3s-fs server (``make test-server`` builds it): ``save`` / ``load`` against
   boto3's ``upload_fileobj`` / ``download_fileobj`` (its default multi-threaded transfer) of the
   same bytes to the same server.
c. Peak memory of ``save`` (a child process per backend): resident set growth over the input.
d. Values read in part (``Store.lazy``, issue 31), local and S3: one array of 8 x 32 MiB, 1,000
   rows of a 10M-row array, one column of a 10-column 1M-row table, against the whole load, and
   the bytes each read (:mod:`freight.bench.storage`, also ``freight bench --storage``).

Ratios are peer time / freight time (above 1: freight is faster). Targets come from the storage
issue; the exit status follows harness.finish.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import freight.storage as fs
from freight.bench.harness import (
    MiB,
    Target,
    finish,
    fmt_bytes,
    fmt_ns,
    fmt_rate,
    parse_args,
    print_table,
    print_targets,
)

ROOT = Path(__file__).resolve().parents[1]
S3S = ROOT / ".tools" / "bin" / "s3s-fs"
KEY, SECRET, BUCKET = "benchkey", "benchsecret-benchsecret", "bench"


def _scratch() -> Path:
    """Scratch space on the project's disk (git-ignored), not /tmp, which may be a RAM disk."""
    path = ROOT / ".tools" / "bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _array(nbytes: int) -> np.ndarray:
    return np.random.default_rng(0).random(nbytes // 8)


def _best(fn, repeat: int) -> float:
    """The best of ``repeat`` timed calls, in ns (disk and network noise only ever add time).
    Dirty pages of earlier writes are flushed first (``sync``), so that no call pays for
    another's writeback."""
    times = []
    for _ in range(repeat):
        os.sync()
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return min(times)


def _best_interleaved(fns: dict, repeat: int) -> dict:
    """``_best`` of several functions, one call of each per round, so that drifts of a shared
    disk hit them alike."""
    times: dict = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            times[name].append(_best(fn, 1))
    return {name: min(t) for name, t in times.items()}


def _cp(src: str, dst: str) -> None:
    subprocess.run(["cp", src, dst], check=True)
    fd = os.open(dst, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def case_local(nbytes: int, repeat: int, targets: list[Target], rows: list[list[str]]) -> dict:
    arr = _array(nbytes)
    with tempfile.TemporaryDirectory(dir=_scratch()) as tmp:
        store = fs.open(os.path.join(tmp, "store"), compression="none")
        src = os.path.join(tmp, "src.bin")
        arr.tofile(src)
        best = _best_interleaved(
            {"cp": lambda: _cp(src, os.path.join(tmp, "copy.bin")), "save": lambda: store.save("a", arr)}, repeat
        )
        cp_ns, save_ns = best["cp"], best["save"]
        load_ns = _best(lambda: store.load("a"), repeat)
        mmap_ns = _best(lambda: store.load("a", mmap=True), max(repeat, 5))
        unverified_ns = _best(lambda: store.load("a", mmap=True, verify=False), max(repeat, 5))
        assert np.array_equal(store.load("a", mmap=True), arr)
    rate = lambda ns: nbytes / (ns / 1e9)  # noqa: E731
    rows += [
        [
            f"local save {fmt_bytes(nbytes)}",
            fmt_ns(save_ns),
            fmt_rate(rate(save_ns)),
            "cp + fsync",
            fmt_ns(cp_ns),
            f"{cp_ns / save_ns:.2f}x",
        ],
        [
            f"local load {fmt_bytes(nbytes)}",
            fmt_ns(load_ns),
            fmt_rate(rate(load_ns)),
            "cp + fsync",
            fmt_ns(cp_ns),
            f"{cp_ns / load_ns:.2f}x",
        ],
        [
            f"local load(mmap=True) {fmt_bytes(nbytes)}, checksums verified",
            fmt_ns(mmap_ns),
            fmt_rate(rate(mmap_ns)),
            "load (a copy)",
            fmt_ns(load_ns),
            f"{load_ns / mmap_ns:.2f}x",
        ],
        [f"local load(mmap=True, verify=False) {fmt_bytes(nbytes)}", fmt_ns(unverified_ns), "-", "-", "-", "-"],
    ]
    targets += [
        Target(
            "a", "local save vs cp", f"{cp_ns / save_ns:.2f}x", ">= 0.8x cp", cp_ns / save_ns >= 0.8, cp_ns / save_ns
        ),
        Target(
            "a", "local load vs cp", f"{cp_ns / load_ns:.2f}x", ">= 0.8x cp", cp_ns / load_ns >= 0.8, cp_ns / load_ns
        ),
        Target(
            "a",
            "load(mmap=True) verified vs load",
            f"{load_ns / mmap_ns:.2f}x",
            ">= 1.0x load",
            load_ns / mmap_ns >= 1.0,
            load_ns / mmap_ns,
        ),
        Target(
            "a", "load(mmap=True, verify=False)", fmt_ns(unverified_ns), "< 1 ms", unverified_ns < 1e6, unverified_ns
        ),
    ]
    return {"cp_ns": cp_ns, "save_ns": save_ns, "load_ns": load_ns, "mmap_ns": mmap_ns, "unverified_ns": unverified_ns}


class _Server:
    """s3s-fs on a free loopback port, serving a temporary folder."""

    def __enter__(self) -> _Server:
        if not S3S.exists():
            raise SystemExit(f"{S3S} is missing: run `make test-server` (make bench does)")
        self.tmp = tempfile.TemporaryDirectory(dir=_scratch())
        (Path(self.tmp.name) / BUCKET).mkdir()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        args = [str(S3S), "--host", "127.0.0.1", "--port", str(self.port), "--access-key", KEY, "--secret-key", SECRET]
        self.proc = subprocess.Popen([*args, self.tmp.name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()
        self.tmp.cleanup()

    def store(self) -> fs.Store:
        return fs.open(
            f"s3://{BUCKET}/freight",
            endpoint_url=self.endpoint,
            access_key_id=KEY,
            secret_access_key=SECRET,
            region="us-east-1",
            allow_http=True,
            compression="none",
        )


def case_s3(nbytes: int, repeat: int, targets: list[Target], rows: list[list[str]]) -> dict:
    try:
        import boto3
    except ImportError:
        raise SystemExit("bench_storage.py case b needs boto3 (make bench installs it)") from None
    import io

    arr = _array(nbytes)
    raw = arr.tobytes()
    with _Server() as server:
        store = server.store()
        client = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            region_name="us-east-1",
        )
        up_ns = _best(lambda: client.upload_fileobj(io.BytesIO(raw), BUCKET, "boto/a"), repeat)

        def download() -> None:
            out = io.BytesIO()
            client.download_fileobj(BUCKET, "boto/a", out)

        down_ns = _best(download, repeat)
        save_ns = _best(lambda: store.save("a", arr), repeat)
        load_ns = _best(lambda: store.load("a"), repeat)
        assert np.array_equal(store.load("a"), arr)
    rows += [
        [
            f"s3 save {fmt_bytes(nbytes)}",
            fmt_ns(save_ns),
            fmt_rate(nbytes / (save_ns / 1e9)),
            "boto3 upload_fileobj",
            fmt_ns(up_ns),
            f"{up_ns / save_ns:.2f}x",
        ],
        [
            f"s3 load {fmt_bytes(nbytes)}",
            fmt_ns(load_ns),
            fmt_rate(nbytes / (load_ns / 1e9)),
            "boto3 download_fileobj",
            fmt_ns(down_ns),
            f"{down_ns / load_ns:.2f}x",
        ],
    ]
    targets += [
        Target(
            "b", "s3 save vs boto3", f"{up_ns / save_ns:.2f}x", ">= 2x boto3", up_ns / save_ns >= 2, up_ns / save_ns
        ),
        Target(
            "b",
            "s3 load vs boto3",
            f"{down_ns / load_ns:.2f}x",
            ">= 2x boto3",
            down_ns / load_ns >= 2,
            down_ns / load_ns,
        ),
    ]
    return {"boto3_upload_ns": up_ns, "boto3_download_ns": down_ns, "save_ns": save_ns, "load_ns": load_ns}


_RSS_CHILD = r"""
import sys, numpy as np, freight.storage as fs

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

nbytes, url = int(sys.argv[1]), sys.argv[2]
opts = dict(endpoint_url=sys.argv[3], access_key_id=sys.argv[4], secret_access_key=sys.argv[5],
            region="us-east-1", allow_http=True) if url.startswith("s3://") else {}
store = fs.open(url, compression="none", **opts)
store.save("warm", np.zeros(1024))  # runtime, connections and imports before the baseline
arr = np.random.default_rng(0).random(nbytes // 8)
base = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as fh:  # resets the peak (VmHWM) to the current RSS
    fh.write("5")
store.save("a", arr)
print(max(0, status("VmHWM:") - base))
"""


def case_memory(nbytes: int, targets: list[Target], rows: list[list[str]]) -> dict:
    out = {}
    with tempfile.TemporaryDirectory(dir=_scratch()) as tmp, _Server() as server:
        for name, url, extra in (
            ("local", os.path.join(tmp, "store"), []),
            ("s3", f"s3://{BUCKET}/rss", [server.endpoint, KEY, SECRET]),
        ):
            child = subprocess.run(
                [sys.executable, "-c", _RSS_CHILD, str(nbytes), url, *extra], capture_output=True, text=True, check=True
            )
            growth = int(child.stdout.strip())
            out[name] = growth
            rows.append(
                [f"{name} save {fmt_bytes(nbytes)}: peak RSS over the input", fmt_bytes(growth), "-", "-", "-", "-"]
            )
            targets.append(
                Target("c", f"{name} save peak RSS", fmt_bytes(growth), "<= input + 64 MiB", growth <= 64 * MiB, growth)
            )
    return out


def case_lazy(quick: bool, targets: list[Target], rows: list[list[str]]) -> dict:
    from freight.bench import storage

    out = storage.measure(quick, scratch=str(_scratch()))
    for r in out["rows"]:
        lazy, whole = r["lazy_ns"], r["whole_ns"]
        part = f"{r['backend']} lazy: {r['case']} ({fmt_bytes(r['bytes_read'])} read)"
        rows.append([part, fmt_ns(lazy), "-", "load (the whole value)", fmt_ns(whole), f"{whole / lazy:.2f}x"])
    targets += [Target(**t) for t in out["targets"]]
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(
        "bench_storage.py", "freight.storage against cp and boto3", "abcd", "256 MiB instead of 1 GiB", argv
    )
    nbytes = (256 if args.quick else 1024) * MiB
    repeat = 3 if args.quick else 5
    started = time.perf_counter()
    targets: list[Target] = []
    rows: list[list[str]] = []
    results: dict = {"nbytes": nbytes, "cases": {}}
    if "a" in args.cases:
        results["cases"]["local"] = case_local(nbytes, repeat, targets, rows)
    if "b" in args.cases:
        results["cases"]["s3"] = case_s3(nbytes, repeat, targets, rows)
    if "c" in args.cases:
        results["cases"]["memory"] = case_memory(nbytes, targets, rows)
    if "d" in args.cases:
        results["cases"]["lazy"] = case_lazy(args.quick, targets, rows)
    print(f"== freight.storage, {fmt_bytes(nbytes)} float64 array, best of {repeat} ==")
    print_table(["operation", "freight", "throughput", "peer", "peer time", "ratio"], rows)
    print_targets(targets)
    misses = [f"{t.name}: {t.measured} (target {t.required})" for t in targets if not t.passed]
    results["targets"] = [t.__dict__ for t in targets]
    return finish(
        args, sum(t.passed for t in targets), len(targets), time.perf_counter() - started, misses, [], results
    )


if __name__ == "__main__":
    shutil.which("cp") or sys.exit("bench_storage.py needs cp")
    sys.exit(main())
