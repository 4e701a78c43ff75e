"""``freight demo``: a mixed workload through a local folder store, compared with pickle and
cloudpickle (the workload itself is :mod:`freight.demo`)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parsers"]


def _cmd_demo(args: argparse.Namespace) -> int:
    from freight import demo

    return int(demo.main(args.store) or 0)


def add_parsers(sub: Any) -> None:
    """Adds demo to the ``freight`` command's subparsers."""
    p = sub.add_parser("demo", help="run a mixed workload through a local folder store and compare with pickle")
    p.add_argument(
        "--store", metavar="DIR", default=None, help="folder to write the objects to (default: ./freight-demo-store)"
    )
    p.set_defaults(func=_cmd_demo)
