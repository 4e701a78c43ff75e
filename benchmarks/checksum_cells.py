"""The "checksums on" cells of ``freight bench`` (issue 34: at least 0.9x pickle-5 from 256 KiB up),
with what each cell is made of: ``freight.dumps(a, checksum=True)`` and its ``loads`` against
pickle-5, freight without checksums, and one bare copy (``bytes(a.data)``), so that the cost of
hashing can be read off directly (checksummed minus unchecked).

Each allocator state runs in a process of its own, as ``freight bench`` measures mid sizes
(``freight.bench.alloc``): ``warm`` (mmap threshold raised: buffers reused from the heap, so a
call is the copy and the hash) and ``fresh`` (threshold pinned at 128 KiB: every buffer a new
mapping, so page faults dominate). The peers are interleaved: each round times every function
(best of ``--calls``), and the median round is printed. Say the machine's load (printed) along
with the figures: on a shared machine they move by 10% or more from run to run.

    python benchmarks/checksum_cells.py
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import time
from functools import partial
from typing import Any

SIZES_KIB = (256, 1024, 4096)


def _best(fn: Any, x: Any, calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        t = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - t)
    return best


def _child(state: str, rounds: int, calls: int) -> None:
    import numpy as np

    import freight
    from freight.bench import alloc

    (alloc.raise_mmap_threshold if state == "warm" else alloc.pin_mmap_threshold)()
    for kib in SIZES_KIB:
        a = np.random.default_rng(0).random(kib * 1024 // 8)
        pk, ck = partial(pickle.dumps, protocol=5), partial(freight.dumps, checksum=True)
        fns = {
            "pickle dumps": (pk, a),
            "freight dumps": (freight.dumps, a),
            "ck dumps": (ck, a),
            "copy": (lambda x: bytes(x.data), a),
            "pickle loads": (pickle.loads, pk(a)),
            "freight loads": (freight.loads, freight.dumps(a)),
            "ck loads": (freight.loads, ck(a)),
        }
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(rounds):
            for name, (fn, x) in fns.items():
                times[name].append(_best(fn, x, calls))
        us = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        print(
            f"{state:<5} {kib:>5} KiB  dumps: pickle {us['pickle dumps']:7.1f} freight {us['freight dumps']:7.1f} "
            f"checksum {us['ck dumps']:7.1f} us ({us['pickle dumps'] / us['ck dumps']:.2f}x)  "
            f"copy {us['copy']:7.1f}  loads: pickle {us['pickle loads']:7.1f} freight {us['freight loads']:7.1f} "
            f"checksum {us['ck loads']:7.1f} us ({us['pickle loads'] / us['ck loads']:.2f}x)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--calls", type=int, default=10, help="calls per function per round (the best is kept)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.rounds, args.calls)
        return
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for state in ("warm", "fresh"):
        cmd = [sys.executable, __file__, "--child", state, "--rounds", str(args.rounds), "--calls", str(args.calls)]
        subprocess.run(cmd, check=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}; (Nx): pickle-5 time / freight checksum time")


if __name__ == "__main__":
    main()
