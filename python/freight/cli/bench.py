"""``freight bench``: handed to :mod:`freight.bench`, which has its own parser (its options
are many and its own); this module only finds it."""

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
    """Runs ``freight bench ARGV``; exit status 2, saying how to get it, when this installation
    has no benchmark package."""
    try:
        from freight.bench import main as bench_main
    except ModuleNotFoundError as exc:
        if exc.name is None or not (exc.name == "freight.bench" or exc.name.startswith("freight.bench.")):
            raise
        print(
            "freight bench: the benchmark is not part of this installation of freight (the wheel leaves it out: "
            "it compares freight with a dozen libraries freight does not depend on); it runs from a clone of "
            "freight's repository, where `make bench` installs what it compares and runs it (or `make build`, "
            "then .venv/bin/python -m freight bench)",
            file=sys.stderr,
        )
        return 2
    return bench_main(argv)
