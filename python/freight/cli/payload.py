"""``freight inspect`` and ``freight verify``: what a payload holds and whether it is intact,
without decoding it. A payload is a file, or a stored value (``URL KEY``, read through
:mod:`freight.cli.store`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import freight
from freight.cli import store as store_verbs
from freight.cli.common import read_key
from freight.cli.describe import frame_table, inspect_file, not_a_payload, read_payload

__all__ = ["add_parsers"]

_WHERE = (
    "a payload file, or a store (a folder, file://PATH or s3://BUCKET/PREFIX) followed by a KEY as it "
    "was saved (a local store percent-encodes some characters of its keys in file names: "
    "_t.<locals>.s_0 is the file _t.%3Clocals%3E.s_0)"
)
_KEY_FILE = "a file holding the signing key's bytes as they are (one trailing newline is ignored)"


def _cmd_inspect(args: argparse.Namespace) -> int:
    if args.key is not None:  # URL KEY: what `cat` prints
        args.url = args.file
        return store_verbs.cmd_cat(args)
    return inspect_file(args.file, read_key(args.key_file))


def _cmd_verify(args: argparse.Namespace) -> int:
    key = read_key(args.key_file)
    if args.key is not None:  # URL KEY: a stored value
        label, data = store_verbs.read_stored(args, args.file, args.key)
    else:
        label, data = args.file, read_payload(args.file)
    reason = not_a_payload(data)
    if reason is not None:
        print(f"{label}: FAILED: {reason}", file=sys.stderr)
        return 1
    try:
        freight.verify(data, key=key)
    except freight.FreightError as exc:
        print(f"{label}: FAILED: {exc}", file=sys.stderr)
        try:
            frames = freight.inspect(data)["frames"]
        except freight.FreightError:
            frames = []  # the header itself is bad: there is no frame table to show
        if frames:
            print("\n".join(frame_table(frames)), file=sys.stderr)
        return 1
    info = freight.inspect(data)
    if args.require_signature and key is None:
        # Nothing without the key can say the signature holds: a failure, not an OK with a caveat.
        why = "it is signed, but the signature was not checked" if info["signed"] else "it is not signed"
        print(
            f"{label}: FAILED: {why}; --require-signature needs the key to check it with: --key-file PATH",
            file=sys.stderr,
        )
        return 1
    frames = info["frames"]
    unchecked = sum(f["checksum_ok"] is None for f in frames)
    checked = len(frames) - unchecked
    parts = ["header and node tree ok"]
    if not frames:
        parts.append("no frames")
    if checked:
        parts.append(f"{checked} frame checksum{'s' if checked != 1 else ''} ok")
    if unchecked:
        parts.append(f"{unchecked} frame{'s' if unchecked != 1 else ''} without a checksum (not verifiable)")
    if key is not None:
        parts.append("signature ok")
    elif info["signed"]:
        # verify() checks a signature only against a key: say so, as inspect does.
        parts.append("signed, but the signature was NOT checked: pass --key-file PATH to check it")
    detail = ", ".join(parts)
    print(f"{label}: OK ({detail})")
    return 0


def add_parsers(sub: Any) -> None:
    """Adds inspect and verify to the ``freight`` command's subparsers."""
    p = sub.add_parser(
        "inspect",
        help="describe a payload (a file, or a stored value) without decoding it",
        description="Describe a payload without decoding it: " + _WHERE + ".",
    )
    p.add_argument("file", metavar="FILE | URL")
    p.add_argument("key", metavar="KEY", nargs="?", help="with URL: the key of the stored value")
    p.add_argument("--key-file", metavar="PATH", help="also check the signature with the key in " + _KEY_FILE)
    p.set_defaults(func=_cmd_inspect, parser=p)

    p = sub.add_parser(
        "verify",
        help="check a payload's header, frame checksums and node tree without decoding it",
        description="Check a payload's header, frame checksums and node tree without decoding it: " + _WHERE + ".",
    )
    p.add_argument("file", metavar="FILE | URL")
    p.add_argument("key", metavar="KEY", nargs="?", help="with URL: the key of the stored value")
    p.add_argument("--key-file", metavar="PATH", help="also require a valid signature under the key in " + _KEY_FILE)
    p.add_argument(
        "--require-signature",
        action="store_true",
        help="fail (exit status 1) unless the payload is signed and its signature was checked with --key-file; "
        "without this flag, a signed payload verified without a key is OK, with the signature reported unchecked",
    )
    p.set_defaults(func=_cmd_verify, parser=p)
