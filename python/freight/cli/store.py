"""The store verbs of the ``freight`` command line::

    freight ls URL [PREFIX] [-l] [-a]       values with size and modification time, and a total;
                                            -l adds what each header says (pickle, signed, tags),
                                            -a lists the side objects too
    freight ls URL KEY [ENTRY...]           the entries of the value under KEY (a dict, list or
                                            tuple), read from its header (cli.entries)
    freight cat URL KEY [--key-file PATH]   what `freight inspect` prints, for a stored value
    freight cat URL KEY ENTRY...            one entry's value, reading only its frames
    freight rm URL [KEY...] [--prefix P]    delete values (with their side objects)
    freight cp SRC DST [KEY...] [--prefix P] [-n]
                                            copy values between stores, byte for byte

URLs are those of :func:`freight.storage.open`: a folder (``file://PATH`` or a plain path) or
``s3://BUCKET/PREFIX``, with the S3 settings from the standard AWS environment variables
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``,
``AWS_ALLOW_HTTP=true``). ``memory://`` is refused: each process would see a new, empty store
(from Python, :func:`freight.storage.copy_values` copies from or into one). A folder that does
not exist is an error for every command but ``cp``'s destination (which its first copy creates):
the path is likely a typo, and reading never creates anything.

Side objects (:mod:`freight.storage.side_objects`: the zarr chunks or parquet file of a value kept in its
own format, under ``KEY.freight-side/``) belong to their value: ``ls`` counts them in its total
(``-a`` lists them), ``rm`` removes them with the value, ``cp`` copies them before the value's
envelope and removes the destination's older ones after it.

Everything here goes through the public :class:`freight.storage.Store` API (``head``,
``get_bytes``, ``list_objects``, ``info``, ``delete``, :func:`freight.storage.copy_values`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import freight
import freight.storage
from freight.cli import entries
from freight.cli.common import CliError, fmt_bytes, quote, read_key
from freight.cli.describe import format_inspect, inspect_file, not_a_payload
from freight.exceptions import DeserializationError, FreightError, KeyNotFoundError, StorageError
from freight.storage import Store
from freight.storage.copy import copy_items, plan_copy
from freight.storage.side_objects import SIDE, is_side_key, side_owner

__all__ = ["add_parsers", "cmd_cat", "read_stored"]

_ENV_HELP = (
    "S3 settings come from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION "
    "and AWS_ALLOW_HTTP=true (for an http:// endpoint)."
)


def _size(n: int) -> str:
    return fmt_bytes(n, exact=False)


def _total(n: int) -> str:
    return fmt_bytes(n) if n >= 1024 else f"{n:,} bytes"


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def _sides(n: int, nbytes: int | None = None) -> str:
    text = _count(n, "side object")
    return text if nbytes is None else f"{text}, {_size(nbytes)}"


def _when(modified: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(modified))


def _open(args: argparse.Namespace, url: str, *, create: bool = False) -> Store:
    """The store at ``url``; unless ``create`` (cp's destination), a local folder that does not
    exist is an error rather than an empty store (and is not created)."""
    if url.startswith("memory://"):
        args.parser.error(
            f"{url}: a memory:// store lives inside one Python process, so the command line "
            "would see a new, empty one; use a folder or s3:// (or freight.storage.copy_values "
            "from Python)"
        )
    store = freight.storage.open(url)
    folder = None if create else freight.storage.missing_folder(store)
    if folder is not None:
        raise CliError(
            f"{url}: there is no folder {os.path.abspath(folder)}: nothing was ever saved there (a store's "
            "folder is created by its first save); check the path"
        )
    return store


def read_stored(args: argparse.Namespace, url: str, key: str) -> tuple[str, Any]:
    """(a label for messages, the stored bytes) of the value under ``key``."""
    store = _open(args, url)
    return f"{store.url}: {quote(key)}", store.get_bytes(key)


# --------------------------------------------------------------------------------------------
# ls
# --------------------------------------------------------------------------------------------


def _header_columns(store: Store, key: str) -> list[str]:
    """pickle, signed and tags of one value (``-l``), from its header."""
    try:
        info = store.info(key)
    except KeyNotFoundError:
        return ["?", "?", "(removed since listed)"]
    except DeserializationError:
        return ["?", "?", "(not a freight payload)"]
    return [
        "yes" if info["needs_pickle"] else "no",
        "yes" if info["signed"] else "no",
        ", ".join(info["tags"]) or "-",
    ]


def _exists(store: Store, key: str) -> bool:
    """Whether a value is stored under ``key``; a prefix that is no key (``run-3/``) is not."""
    try:
        return store.exists(key)
    except StorageError:
        return False


def _ls_entries(args: argparse.Namespace, store: Store) -> bool:
    """Whether ``ls URL WORD`` lists the entries of the value under WORD rather than the values
    whose keys start with it: when entries are asked for (``-e``, or ENTRY words after the
    key), or when WORD is the exact key of a stored dict, list or tuple and no other value's key
    starts with it (then the prefix listing would show that one value alone)."""
    if not args.path or args.keys:
        return False
    if args.entries or len(args.path) > 1:
        return True
    key = args.path[0]
    if not _exists(store, key):
        return False
    others = [o.key for o in store.list_objects(key) if o.key != key]
    if others:
        print(
            f"freight ls: {quote(key)} is also a stored value; `freight ls -e {args.url} {key}` lists its entries",
            file=sys.stderr,
        )
        return False
    try:
        return store.lazy(key, allow_pickle=False).kind in ("dict", "list", "tuple")
    except FreightError:
        return False  # not a payload, or one a lazy read cannot open: listed as today


def _cmd_ls(args: argparse.Namespace) -> int:
    if entries.is_payload_file(args.url):  # ls FILE [ENTRY...]
        if args.keys:
            args.parser.error(f"{args.url} is a payload file: --keys lists the values of a store")
        lv = entries.open_file(args.url, entries.options(args))
        return entries.list_entries(lv, args.path, args.url, os.path.getsize(args.url))
    store = _open(args, args.url)
    args.prefix = args.path[0] if args.path else ""
    if _ls_entries(args, store):
        key = args.prefix
        if not store.exists(key):
            raise entries.missing_value(store.url, key)
        lv = store.lazy(key, **entries.options(args))
        return entries.list_entries(lv, args.path[1:], f"{store.url}: {quote(key)}", store.head(key).size)
    listed = store.list_objects(args.prefix, side_objects=True)
    side = [(o.key, o.size) for o in listed if is_side_key(o.key)]
    shown = listed if args.all else [o for o in listed if not is_side_key(o.key)]
    if not listed:
        where = f" under {quote(args.prefix)}" if args.prefix else ""
        print(f"{store.url}: no values{where}")
        return 0
    side_of: dict[str, list[int]] = {}
    for key, size in side:
        side_of.setdefault(side_owner(key), []).append(size)
    with_sides = args.long and bool(side_of)
    headers = ["size", "modified"]
    headers += ["pickle", "signed", "tags"] if args.long else []
    headers += ["side objects"] if with_sides else []
    rows = []
    for key, size, modified, _ in shown:
        row = [_size(size), _when(modified)]
        if args.long:
            row += ["", "", ""] if is_side_key(key) else _header_columns(store, key)
        if with_sides:
            sizes = side_of.get(key)
            row.append(_sides(len(sizes), sum(sizes)) if sizes and not is_side_key(key) else "")
        rows.append([*row, key])
    headers.append("key")
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:  # sizes right-aligned, the key last and as it is
        padded = [cells[0].rjust(widths[0])] + [c.ljust(w) for c, w in zip(cells[1:-1], widths[1:-1])]
        return "  ".join([*padded, cells[-1]])

    if rows:
        print(line(headers))
        print(line(["-" * w for w in widths]))
        for row in rows:
            print(line(row))
    values = [o.size for o in listed if not is_side_key(o.key)]
    if side:
        side_bytes = sum(size for _, size in side)
        print(
            f"{_count(len(values), 'value')} ({_size(sum(values))}) and {_sides(len(side))} "
            f"({_size(side_bytes)}): {_total(sum(values) + side_bytes)} in all"
        )
    else:
        print(f"{_count(len(values), 'value')}, {_total(sum(values))}")
    return 0


# --------------------------------------------------------------------------------------------
# cat
# --------------------------------------------------------------------------------------------


def cmd_cat(args: argparse.Namespace) -> int:
    """``cat URL KEY`` (and ``inspect URL KEY``): what `inspect` prints, for a stored value;
    ``cat URL KEY ENTRY...`` (and ``cat FILE ENTRY...``): one entry's value, read alone."""
    words = list(getattr(args, "entries", None) or [])
    rows, columns = getattr(args, "rows", None), getattr(args, "columns", None)
    if hasattr(args, "entries") and entries.is_payload_file(args.url):  # cat FILE [ENTRY...] (not inspect)
        words = ([args.key] if args.key is not None else []) + words
        if not words and rows is None and columns is None:
            return inspect_file(args.url, read_key(args.key_file))
        lv = entries.open_file(args.url, entries.options(args))
        return entries.print_entry(lv, words, args.url, os.path.getsize(args.url), rows, columns)
    if args.key is None:
        args.parser.error("the following arguments are required: KEY")
    if words or rows is not None or columns is not None:
        store = _open(args, args.url)
        lv = store.lazy(args.key, **entries.options(args))
        label = f"{store.url}: {quote(args.key)}"
        return entries.print_entry(lv, words, label, store.head(args.key).size, rows, columns)
    sign_key = read_key(args.key_file)
    store = _open(args, args.url)
    modified = store.head(args.key).modified
    data = store.get_bytes(args.key)
    try:
        reason = not_a_payload(data)
        if reason is not None:
            raise DeserializationError(reason)
        info = freight.inspect(data, key=sign_key)
    except FreightError as exc:
        if is_side_key(args.key):
            what = f"a side object of {quote(side_owner(args.key))}, not a freight payload"
        elif reason is not None:
            what = reason
        else:
            what = f"not a valid freight payload: {exc}"
        raise CliError(f"{store.url}: {quote(args.key)}: {what}") from exc
    print(f"store:           {store.url}")
    print(f"key:             {args.key}")
    print(f"modified:        {_when(modified)}")
    print(format_inspect(info))
    return 0


# --------------------------------------------------------------------------------------------
# rm
# --------------------------------------------------------------------------------------------


def _cmd_rm(args: argparse.Namespace) -> int:
    if not args.keys and args.prefix is None:
        args.parser.error("name the keys to remove, or --prefix P")
    if args.prefix == "":
        args.parser.error("--prefix needs a non-empty prefix (an empty one would remove every value)")
    store = _open(args, args.url)
    status = 0
    for key in args.keys:
        side = [] if is_side_key(key) else store.list_objects(key + SIDE, side_objects=True)
        try:
            store.delete(key)  # and its side objects
        except StorageError as exc:  # not there, or a side object of a value that needs it
            print(f"freight rm: {exc}", file=sys.stderr)
            status = 1
            continue
        print(f"removed {key}" + (f" and its {_sides(len(side))}" if side else ""))
    if args.prefix is not None:
        side = sum(is_side_key(o.key) for o in store.list_objects(args.prefix, side_objects=True))
        n = store.delete_prefix(args.prefix)
        if n == 0:
            print(f"{store.url}: no values under {quote(args.prefix)}, nothing removed")
        elif side and n >= side:
            print(f"removed {_count(n - side, 'value')} and {_sides(side)} under {quote(args.prefix)}")
        else:
            print(f"removed {_count(n, 'value')} under {quote(args.prefix)}")
    return status


def _cmd_cp(args: argparse.Namespace) -> int:
    if args.prefix == "" and args.keys:
        args.parser.error("--prefix needs a non-empty prefix (with no KEY and no --prefix, cp copies every value)")
    src = _open(args, args.src)
    dst = _open(args, args.dst, create=True)
    if src.url == dst.url:
        args.parser.error(f"the source and the destination are the same store ({src.url})")
    prefix = "" if not args.keys and args.prefix is None else args.prefix
    plan, missing = plan_copy(src, args.keys, prefix)
    for key in missing:
        print(f"freight cp: {src.url}: no value is stored under {quote(key)}", file=sys.stderr)
    copied = kept = nbytes = sides = 0
    for item, event, n, bar in copy_items(src, dst, plan, args.no_clobber):
        if event == "kept":
            kept += 1
            bar.write(f"{'kept':>10}  {item.key}  (the destination has a value there; -n keeps it)")
            continue
        copied += 1
        nbytes += n
        sides += len(item.side)
        note = f"  (+ {_sides(len(item.side), n - item.size)})" if item.side else ""
        bar.write(f"{_size(item.size):>10}  {item.key}{note}")
    summary = f"copied {_count(copied, 'value')}" + (f" and {_sides(sides)}" if sides else "")
    summary += f", {_total(nbytes)}"
    if kept:
        summary += f"; kept {_count(kept, 'value')} the destination already had"
    print(f"{summary}: {src.url} -> {dst.url}")
    return 1 if missing else 0


def add_parsers(sub: Any) -> None:
    """Adds ls, cat, rm and cp to the ``freight`` command's subparsers."""
    p = sub.add_parser(
        "ls",
        help="list the values of a store (a folder or s3://)",
        description="List the values of a store.",
        epilog=_ENV_HELP,
    )
    p.add_argument(
        "url",
        metavar="URL | FILE",
        help="a folder (file://PATH or a plain path) or s3://BUCKET/PREFIX; or a payload file, whose entries "
        "are listed",
    )
    p.add_argument(
        "path",
        metavar="PREFIX | KEY [ENTRY ...]",
        nargs="*",
        default=[],
        help="only the keys that start with PREFIX; or, when it is the key of a stored dict, list or tuple (and "
        "no other key starts with it), that value's entries, read from its header alone: name, kind, dtype "
        "and shape or length, size and stored size. ENTRY words go down into nested entries (a dict's key "
        "as listed, a list's index); an entry that is not a container is described (a table's columns)",
    )
    p.add_argument(
        "-l", "--long", action="store_true", help="also read each header: pickle needed, signed, serializer tags"
    )
    p.add_argument("-a", "--all", action="store_true", help="also list side objects (KEY.freight-side/...)")
    p.add_argument(
        "-e",
        "--entries",
        action="store_true",
        help="list the entries of the value under KEY (even when other keys start with KEY too)",
    )
    p.add_argument(
        "-k",
        "--keys",
        action="store_true",
        help="list the values whose keys start with PREFIX, even when it is the key of a stored value",
    )
    p.add_argument("--key-file", metavar="PATH", help="with entries: authenticate the header and what is read")
    entries.add_arguments(p)
    p.set_defaults(func=_cmd_ls, parser=p, intermixed=True)

    p = sub.add_parser(
        "cat",
        help="describe a stored value without decoding it (as `inspect` does for a file), or print one entry",
        description="Describe a stored value without decoding it, as `freight inspect` does for a file; with "
        "ENTRY words, print that entry of a stored dict, list or tuple (numpy, pandas and pyarrow summarise "
        "large ones), reading only its frames, and say on stderr how many bytes were read. FILE ENTRY... "
        "does the same for a payload file.",
        epilog=_ENV_HELP,
    )
    p.add_argument("url", metavar="URL | FILE")
    p.add_argument("key", metavar="KEY", nargs="?", help="the key as it was saved")
    p.add_argument(
        "entries",
        metavar="ENTRY",
        nargs="*",
        default=[],
        help="an entry, as `freight ls URL KEY` lists it (a dict's key, a list's index); more go down into "
        "nested entries",
    )
    p.add_argument("--rows", metavar="A:B", help="only these rows of an array entry (reads only their blocks)")
    p.add_argument(
        "--columns",
        metavar="C1,C2",
        help="only these columns of a pyarrow Table or RecordBatch or polars DataFrame (reads only their buffers)",
    )
    entries.add_arguments(p)
    p.add_argument(
        "--key-file",
        metavar="PATH",
        help="also check the signature with the key in this file (its bytes as they are; one trailing "
        "newline is ignored)",
    )
    p.set_defaults(func=cmd_cat, parser=p, intermixed=True)

    p = sub.add_parser(
        "rm",
        help="delete values from a store",
        description="Delete values (and their side objects).",
        epilog=_ENV_HELP,
    )
    p.add_argument("url", metavar="URL")
    p.add_argument("keys", metavar="KEY", nargs="*")
    p.add_argument("--prefix", metavar="P", help="delete every value whose key starts with P")
    p.set_defaults(func=_cmd_rm, parser=p, intermixed=True)

    p = sub.add_parser(
        "cp",
        help="copy values between stores, byte for byte",
        description=(
            "Copy values from one store to another under the same keys, byte for byte (never "
            "decoded: signatures, checksums and compression are kept), with their side objects. "
            "With no KEY and no --prefix, every value."
        ),
        epilog=_ENV_HELP,
    )
    p.add_argument("src", metavar="SRC_URL")
    p.add_argument("dst", metavar="DST_URL")
    p.add_argument("keys", metavar="KEY", nargs="*")
    p.add_argument("--prefix", metavar="P", help="copy every value whose key starts with P")
    p.add_argument(
        "-n", "--no-clobber", action="store_true", help="keep the values the destination already has under a key"
    )
    p.set_defaults(func=_cmd_cp, parser=p, intermixed=True)
