"""Writes the golden payloads of the current format version (run once per format version:
`python tests/golden/generate.py`, or `python tests/golden/generate.py v1.1` for a minor
version, which changes the layout but not the version byte). Existing files are never overwritten: they are the record
of what earlier builds wrote."""

from __future__ import annotations

import pathlib
import sys

import freight

# Run as a script, its own folder is on sys.path (and under pytest, pyproject's pythonpath puts it there).
from cases import CASES, PointSerializer

OUT = pathlib.Path(__file__).parent / (sys.argv[1] if len(sys.argv) > 1 else f"v{freight._freight.FORMAT_VERSION}")


def main() -> None:
    OUT.mkdir(exist_ok=True)
    codec = freight.Freight()
    codec.register(PointSerializer())
    for name, make in CASES.items():
        path = OUT / f"{name}.frt"
        if path.exists():
            print(f"kept    {path}")
            continue
        # Checksummed, as payloads at rest are (and as the first files were, by the default then).
        path.write_bytes(codec.dumps(make(), checksum=True))
        print(f"wrote   {path}")


if __name__ == "__main__":
    main()
