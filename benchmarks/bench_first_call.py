"""What a fresh process pays for freight before its first value is out (issue 32, item 5): the
cumulative import time of freight that ``python -X importtime`` reports, the time of the first
nested ``dumps`` + ``loads``, and of the first numpy array when numpy was imported before freight.

Each figure is the best of N fresh interpreters (a fresh process is the only way to see a first
call twice), so a busy machine inflates the others, not the best::

    python benchmarks/bench_first_call.py [N]
"""

from __future__ import annotations

import re
import subprocess
import sys

# A fresh process times its first round trip of a value, then its second; {setup} makes the value.
_ROUND_TRIPS = """
import time
{setup}
import freight
start = time.perf_counter()
freight.loads(freight.dumps(value))
first = time.perf_counter() - start
start = time.perf_counter()
freight.loads(freight.dumps(value))
print(first, time.perf_counter() - start)
"""
_FIRST_CALL = _ROUND_TRIPS.format(setup="import datetime\nvalue = [[datetime.date(2000, 1, 1)]]")
_FIRST_ARRAY = _ROUND_TRIPS.format(setup="import numpy as np\nvalue = np.arange(128.0)")


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True)


def import_us() -> int:
    """freight's cumulative import time in µs, as ``-X importtime`` reports it."""
    err = _run(["-X", "importtime", "-c", "import freight"]).stderr
    match = re.search(r"^import time:\s+\d+ \|\s+(\d+) \| freight$", err, re.MULTILINE)
    assert match, err
    return int(match.group(1))


def first_and_second_ms(script: str) -> tuple[float, float]:
    first, second = _run(["-c", script]).stdout.split()
    return float(first) * 1e3, float(second) * 1e3


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    print(f"import freight (cumulative, -X importtime): best {min(import_us() for _ in range(runs))} µs")
    for label, script in (("[[date]]", _FIRST_CALL), ("np.arange(128.0)", _FIRST_ARRAY)):
        pairs = [first_and_second_ms(script) for _ in range(runs)]
        first = min(p[0] for p in pairs)
        second = min(p[1] for p in pairs)
        print(f"first dumps+loads of {label}: best {first:.3f} ms (a second call: {second:.3f} ms)")


if __name__ == "__main__":
    main()
