"""Instructions per tiny codec call, counted by callgrind (issue 32: what parsing a call's options
costs on the fast path). Counts, not times: they do not depend on the machine's load, so a change
of a few dozen instructions per call shows.

Each case runs 20,000 calls of one tiny call (``freight.loads`` of a small payload, ``freight.dumps(1)``,
``loads`` with a keyword option, ``loads_frames``, ...) in a process of its own under
``valgrind --tool=callgrind``; a baseline process does everything but those calls (the import, the
payloads, a warm-up of every case). Instructions per call = (case total - baseline total) / calls:
the call, its arguments and the ``for`` loop around it (the same for every build, so the
difference between two builds is the call's own). Python's string hashing is seeded
(PYTHONHASHSEED), which moves dict and set probes: each figure is measured under several seeds and
reported as its range.

    python benchmarks/callgrind_calls.py                 # all cases, seeds 0 1 2
    python benchmarks/callgrind_calls.py --seeds 0 --cases loads dumps --calls 5000

Needs valgrind on PATH. Runs the freight the interpreter imports (``make build`` first).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# Each case: the statement called in the loop, over the names _setup() defines.
CASES = {
    "loads": "loads(small)",
    "dumps": "dumps(1)",
    "loads_kw": "loads(small, zero_copy=False)",
    "dumps_kw": "dumps(1, checksum=False)",
    "loads_frames": "loads_frames(frames)",
}
BASELINE = "baseline"


def _setup() -> dict[str, object]:
    import freight

    return {
        "loads": freight.loads,
        "dumps": freight.dumps,
        "loads_frames": freight.loads_frames,
        "small": freight.dumps(1),
        "frames": freight.dumps_frames(1),
    }


def _child(case: str, calls: int) -> None:
    """The measured process: the same setup and warm-up for every case, then `calls` calls."""
    names = _setup()
    for statement in CASES.values():  # warm every path (caches, interned names) the same way
        for _ in range(10):
            eval(statement, names)
    if case == BASELINE:
        calls = 0
    loop = compile(f"for _ in range({calls}):\n    {CASES.get(case, 'pass')}\n", "<loop>", "exec")
    exec(loop, names)


def _instructions(out_file: Path) -> int:
    for line in out_file.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise SystemExit(f"no instruction total in {out_file}")


def _measure(case: str, calls: int, seed: int, folder: Path) -> int:
    out_file = folder / f"callgrind.{case}.{seed}"
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out_file}",
        sys.executable,
        __file__,
        "--child",
        case,
        "--calls",
        str(calls),
    ]
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return _instructions(out_file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.calls)
        return 0
    per_call: dict[str, list[float]] = {case: [] for case in args.cases}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            base = _measure(BASELINE, args.calls, seed, Path(tmp))
            for case in args.cases:
                per_call[case].append((_measure(case, args.calls, seed, Path(tmp)) - base) / args.calls)
    print(f"instructions per call (callgrind, {args.calls:,} calls, PYTHONHASHSEED {args.seeds})")
    for case, values in per_call.items():
        spread = ", ".join(f"{v:,.0f}" for v in values)
        print(f"  {CASES[case]:<34} {min(values):>7,.0f} - {max(values):>7,.0f}   ({spread})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
