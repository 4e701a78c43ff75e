"""Python-level fuzzing of ``freight.loads``: random mutations (byte changes, deletions,
insertions) of payloads of every built-in serializer, compressed and not, in both layouts,
loaded with ``allow_pickle=False`` and then used as a program would (repr, arithmetic).

Each payload kind runs in child processes, so that a crash is counted (and its payload saved)
rather than ending the run. Every failure must be a ``freight.FreightError``; anything else is
reported with its payload.

    python fuzz/loads_mutations.py --seconds 60            # all kinds, ~60 s in all
    python fuzz/loads_mutations.py --kinds scipy-csr --mutations 20000
    python fuzz/loads_mutations.py --rounds 1 --mutations 300   # one child per kind, however long
    PYTHONMALLOC=malloc MALLOC_CHECK_=3 python fuzz/loads_mutations.py   # glibc checks the heap
    make fuzz-asan    # against an AddressSanitizer build of the extension (see docs/SECURITY.md)

With ``--extension PREFIX`` every child first checks that ``freight._freight`` was loaded from a
path starting with PREFIX (the AddressSanitizer build, say) and the run stops at once otherwise.

Exit status 1 when a child crashed or a non-freight exception escaped.
"""

from __future__ import annotations

import argparse
import itertools
import math
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
    # Kinds added by the second round (payload-controlled indices), after the first ones so that a
    # short run still reaches every kind above.
    "pandas-sparse", "pyarrow-nested", "torch-sparse-compressed", "tf-ragged", "tf-sparse",
    # Third round: layouts only the Rust Arrow path rebuilds from buffers.
    "pyarrow-layouts", "polars-nested",
]  # fmt: skip

CHILD = r"""
import os, random, sys, warnings
warnings.simplefilter("ignore")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import freight
import freight._freight

kind, seed, n, out, extension = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
if extension and not os.path.realpath(freight._freight.__file__).startswith(os.path.realpath(extension)):
    print(f"WRONG-EXTENSION {freight._freight.__file__}", flush=True)
    sys.exit(3)
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
    if kind == "pandas-sparse":
        import pandas as pd
        return pd.DataFrame({"s": pd.arrays.SparseArray([0, 0, 1.5, 0, np.nan, 2.0, 0, 0]),
                             "b": pd.arrays.SparseArray([0, 3, 0, 0, 0, 0, 4, 0], kind="block"),
                             "c": pd.Categorical(list("xyzxyzxy")),
                             "n": pd.array([1, None, 3, 4, 5, 6, 7, 8], "Int64")},
                            index=pd.MultiIndex.from_product([["a", "b"], range(4)]))
    if kind == "pyarrow-nested":
        import pyarrow as pa
        return pa.table({
            "d": pa.array(list("abcabcab")).dictionary_encode(),
            "m": pa.array([[(1, "x")], [], None, [(2, "y"), (3, None)]] * 2, type=pa.map_(pa.int64(), pa.string())),
            "s": pa.array([{"a": i, "b": str(i)} for i in range(8)]),
            "L": pa.array(["long string " * 3] * 8, type=pa.large_string()),
            "ll": pa.array([[[1], [2, 3]], None] * 4, type=pa.list_(pa.large_list(pa.int16()))),
            "f": pa.array([[1, 2]] * 8, type=pa.list_(pa.int8(), 2)),
        })
    if kind == "pyarrow-layouts":  # what only the Rust Arrow path rebuilds from buffers
        import pyarrow as pa
        return pa.table({
            "u": pa.UnionArray.from_dense(pa.array([0, 1, 0, 1], pa.int8()), pa.array([0, 0, 1, 1], pa.int32()),
                                          [pa.array([1, 2]), pa.array(["a", "b"])]),
            "r": pa.RunEndEncodedArray.from_arrays([1, 4], pa.array(["x", None])),
            "v": pa.array(["short", "a value longer than twelve bytes", None, "é" * 9], pa.string_view()),
            "b": pa.array([b"\xff" * 20, b"", None, b"x"], pa.binary_view()),
            "lv": pa.array([[1], None, [2, 3], []], pa.list_view(pa.int32())),
        })
    if kind == "polars-nested":
        import polars as pl
        return pl.DataFrame({"s": ["a value longer than twelve bytes"] * 8,
                             "c": pl.Series(list("xyxyxyxy"), dtype=pl.Categorical),
                             "e": pl.Series(list("abababab"), dtype=pl.Enum(["a", "b"])), "n": [None] * 8,
                             "l": [[1, 2], None] * 4, "st": [{"a": 1, "b": "q"}] * 8})
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
    if kind == "torch-sparse-compressed":
        import torch
        return [torch.eye(6).to_sparse_csr(), torch.arange(12.0).reshape(3, 4).to_sparse_csc(),
                torch.eye(4).to_sparse_bsr((2, 2))]
    if kind == "tf-ragged":
        import tensorflow as tf
        return [tf.ragged.constant([[1, 2], [], [3, 4, 5]]), tf.ragged.constant([[[1.0], [2.0, 3.0]], [[4.0]]]),
                tf.RaggedTensor.from_uniform_row_length(tf.range(6), 2)]
    if kind == "tf-sparse":
        import tensorflow as tf
        return [tf.sparse.from_dense(tf.eye(5)), tf.SparseTensor([[0, 1, 2], [3, 0, 1]], [1.5, 2.5], [4, 2, 3])]
    if kind == "xarray":
        import xarray as xr
        return xr.Dataset({"v": (("t", "y"), np.arange(12.0).reshape(4, 3))}, coords={"t": np.arange(4)})
    raise SystemExit(f"unknown kind {kind}")


def use(obj):
    repr(obj)
    for item in obj if isinstance(obj, list) else [obj]:
        for attr in ("sum", "to_numpy", "toarray", "to_dense", "to_pandas", "to_pylist", "to_tensor"):
            fn = getattr(item, attr, None)
            if callable(fn):
                try:
                    fn()
                except Exception:
                    pass  # the library refusing an odd but valid value is fine; a crash is not
        if type(item).__name__ == "SparseTensor":
            import tensorflow as tf
            try:
                tf.sparse.to_dense(tf.sparse.reorder(item))
            except Exception:
                pass


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


class WrongExtension(Exception):
    """A child did not load the extension the run was asked to test."""


def run_child(kind: str, seed: int, n: int, outdir: str, extension: str = "") -> tuple[str, int, int, str | None]:
    out = os.path.join(outdir, f"{kind}-{seed}.bin")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(seed), str(n), out, extension], capture_output=True, text=True
    )
    lines = proc.stdout.strip().splitlines()
    if lines and lines[0].startswith("WRONG-EXTENSION"):
        raise WrongExtension(f"{lines[0]}, not under {extension}")
    for line in lines:
        if line.startswith("NON-FREIGHT"):
            print(line)
    done = lines[-1].split() if lines and lines[-1].startswith("OK") else None
    if proc.returncode != 0 or done is None:
        with open(out + ".stderr", "w") as err:  # an AddressSanitizer report is long: all of it
            err.write(proc.stderr)
        return kind, 0, 1, f"{kind} seed {seed}: exit {proc.returncode}; last payload in {out}; {proc.stderr[-300:]}"
    return kind, int(done[1]), int(done[2]), None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--mutations", type=int, default=2000, help="per child process")
    parser.add_argument("--seconds", type=float, default=60.0, help="stop starting children after this")
    parser.add_argument(
        "--rounds", type=int, default=None, help="instead of --seconds: each kind runs this many children, then stop"
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--out", default=None, help="where crashing payloads are kept")
    parser.add_argument("--extension", default="", help="children must load freight._freight from under this path")
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    outdir = args.out or tempfile.mkdtemp(prefix="freight-fuzz-")
    os.makedirs(outdir, exist_ok=True)
    # A number of rounds ends the run by count, not time: a test's outcome must not hang on the
    # machine's speed (under load, a time budget left kinds that never got a child).
    deadline = math.inf if args.rounds is not None else time.monotonic() + args.seconds
    totals = {k: [0, 0, 0] for k in kinds}  # mutations, non-freight errors, crashes
    crashes: list[str] = []
    seeds = iter(range(random.randrange(1 << 30), 1 << 31))
    # every kind gets its turn, whatever their speed
    turns = iter(kinds * args.rounds) if args.rounds is not None else itertools.cycle(kinds)
    lock = threading.Lock()
    wrong: list[str] = []

    def work(_: int) -> None:
        while time.monotonic() < deadline and not wrong:
            with lock:
                kind, seed = next(turns, None), next(seeds)
            if kind is None:
                return
            try:
                k, done, failures, crash = run_child(kind, seed, args.mutations, outdir, args.extension)
            except WrongExtension as exc:
                wrong.append(str(exc))
                return
            totals[k][0] += done
            totals[k][1] += failures if crash is None else 0
            if crash:
                totals[k][2] += 1
                crashes.append(crash)

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(work, range(args.jobs)))
    if wrong:
        print(f"stopped: a child loaded another extension: {wrong[0]}")
        return 2
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
