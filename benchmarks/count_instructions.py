"""Instructions per call of freight and pickle-5 on the small cells of ``freight bench`` (issue 34):
small values, 10k records and small polars frames, counted by callgrind rather than timed, since
these calls take microseconds and the machines they run on are shared.

Run it from the repository root, with valgrind installed::

    python benchmarks/count_instructions.py                 # every case
    python benchmarks/count_instructions.py --only polars   # cases whose name contains "polars"

Each peer runs in one process under ``valgrind --tool=callgrind --dump-before=getppid``: the
script calls ``os.getppid()`` between phases, so callgrind writes one count per phase (a warm-up
phase, then ``--calls`` calls of the operation). Instructions per call are the phase's count
divided by the calls, minus an empty loop's count per call (the loop and the call itself).
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any


def _cases() -> dict[str, Any]:
    from freight.bench.workloads import SMALL_CASES, _polars_frame, _small_value, records

    out: dict[str, Any] = {f"small {c}": _small_value(c) for c in SMALL_CASES}
    out["records 10k"] = records(10_000)
    for rows in (10, 100, 300):
        out[f"polars {rows} rows"] = _polars_frame(rows)
    return out


def _peer_cases(peer: str, only: str) -> dict[str, Any]:
    """The cases `peer` runs: msgspec has no polars support, so it skips the frames."""
    return {k: v for k, v in _cases().items() if only in k and not (peer == "msgspec" and "polars" in k)}


def _codecs(peer: str) -> tuple[Any, Any]:
    if peer == "freight":
        import freight

        return freight.dumps, freight.loads
    if peer == "msgspec":  # not a target; its cells show what a schema-less binary codec costs
        import msgspec

        enc, dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder()
        return enc.encode, dec.decode
    return partial(pickle.dumps, protocol=5), pickle.loads  # as freight bench calls it


def _calls(name: str, base: int) -> int:
    return max(1, base // 100) if name.startswith("records") else base


def _child(peer: str, only: str, calls: int) -> None:
    """Runs under callgrind: one dump per phase (os.getppid is the marker)."""
    dumps, loads = _codecs(peer)
    cases = _peer_cases(peer, only)
    mark = os.getppid

    def nothing(x: Any) -> Any:
        return x

    mark()  # end of start-up
    for _ in range(calls):
        nothing(None)
    mark()  # the empty loop
    for name, value in cases.items():
        n = _calls(name, calls)
        payload = dumps(value)
        for _ in range(3):  # warm-up: caches, lazy imports
            loads(dumps(value))
        mark()
        for _ in range(n):
            dumps(value)
        mark()  # dumps
        for _ in range(n):
            loads(payload)
        mark()  # loads


def _totals(out: Path) -> list[int]:
    counts = []
    for part in sorted(out.parent.glob(out.name + ".*"), key=lambda p: int(p.suffix[1:])):
        m = re.search(r"^totals:\s+(\d+)", part.read_text(), re.M)
        counts.append(int(m.group(1)) if m else 0)
    return counts


def _measure(peer: str, only: str, calls: int) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        cmd = [
            "valgrind", "--tool=callgrind", "--dump-before=getppid", f"--callgrind-out-file={out}",
            sys.executable, __file__, "--child", peer, "--only", only, "--calls", str(calls),
        ]  # fmt: skip
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        totals = _totals(out)
    # parts: start-up, empty loop, then (warm-up, dumps, loads) per case, then the exit.
    loop = totals[1] / calls
    names = list(_peer_cases(peer, only))
    result = {}
    for i, name in enumerate(names):
        n = _calls(name, calls)
        d, lo = totals[3 + 3 * i], totals[4 + 3 * i]
        result[name] = (d / n - loop, lo / n - loop)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="cases whose name contains this")
    ap.add_argument("--calls", type=int, default=200, help="calls per case (records: 1/100 of it)")
    ap.add_argument("--msgspec", action="store_true", help="also count msgspec.msgpack (not a target)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.only, args.calls)
        return
    ours = _measure("freight", args.only, args.calls)
    theirs = _measure("pickle-5", args.only, args.calls)
    msgspec = _measure("msgspec", args.only, args.calls) if args.msgspec else {}
    print(f"{'case':<20} {'freight dumps':>14} {'pickle dumps':>13} {'ratio':>6}   "
          f"{'freight loads':>14} {'pickle loads':>13} {'ratio':>6}")  # fmt: skip
    for name, (fd, fl) in ours.items():
        pd, pl = theirs[name]
        print(f"{name:<20} {fd:>14,.0f} {pd:>13,.0f} {pd / fd:>6.2f}   {fl:>14,.0f} {pl:>13,.0f} {pl / fl:>6.2f}")
    for name, (md, ml) in msgspec.items():
        fd, fl = ours[name]
        row = f"{md:>14,.0f} {'':>13} {md / fd:>6.2f}   {ml:>14,.0f} {'':>13} {ml / fl:>6.2f}"
        print(f"{'msgspec ' + name:<20} {row}")
    if msgspec:  # its C call costs less than the empty loop's Python call: figures near 0 or below
        print("msgspec rows: msgspec's own instructions in the freight columns, ratio msgspec / freight")
    print("ratio: pickle-5 instructions / freight instructions (above 1: freight runs fewer)")


if __name__ == "__main__":
    main()
