"""The ``freight`` command line: one entry point, :func:`main` (the ``freight`` script and
``python -m freight`` both call it).

Subcommands, one module each group::

    freight inspect FILE | URL KEY   describe a payload (a file, or a stored value) without
                                     decoding it                                 (cli.payload)
    freight verify FILE | URL KEY    check the header, every frame checksum and the node tree
                                     (and, with --key-file, the signature) without decoding;
                                     a signature left unchecked is said so (--require-signature
                                     makes it a failure)
    freight ls URL [PREFIX] [-l] [-a]
                                     the values of a store (a folder or s3://BUCKET/PREFIX)
                                                                                 (cli.store)
    freight ls URL KEY [ENTRY...] | FILE [ENTRY...]
                                     a stored dict's, list's or tuple's entries, from its
                                     header alone (when KEY is a value's exact key)
                                                                               (cli.entries)
    freight cat URL KEY              what `inspect` prints, for a stored value
    freight cat URL KEY ENTRY... | FILE ENTRY... [--rows A:B] [--columns C,...]
                                     one entry printed, reading only its frames
    freight rm URL KEY... | --prefix P
                                     delete values
    freight cp SRC_URL DST_URL [KEY...] [--prefix P] [-n]
                                     copy values between stores, byte for byte
    freight demo [--store DIR]       run a mixed workload through a local folder store and
                                     compare it with pickle and cloudpickle      (cli.demo)
    freight bench [--quick] [--only LIST] [--out DIR] [--compare OLD NEW] ...
                                     freight against every peer over sizes (freight.bench)
                                                                                 (cli.bench)

S3 settings come from the AWS environment variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).
A store's key is given as it was saved (``inspect ./results run-3/_t.<locals>.s_0``): a local
store percent-encodes some of its characters in file names (``_t.%3Clocals%3E.s_0``).
``--key-file`` names a file that holds the signing key's bytes as they are (one trailing newline
is ignored).

Exit status: 0 on success, 1 when a file is not a valid freight payload or fails verification,
or a store operation fails (a freight.FreightError, printed on one line), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys

import freight
from freight.cli import bench, demo, payload, store
from freight.cli.common import CliError
from freight.cli.describe import format_inspect, frame_table, not_a_payload
from freight.exceptions import FreightError

__all__ = ["main", "format_inspect", "frame_table", "not_a_payload"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="freight",
        description="freight: type-aware serialization with a Rust core.",
    )
    parser.add_argument("--version", action="version", version=f"freight {freight.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo.add_parsers(sub)
    payload.add_parsers(sub)
    bench.add_parsers(sub)
    store.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        return bench.run(argv[1:])
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "intermixed", False):
        # `cp SRC DST -n KEY...`: KEYs after an option; argparse needs intermixed parsing for that
        rest = argv[argv.index(args.command) + 1 :]
        vars(args).update(vars(args.parser.parse_intermixed_args(rest)))
        extra = []
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except CliError as exc:
        print(f"freight {args.command}: {exc}", file=sys.stderr)
        return 1
    except FreightError as exc:  # e.g. a storage error: it names the store, the key and what to check
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"freight {args.command}: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # e.g. `freight inspect big.frt | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            pass
        return 0
