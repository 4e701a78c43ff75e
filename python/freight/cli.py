"""The ``freight`` command line (also ``python -m freight``).

Subcommands::

    freight demo [--store DIR]   run a mixed workload through a local folder store and compare
                                 it with pickle and cloudpickle
    freight inspect FILE | URL KEY
                                 describe a payload (a file, or a stored value) without
                                 decoding it
    freight verify FILE | URL KEY
                                 check the header, every frame checksum and the node tree
                                 (and, with --key-file, the signature) without decoding
    freight bench [--quick] [--only LIST] [--out DIR] [--compare OLD NEW] ...
                                 freight against every peer over sizes: results.json,
                                 report.md and plots (see freight.bench)
    freight ls URL [PREFIX] [-l] [-a]
                                 the values of a store (a folder or s3://BUCKET/PREFIX)
    freight cat URL KEY          what `inspect` prints, for a stored value
    freight rm URL KEY... | --prefix P
                                 delete values
    freight cp SRC_URL DST_URL [KEY...] [--prefix P] [-n]
                                 copy values between stores, byte for byte

The store subcommands are in :mod:`freight.storage.cli`; S3 settings come from the AWS
environment variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...). A store's key is given as it
was saved (``inspect ./results run-3/_t.<locals>.s_0``): a local store percent-encodes some of
its characters in file names (``_t.%3Clocals%3E.s_0``). ``--key-file`` names a file that holds
the signing key's bytes as they are (one trailing newline is ignored).

Exit status: 0 on success, 1 when a file is not a valid freight payload or fails verification,
or a store operation fails (a freight.FreightError, printed on one line), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from freight.exceptions import FreightError

if TYPE_CHECKING:
    from freight._freight import FrameInfo, PayloadInfo, TreeInfo

__all__ = ["main"]


# --------------------------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------------------------


class _CliError(Exception):
    """A failure to report on stderr with exit status 1."""


def _read_key(path: str | None) -> bytes | None:
    """The key in a key file (its bytes, as written; a trailing newline is kept out)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            key = fh.read().rstrip(b"\r\n")
    except OSError as exc:
        raise _CliError(f"{path}: {exc.strerror or exc}") from exc
    if not key:
        raise _CliError(f"{path}: the key file is empty; write the signing key into it")
    return key


_MAGIC = b"\x89FRT"


def _read_payload(path: str) -> Any:
    """The file's bytes (memory-mapped when large, as freight.load does)."""
    from freight import _files as files

    try:
        data = files.read_payload(path)
    except OSError as exc:  # freight.PathError: its text says what to check
        raise _CliError(f"{path}: {exc.strerror or exc}") from exc
    if len(data) == 0:
        raise _CliError(f"{path}: empty file, not a freight payload")
    return data


def not_a_payload(data: Any) -> str | None:
    """Why ``data`` is not a freight payload at all, in one sentence (its first bytes, as bytes
    and hex), or None when it starts as one."""
    head = bytes(memoryview(data).cast("B")[:4])
    if head == _MAGIC:
        return None
    if _MAGIC.startswith(head):
        return f"not a freight payload: it is only {len(head)} byte{'s' if len(head) != 1 else ''} long"
    return (
        f"not a freight payload: it starts with {head!r} (hex {head.hex(' ')}), where every freight "
        f"payload starts with the magic bytes {_MAGIC!r} (hex {_MAGIC.hex(' ')})"
    )


def _inspect(path: str, data: Any, key: bytes | None = None) -> PayloadInfo:
    import freight

    reason = not_a_payload(data)
    if reason is not None:
        raise _CliError(f"{path}: {reason}")
    try:
        return freight.inspect(data, key=key)
    except freight.FreightError as exc:
        raise _CliError(f"{path}: not a valid freight payload: {exc}") from exc


# --------------------------------------------------------------------------------------------
# Formatting freight.inspect's result (freight._freight.PayloadInfo)
# --------------------------------------------------------------------------------------------


def _fmt_bytes(n: int, exact: bool = True) -> str:
    """``1.5 MiB (1,572,864 bytes)``, or just ``1.5 MiB`` with ``exact=False``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}" + (f" ({n:,} bytes)" if exact else "")
    return f"{n} B"


def _counts(counts: Mapping[str, object]) -> str:
    """``a 1, b 2`` (or ``(none)``)."""
    return ", ".join(f"{name} {value}" for name, value in counts.items()) or "(none)"


def _fmt_ratio(ratio: float) -> str:
    """Stored size as a share of the raw size: ``39%``, ``<1%``."""
    return "<1%" if 0 < ratio < 0.005 else f"{ratio:.0%}"


def _checksum_status(frame: FrameInfo) -> str:
    ok = frame["checksum_ok"]
    if ok is None:
        return "no checksum"
    return "ok" if ok else "MISMATCH"


def _table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines.append(indent + "  ".join("-" * w for w in widths))
    lines.extend(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
    return lines


def frame_table(frames: list[FrameInfo]) -> list[str]:
    """One row per frame: position, sizes, compression, checksum and whether it matches. The
    offset column is left out for a dumps_frames list, and the compression columns when no
    frame is compressed."""
    with_offsets = any(f["offset"] is not None for f in frames)
    compressed = any(f["codec"] != "none" for f in frames)
    headers = ["#"] + (["offset"] if with_offsets else []) + ["size"]
    if compressed:
        headers += ["stored", "ratio", "codec", "shuffle"]
    headers += ["checksum", "status"]
    rows = []
    for f in frames:
        row = [str(f["index"])]
        if with_offsets:
            row.append("-" if f["offset"] is None else str(f["offset"]))
        row.append(_fmt_bytes(f["length"], exact=False))
        if compressed:
            row += [
                _fmt_bytes(f["stored_length"], exact=False),
                _fmt_ratio(f["ratio"]),
                f["codec"],
                "-" if f["shuffle"] is None else f"{f['shuffle']}-byte",
            ]
        checksum = f["checksum"] or "-"
        if f["block_checksum"]:
            checksum += " (per block)"
        row += [checksum, _checksum_status(f)]
        rows.append(row)
    return _table(headers, rows)


def _signature_text(info: PayloadInfo) -> str:
    if not info["signed"]:
        return "no"
    ok = info["signature_ok"]
    if ok is None:
        return "yes (not checked: pass --key-file)"
    return "yes, signature ok" if ok else "yes, signature DOES NOT MATCH the key"


def _tree_lines(tree: TreeInfo) -> list[str]:
    if not tree["ok"]:
        return [f"node tree:       MALFORMED ({_fmt_bytes(tree['length'])}): {tree['error']}"]
    pickle_nodes = tree["pickle_nodes"]
    return [
        f"node tree:       {tree['nodes']:,} nodes, depth {tree['max_depth']:,}, "
        f"{pickle_nodes:,} pickle node{'s' if pickle_nodes != 1 else ''}, {_fmt_bytes(tree['length'])}",
        f"  node kinds:    {_counts(tree['node_tags'])}",
    ]


def format_inspect(info: PayloadInfo, path: str | None = None) -> str:
    """Renders ``freight.inspect``'s result as readable text."""
    lines = [] if path is None else [f"file:            {path}"]
    needs_pickle = info["needs_pickle"]
    lines += [
        f"format version:  {info['format_version']}",
        f"payload size:    {_fmt_bytes(info['total_length'])}",
        f"header size:     {_fmt_bytes(info['header_length'])}",
        f"flags:           {', '.join(info['flags']) or '(none)'}",
        "needs pickle:    " + ("yes (loading runs pickle: refused under allow_pickle=False)" if needs_pickle else "no"),
        f"signed:          {_signature_text(info)}",
        f"serializer tags: {', '.join(info['tags']) or '(none)'}",
        f"producer:        {_counts(info['producer'])}",
    ]
    frames = info["frames"]
    if frames:
        raw = sum(f["length"] for f in frames)
        stored = sum(f["stored_length"] for f in frames)
        size = _fmt_bytes(raw) + ("" if stored == raw else f", {_fmt_bytes(stored)} stored")
        lines.append(f"frames:          {len(frames)}, {size}")
        lines += frame_table(frames)
    else:
        lines.append("frames:          0")
    lines += _tree_lines(info["tree"])
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Subcommands
# --------------------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    from freight import demo

    rc = demo.main(args.store)
    return int(rc or 0)


def _cmd_inspect(args: argparse.Namespace) -> int:
    if args.key is not None:  # URL KEY: what `cat` prints
        from freight.storage.cli import _cmd_cat

        args.url = args.file
        return _cmd_cat(args)
    key = _read_key(args.key_file)
    info = _inspect(args.file, _read_payload(args.file), key)
    print(format_inspect(info, args.file))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    import freight

    key = _read_key(args.key_file)
    if args.key is not None:  # URL KEY: a stored value
        from freight.storage.cli import read_stored

        label, data = read_stored(args, args.file, args.key)
    else:
        label, data = args.file, _read_payload(args.file)
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
    frames = freight.inspect(data)["frames"]
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
    detail = ", ".join(parts)
    print(f"{label}: OK ({detail})")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="freight",
        description="freight: type-aware serialization with a Rust core.",
    )
    try:
        from freight import __version__

        parser.add_argument("--version", action="version", version=f"freight {__version__}")
    except Exception:  # noqa: BLE001 - the version is a nicety; the extension may be missing
        pass
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("demo", help="run a mixed workload through a local folder store and compare with pickle")
    p.add_argument(
        "--store", metavar="DIR", default=None, help="folder to write the objects to (default: ./freight-demo-store)"
    )
    p.set_defaults(func=_cmd_demo)

    where = (
        "a payload file, or a store (a folder, file://PATH or s3://BUCKET/PREFIX) followed by a KEY as it "
        "was saved (a local store percent-encodes some characters of its keys in file names: "
        "_t.<locals>.s_0 is the file _t.%3Clocals%3E.s_0)"
    )
    key_file = "a file holding the signing key's bytes as they are (one trailing newline is ignored)"
    p = sub.add_parser(
        "inspect",
        help="describe a payload (a file, or a stored value) without decoding it",
        description="Describe a payload without decoding it: " + where + ".",
    )
    p.add_argument("file", metavar="FILE | URL")
    p.add_argument("key", metavar="KEY", nargs="?", help="with URL: the key of the stored value")
    p.add_argument("--key-file", metavar="PATH", help="also check the signature with the key in " + key_file)
    p.set_defaults(func=_cmd_inspect, parser=p)

    p = sub.add_parser(
        "verify",
        help="check a payload's header, frame checksums and node tree without decoding it",
        description="Check a payload's header, frame checksums and node tree without decoding it: " + where + ".",
    )
    p.add_argument("file", metavar="FILE | URL")
    p.add_argument("key", metavar="KEY", nargs="?", help="with URL: the key of the stored value")
    p.add_argument("--key-file", metavar="PATH", help="also require a valid signature under the key in " + key_file)
    p.set_defaults(func=_cmd_verify, parser=p)

    # `bench` has its own parser (freight.bench); main() hands it the rest of the command line.
    sub.add_parser(
        "bench", help="benchmark freight against its peers over sizes, with a report and plots", add_help=False
    )

    from freight.storage.cli import add_parsers

    add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        from freight.bench import main as bench_main

        return bench_main(argv[1:])
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
    except _CliError as exc:
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


if __name__ == "__main__":
    sys.exit(main())
