"""Instructions per call of freight and cloudpickle on functions and closures (issue 34).

Run: ``.venv/bin/python benchmarks/callgrind_closures.py [--calls N] [--only CASE ...]``

It re-runs itself under ``valgrind --tool=callgrind`` with collection off, and turns collection on
around each measured loop only (a tiny C helper built here with valgrind's ``callgrind.h``, called
through ctypes), so interpreter start-up, imports and warm-up calls are not counted. Each loop's
instructions, less those of an empty loop, divided by its calls, is one figure. Instruction counts
do not depend on the machine's load, which wall-clock ratios on a shared machine do; the ratio
printed is cloudpickle ÷ freight (above 1: freight runs fewer instructions). PYTHONHASHSEED is
fixed so that dict and set layouts repeat between runs.

Needs valgrind and a C compiler (cc). Cases: the closure workload of ``freight bench`` (a lambda,
a closure over 100 ints, a closure carrying a 1 MiB float64 array), a function inside a dict of 8
arrays, and the demo's ``scorer`` closure (python/freight/demo.py).
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import pickle
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

_HELPER_C = r"""
#include <valgrind/callgrind.h>
void fc_on(void) { CALLGRIND_TOGGLE_COLLECT; }
void fc_off(const char *label) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS_AT(label); }
"""

CASES = ("lambda", "closure, 100 ints", "closure, 1 MiB array", "function in a dict of 8 arrays", "demo scorer")


def _function_in_dict() -> dict[str, Any]:
    """What a task queue sends: a function (a closure, so by value) next to its array arguments."""
    import numpy as np

    scale = 3.0

    def apply(a: Any) -> Any:
        return a * scale

    value: dict[str, Any] = {f"x{i}": np.arange(1000, dtype="float64") + i for i in range(8)}
    value["fn"] = apply
    return value


def _value(case: str) -> Any:
    if case == "function in a dict of 8 arrays":
        return _function_in_dict()
    if case == "demo scorer":
        from freight.demo import _make_scorer

        return _make_scorer([0.5, -1.25, 2.0, 0.75], bias=0.1)
    from freight.bench.workloads import _closure

    return _closure(case)


def _engines() -> dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]]:
    import cloudpickle

    import freight

    return {
        "freight": (freight.dumps, freight.loads),
        "cloudpickle": (lambda v: cloudpickle.dumps(v, protocol=5), pickle.loads),
    }


def _child(cases: list[str], calls: int, helper: str) -> None:
    lib = ctypes.CDLL(helper)
    on, off = lib.fc_on, lib.fc_off
    off.argtypes = [ctypes.c_char_p]

    def measure(label: str, fn: Callable[[Any], Any], arg: Any, n: int) -> None:
        for _ in range(5):  # warm: caches, interned names, the first pickler of a class
            fn(arg)
        on()
        for _ in range(n):
            fn(arg)
        off(f"{label}|{n}".encode())

    on()
    for _ in range(calls):
        pass
    off(f"empty|{calls}".encode())
    for case in cases:
        value = _value(case)
        for name, (dumps, loads) in _engines().items():
            measure(f"{case}|{name}|dumps", dumps, value, calls)
            measure(f"{case}|{name}|loads", loads, dumps(value), calls)


def _build_helper(directory: str) -> str:
    source = os.path.join(directory, "fc.c")
    with open(source, "w") as f:
        f.write(_HELPER_C)
    lib = os.path.join(directory, "libfc.so")
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", lib, source], check=True)
    return lib


def _read_dumps(directory: str) -> dict[str, tuple[int, int]]:
    """label -> (instructions, calls), from callgrind's dump files."""
    out: dict[str, tuple[int, int]] = {}
    for path in glob.glob(os.path.join(directory, "cg.out*")):
        with open(path) as f:
            text = f.read()
        desc = re.search(r"^desc: Trigger: Client Request: (.*)$", text, re.M)
        total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if desc and total:
            *label, n = desc.group(1).split("|")
            out["|".join(label)] = (int(total.group(1)), int(n))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="calls per measured loop")
    parser.add_argument("--only", nargs="*", choices=CASES, help="these cases only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cases = list(args.only or CASES)
    if args.child:
        _child(cases, args.calls, args.child)
        return
    with tempfile.TemporaryDirectory(prefix="callgrind-closures-") as tmp:
        helper = _build_helper(tmp)
        command = [
            "valgrind", "--tool=callgrind", "--collect-atstart=no", f"--callgrind-out-file={tmp}/cg.out",
            sys.executable, os.path.abspath(__file__), "--calls", str(args.calls), "--child", helper,
        ]  # fmt: skip
        command += ["--only", *cases]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        results = _read_dumps(tmp)
    empty, empty_n = results.pop("empty")
    per_iteration = empty / empty_n  # the loop and the toggles themselves

    def per_call(key: str) -> float:
        total, n = results[key]
        return total / n - per_iteration

    print(f"{'case':32} {'op':6} {'freight':>10} {'cloudpickle':>12} {'cp/freight':>10}")
    for case in cases:
        for op in ("dumps", "loads"):
            ours, theirs = per_call(f"{case}|freight|{op}"), per_call(f"{case}|cloudpickle|{op}")
            print(f"{case:32} {op:6} {ours:10,.0f} {theirs:12,.0f} {theirs / ours:10.2f}")


if __name__ == "__main__":
    main()
