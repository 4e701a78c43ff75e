"""Python-level fuzzing of ``freight.loads``: random mutations (byte changes, deletions,
insertions) of payloads of every built-in serializer, compressed and not, in both layouts,
loaded with ``allow_pickle=False`` and then used as a program would (repr, arithmetic).

Each payload kind runs in child processes, so that a crash is counted (and its payload saved)
rather than ending the run. Every failure must be a ``freight.FreightError``; anything else is
reported with its payload.

    python fuzz/loads_mutations.py --seconds 60            # all kinds, ~60 s in all
    python fuzz/loads_mutations.py --kinds scipy-csr --mutations 20000
    PYTHONMALLOC=malloc MALLOC_CHECK_=3 python fuzz/loads_mutations.py   # glibc checks the heap

Exit status 1 when a child crashed or a non-freight exception escaped.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

KINDS = [
    "builtins", "numpy", "numpy-structured", "pandas", "polars", "pyarrow", "scipy-csr", "scipy-coo",
    "scipy-bsr", "scipy-dia", "torch", "torch-sparse", "xarray",
]  # fmt: skip

CHILD = r"""
import random, sys, warnings
warnings.simplefilter("ignore")
import numpy as np
import freight

kind, seed, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = random.Random(seed)


def value(kind):
    if kind == "builtins":
        return {"a": [1, 2.5, "x" * 40, b"y" * 30, (None, True)], "b": {1, 2, 3}, "c": 10**30}
    if kind == "numpy":
        return [np.arange(60, dtype=np.int64).reshape(6, 10), np.linspace(0, 1, 33), np.zeros(3, dtype=">u2")]
    if kind == "numpy-structured":
        return np.zeros(7, dtype=[("a", "<i4"), ("b", "<f8", (2,)), ("c", "S3")])
    if kind == "pandas":
        import pandas as pd
        return pd.DataFrame({"i": range(8), "f": np.arange(8.0), "s": list("abcdefgh"),
                             "c": pd.Categorical(list("xyxyxyxy")), "t": pd.date_range("2024", periods=8)})
    if kind == "polars":
        import polars as pl
        return pl.DataFrame({"i": range(8), "s": list("abcdefgh"), "f": [0.5] * 8})
    if kind == "pyarrow":
        import pyarrow as pa
        return pa.table({"i": pa.array(range(8)), "s": pa.array(list("abcdefgh")), "l": pa.array([[1, 2]] * 8)})
    if kind.startswith("scipy-"):
        import scipy.sparse as sp
        return sp.random(20, 20, density=0.2, format=kind[6:], random_state=seed)
    if kind == "torch":
        import torch
        return {"w": torch.arange(12.0).reshape(3, 4), "b": torch.ones(4, dtype=torch.bfloat16)}
    if kind == "torch-sparse":
        import torch
        return torch.eye(6).to_sparse()
    if kind == "xarray":
        import xarray as xr
        return xr.Dataset({"v": (("t", "y"), np.arange(12.0).reshape(4, 3))}, coords={"t": np.arange(4)})
    raise SystemExit(f"unknown kind {kind}")


def use(obj):
    repr(obj)
    for attr in ("sum", "to_numpy", "toarray", "to_dense", "to_pandas"):
        fn = getattr(obj, attr, None)
        if callable(fn):
            try:
                fn()
            except Exception:
                pass  # the library refusing an odd but valid value is fine; a crash is not


v = value(kind)
bases = [freight.dumps(v), freight.dumps(v, compression="lz4"), freight.dumps(v, compression="zstd")]
frames = [bytes(p) for p in freight.dumps_frames(v, checksum=True)]
failures = 0
with open(out, "wb") as last:
    for i in range(n):
        split = rng.random() < 0.25
        if split:
            parts = [bytearray(p) for p in frames]
            target = parts[rng.randrange(len(parts))]
        else:
            target = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 4)):
            op, pos = rng.random(), rng.randrange(max(1, len(target)))
            if op < 0.6 and target:
                target[pos] = rng.randrange(256)
            elif op < 0.8 and len(target) > 1:
                del target[pos]
            else:
                target.insert(pos, rng.randrange(256))
        blob = b"".join(parts) if split else bytes(target)
        last.seek(0); last.write(blob); last.truncate(); last.flush()
        try:
            obj = (freight.loads_frames([bytes(p) for p in parts], allow_pickle=False, verify=rng.random() < 0.5)
                   if split else freight.loads(bytes(target), allow_pickle=False, verify=rng.random() < 0.5))
            use(obj)
        except freight.FreightError:
            pass
        except Exception as exc:
            failures += 1
            print(f"NON-FREIGHT {kind} seed {seed} #{i}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
print(f"OK {n} {failures}")
"""


def run_child(kind: str, seed: int, n: int, outdir: str) -> tuple[str, int, int, str | None]:
    out = os.path.join(outdir, f"{kind}-{seed}.bin")
    proc = subprocess.run([sys.executable, "-c", CHILD, kind, str(seed), str(n), out], capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    for line in lines:
        if line.startswith("NON-FREIGHT"):
            print(line)
    done = lines[-1].split() if lines and lines[-1].startswith("OK") else None
    if proc.returncode != 0 or done is None:
        return kind, 0, 1, f"{kind} seed {seed}: exit {proc.returncode}; last payload in {out}; {proc.stderr[-300:]}"
    return kind, int(done[1]), int(done[2]), None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--mutations", type=int, default=2000, help="per child process")
    parser.add_argument("--seconds", type=float, default=60.0, help="stop starting children after this")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--out", default=None, help="where crashing payloads are kept")
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    outdir = args.out or tempfile.mkdtemp(prefix="freight-fuzz-")
    os.makedirs(outdir, exist_ok=True)
    deadline = time.monotonic() + args.seconds
    totals = {k: [0, 0, 0] for k in kinds}  # mutations, non-freight errors, crashes
    crashes: list[str] = []
    seeds = iter(range(random.randrange(1 << 30), 1 << 31))
    turns = itertools.cycle(kinds)  # every kind gets its turn, whatever their speed
    lock = threading.Lock()

    def work(_: int) -> None:
        while time.monotonic() < deadline:
            with lock:
                kind, seed = next(turns), next(seeds)
            k, done, failures, crash = run_child(kind, seed, args.mutations, outdir)
            totals[k][0] += done
            totals[k][1] += failures if crash is None else 0
            if crash:
                totals[k][2] += 1
                crashes.append(crash)

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(work, range(args.jobs)))
    print(f"{'kind':18} {'mutations':>10} {'non-freight':>12} {'crashes':>8}")
    for kind, (done, failures, crashed) in totals.items():
        print(f"{kind:18} {done:>10} {failures:>12} {crashed:>8}")
    print(f"{'all':18} {sum(t[0] for t in totals.values()):>10} {sum(t[1] for t in totals.values()):>12} "
          f"{sum(t[2] for t in totals.values()):>8}")  # fmt: skip
    for crash in crashes:
        print("CRASH", crash)
    return 1 if crashes or any(t[1] for t in totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
