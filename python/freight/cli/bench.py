"""``freight bench``: handed to :mod:`freight.bench`, which has its own parser (its options
are many and its own); this module only finds it. The benchmark ships in the wheel
(``pip install "freight[bench]"`` adds what it plots with): it measures freight against the
peers installed where it runs, and lists the others as not measured."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any) -> None:
    """Adds bench to the ``freight`` command's subparsers (for --help: main() hands the rest of
    the command line to freight.bench)."""
    sub.add_parser(
        "bench", help="benchmark freight against its peers over sizes, with a report and plots", add_help=False
    )


def run(argv: list[str]) -> int:
    """Runs ``freight bench ARGV``; exit status 2, saying how to get it back, when this
    installation lost the benchmark package (one stripped by a repackager)."""
    try:
        from freight.bench import main as bench_main
    except ModuleNotFoundError as exc:
        if exc.name is None or not (exc.name == "freight.bench" or exc.name.startswith("freight.bench.")):
            raise
        print(
            "freight bench: the benchmark is not part of this installation of freight (freight.bench is missing, "
            'though freight\'s wheel ships it): reinstall it with `pip install --force-reinstall "freight[bench]"`; '
            "from a clone of freight's repository, `make bench` (or `make build`, then "
            ".venv/bin/python -m freight bench)",
            file=sys.stderr,
        )
        return 2
    return bench_main(argv)
