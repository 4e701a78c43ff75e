"""Child process of ``freight bench --engines``: ``python -m freight.bench.engines ENGINE
SERIALIZER [--quick]`` prints the rows of one engine as JSON on its last line of output."""

from __future__ import annotations

import importlib
import json
import sys


def _main(argv: list[str]) -> int:
    quick = "--quick" in argv
    engine, serializer = [a for a in argv if not a.startswith("--")][:2]
    module = importlib.import_module(f"freight.bench.engines.{engine}")
    rows = module.run(quick) if serializer == "all" else module.measure(serializer, quick)
    sys.stdout.flush()
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
