"""bench_core.py's case (a) peak memory: the resident set growth of ``dumps`` of a large array
(freight, pickle-5, ``np.save``), each in a fresh process started from a small launcher."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

from core_report import Report, Row, check
from freight.bench.harness import MiB, fmt_bytes, print_table

_PEAK_SCRIPT = textwrap.dedent(
    """
    import io, json, pickle, resource, sys
    import numpy as np
    which, nbytes = sys.argv[1], int(sys.argv[2])
    if which == "freight":
        import freight
        fn = freight.dumps
        fn(np.zeros(1024))  # warm up lazily initialised state
    elif which == "pickle-5":
        fn = lambda a: pickle.dumps(a, protocol=5)
    else:
        def fn(a):
            bio = io.BytesIO()
            np.save(bio, a, allow_pickle=False)
            return bio.getvalue()
    fn(np.zeros(1024))

    def hwm_kib():  # the peak RSS of this process's own address space (Linux), for cross-checking
        try:
            with open("/proc/self/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            return None

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hwm_before = hwm_kib()
    arr = np.full(nbytes // 8, 1.5)   # touches every page
    out = fn(arr)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hwm_after = hwm_kib()
    print(json.dumps({"before_kib": before, "after_kib": after, "hwm_before_kib": hwm_before,
                      "hwm_after_kib": hwm_after, "input": arr.nbytes, "output": len(out)}))
    """
)

# On Linux a process's ru_maxrss starts at the RSS of the process it was forked from (the kernel
# carries the old address space's high-water mark across exec), so a child forked from this
# benchmark, which holds hundreds of MiB, would report a useless baseline. The child is therefore
# started from a small launcher process whose own RSS is far below the child's baseline.
_LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c'] + sys.argv[1:]).returncode)"


def peak_memory(report: Report, cfg: Any) -> None:
    nbytes = cfg.array_mib * MiB
    results: dict[str, dict] = {}
    for which in ("freight", "pickle-5", "np.save"):
        proc = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, _PEAK_SCRIPT, which, str(nbytes)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            check(report, False, f"peak-memory subprocess for {which} failed: {proc.stderr.strip()[-500:]}")
            continue
        d = json.loads(proc.stdout.strip().splitlines()[-1])
        d["delta"] = (d["after_kib"] - d["before_kib"]) * 1024  # ru_maxrss is in KiB on Linux
        d["ratio"] = d["delta"] / (d["input"] + d["output"])
        results[which] = d
    report.extra["peak_memory"] = results
    print()
    print(f"== (a) peak memory of dumps({cfg.array_mib} MiB float64), fresh subprocess, ru_maxrss delta ==")
    headers = ["serializer", "input", "output", "peak delta", "delta/(in+out)", "target", "result"]
    table = []
    for which, d in results.items():
        target = "<= 1.05" if which == "freight" else ""
        passed = d["ratio"] <= 1.05 if which == "freight" else None
        table.append(
            [
                which,
                fmt_bytes(d["input"]),
                fmt_bytes(d["output"]),
                fmt_bytes(d["delta"]),
                f"{d['ratio']:.3f}",
                target,
                "" if passed is None else ("PASS" if passed else "MISS"),
            ]
        )
        if which == "freight":
            report.add(
                Row(
                    "a-mem",
                    f"peak memory dumps {cfg.array_mib} MiB (delta/(in+out))",
                    None,
                    target="<= input+output+5%",
                    passed=passed,
                    note=f"delta={d['delta']} in={d['input']} out={d['output']} ratio={d['ratio']:.4f}",
                )
            )
    print_table(headers, table)
    sys.stdout.flush()
