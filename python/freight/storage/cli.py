"""The store subcommands of the ``freight`` command line (see :mod:`freight.cli`)::

    freight ls URL [PREFIX] [-l] [-a]       values with size and modification time, and a total;
                                            -l adds what each header says (pickle, signed, tags),
                                            -a lists the side objects too
    freight cat URL KEY [--key-file PATH]   what `freight inspect` prints, for a stored value
    freight rm URL [KEY...] [--prefix P]    delete values (with their side objects)
    freight cp SRC DST [KEY...] [--prefix P] [-n]
                                            copy values between stores, byte for byte

URLs are those of :func:`freight.storage.open`: a folder (``file://PATH`` or a plain path) or
``s3://BUCKET/PREFIX``, with the S3 settings from the standard AWS environment variables
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``,
``AWS_ALLOW_HTTP=true``). ``memory://`` is refused: each process would see a new, empty store
(from Python, :func:`copy_values` copies from or into one). A folder that does not exist is an
error for every command but ``cp``'s destination (which its first copy creates): the path is
likely a typo, and reading never creates anything.

Side objects (:mod:`freight.storage.persistent`: the zarr chunks or parquet file of a value kept
in its own format, under ``KEY.freight-side/``) belong to their value: ``ls`` counts them in its
total (``-a`` lists them), ``rm`` removes them with the value, ``cp`` copies them before the
value's envelope and removes the destination's older ones after it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from freight.exceptions import DeserializationError, FreightError, KeyExistsError, KeyNotFoundError
from freight.storage.persistent import SIDE, is_side_key

if TYPE_CHECKING:
    from freight.storage import Store
    from freight.storage.progress import Progress

__all__ = ["add_parsers", "copy_values"]

_ENV_HELP = (
    "S3 settings come from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION "
    "and AWS_ALLOW_HTTP=true (for an http:// endpoint)."
)


def _q(key: str) -> str:
    """A key in a message, quoted as the storage errors quote it: ``"run-3/a b"``."""
    return json.dumps(key, ensure_ascii=False)


def _size(n: int) -> str:
    from freight.cli import _fmt_bytes

    return _fmt_bytes(n, exact=False)


def _total(n: int) -> str:
    from freight.cli import _fmt_bytes

    return _fmt_bytes(n) if n >= 1024 else f"{n:,} bytes"


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def _sides(n: int, nbytes: int | None = None) -> str:
    text = _count(n, "side object")
    return text if nbytes is None else f"{text}, {_size(nbytes)}"


def _when(modified: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(modified))


def _owner(key: str) -> str:
    """The value a side object belongs to."""
    return key[: key.index(SIDE)]


def _save_id(key: str) -> str:
    """The save a side object was written by (``KEY.freight-side/<save id>/...``)."""
    return key[key.index(SIDE) + len(SIDE) :].split("/", 1)[0]


def _open(args: argparse.Namespace, url: str, *, create: bool = False) -> Store:
    """The store at ``url``; unless ``create`` (cp's destination), a local folder that does not
    exist is an error rather than an empty store (and is not created)."""
    import freight.storage
    from freight.cli import _CliError

    if url.startswith("memory://"):
        args.parser.error(
            f"{url}: a memory:// store lives inside one Python process, so the command line "
            "would see a new, empty one; use a folder or s3:// (or freight.storage.cli.copy_values "
            "from Python)"
        )
    store = freight.storage.open(url)
    folder = None if create else freight.storage.missing_folder(store)
    if folder is not None:
        raise _CliError(
            f"{url}: there is no folder {os.path.abspath(folder)}: nothing was ever saved there (a store's "
            "folder is created by its first save); check the path"
        )
    return store


def read_stored(args: argparse.Namespace, url: str, key: str) -> tuple[str, Any]:
    """(a label for messages, the stored bytes) of the value under ``key``."""
    store = _open(args, url)
    return f"{store.url}: {_q(key)}", store._native.get(key)


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


def _cmd_ls(args: argparse.Namespace) -> int:
    store = _open(args, args.url)
    listed = store._native.list(args.prefix)
    side = [(key, size) for key, size, _ in listed if is_side_key(key)]
    shown = listed if args.all else [entry for entry in listed if not is_side_key(entry[0])]
    if not listed:
        where = f" under {_q(args.prefix)}" if args.prefix else ""
        print(f"{store.url}: no values{where}")
        return 0
    side_of: dict[str, list[int]] = {}
    for key, size in side:
        side_of.setdefault(_owner(key), []).append(size)
    with_sides = args.long and bool(side_of)
    headers = ["size", "modified"]
    headers += ["pickle", "signed", "tags"] if args.long else []
    headers += ["side objects"] if with_sides else []
    rows = []
    for key, size, modified in shown:
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
    values = [size for key, size, _ in listed if not is_side_key(key)]
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


def _cmd_cat(args: argparse.Namespace) -> int:
    import freight
    from freight.cli import _CliError, _read_key, format_inspect, not_a_payload

    sign_key = _read_key(args.key_file)
    store = _open(args, args.url)
    _, modified = store._native.head(args.key)
    data = store._native.get(args.key)
    try:
        reason = not_a_payload(data)
        if reason is not None:
            raise DeserializationError(reason)
        info = freight.inspect(data, key=sign_key)
    except FreightError as exc:
        if is_side_key(args.key):
            what = f"a side object of {_q(_owner(args.key))}, not a freight payload"
        elif reason is not None:
            what = reason
        else:
            what = f"not a valid freight payload: {exc}"
        raise _CliError(f"{store.url}: {_q(args.key)}: {what}") from exc
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
        side = [] if is_side_key(key) else store._native.list(key + SIDE)
        try:
            store.delete(key)  # and its side objects
        except KeyNotFoundError as exc:
            print(f"freight rm: {exc}", file=sys.stderr)
            status = 1
            continue
        print(f"removed {key}" + (f" and its {_sides(len(side))}" if side else ""))
    if args.prefix is not None:
        side = sum(is_side_key(key) for key, _, _ in store._native.list(args.prefix))
        n = store.delete_prefix(args.prefix)
        if n == 0:
            print(f"{store.url}: no values under {_q(args.prefix)}, nothing removed")
        elif side and n >= side:
            print(f"removed {_count(n - side, 'value')} and {_sides(side)} under {_q(args.prefix)}")
        else:
            print(f"removed {_count(n, 'value')} under {_q(args.prefix)}")
    return status


# --------------------------------------------------------------------------------------------
# cp
# --------------------------------------------------------------------------------------------


@dataclass
class _Item:
    """A value to copy: its key and size, and its side objects [(key, size)]."""

    key: str
    size: int
    side: list[tuple[str, int]] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return self.size + sum(size for _, size in self.side)


def _plan(src: Store, keys: Iterable[str], prefix: str | None) -> tuple[list[_Item], list[str]]:
    """What to copy: ``keys``, then the values under ``prefix`` (each once, side objects with
    their value); and the named keys that ``src`` does not have."""
    plan: list[_Item] = []
    missing: list[str] = []
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        try:
            size = src._native.head(key)[0]
        except KeyNotFoundError:
            missing.append(key)
            continue
        side = [] if is_side_key(key) else [(k, s) for k, s, _ in src._native.list(key + SIDE)]
        plan.append(_Item(key, size, side))
    if prefix is not None:
        listed = [(key, size) for key, size, _ in src._native.list(prefix)]
        items = {key: _Item(key, size) for key, size in listed if not is_side_key(key) and key not in seen}
        for key, size in listed:
            if not is_side_key(key) or key in seen:
                continue
            owner = _owner(key)
            if owner in items:
                items[owner].side.append((key, size))
            elif owner not in seen:  # a side object whose value is not copied: copied as it is
                items[key] = _Item(key, size)
        plan += sorted(items.values(), key=lambda item: item.key)
    return plan, missing


def _put(src: Store, dst: Store, key: str, if_absent: bool = False) -> int:
    """Copies one stored object as it is; returns its size."""
    data = src._native.get(key)
    try:
        dst._native.put_bytes(key, [data], if_absent=if_absent)
        return len(data)
    finally:
        del data  # a map of a large local file: released now, not at the end of the copy


def _copy_one(src: Store, dst: Store, item: _Item, if_absent: bool, bar: Progress) -> tuple[str, int]:
    """Copies a value: its side objects, then its envelope (so that a reader of the destination
    never sees an envelope without its side objects), then removes the destination's side
    objects of other saves. ("copied", bytes), or ("kept", 0) when ``if_absent`` found a value."""
    if if_absent and dst._native.exists(item.key):
        bar.update(item.nbytes)
        return "kept", 0
    nbytes = 0
    for key, _ in item.side:
        size = _put(src, dst, key)
        nbytes += size
        bar.update(size)
    try:
        size = _put(src, dst, item.key, if_absent)
    except KeyExistsError:  # a racing writer: the side objects just written stay unreferenced
        bar.update(item.size)
        return "kept", 0
    nbytes += size
    bar.update(size)
    if not is_side_key(item.key):
        keep = {_save_id(key) for key, _ in item.side}
        stale = {_save_id(key) for key, _, _ in dst._native.list(item.key + SIDE)} - keep
        for save_id in stale:
            dst._native.delete_prefix(f"{item.key}{SIDE}{save_id}/")
    return "copied", nbytes


def _copy(src: Store, dst: Store, plan: list[_Item], if_absent: bool) -> Iterator[tuple[_Item, str, int, Progress]]:
    """Copies the values of ``plan`` under a progress bar; yields (item, event, bytes, bar)."""
    from freight.storage.progress import progress

    with progress(sum(item.nbytes for item in plan), "copying") as bar:
        for item in plan:
            bar.note(item.key)
            event, nbytes = _copy_one(src, dst, item, if_absent, bar)
            yield item, event, nbytes, bar


def copy_values(
    src: Store, dst: Store, keys: Iterable[str] | None = None, *, prefix: str | None = None, if_absent: bool = False
) -> list[tuple[str, str, int]]:
    """Copies values from ``src`` to ``dst`` under the same keys, byte for byte: the stored
    payloads, never decoded (signatures, checksums and compression stay as they are), with
    their side objects. Either store may be any backend, ``memory://`` included.

    Args:
        keys: the keys to copy (and those under ``prefix``); every value when both are None.
        prefix: also copy every value whose key starts with this.
        if_absent: keep what ``dst`` already has under a key.

    Returns:
        [(key, "copied" or "kept", bytes copied)], in the order copied.

    Raises:
        KeyNotFoundError: a named key is not in ``src`` (checked before anything is copied).

    A progress bar (:mod:`freight.storage.progress`) counts the bytes when they add up to
    64 MiB or more, stderr is a terminal and tqdm is installed.
    """
    if keys is None and prefix is None:
        prefix = ""
    plan, missing = _plan(src, keys or (), prefix)
    if missing:
        src._native.head(missing[0])  # raises the KeyNotFoundError, with the store's message
    return [(item.key, event, nbytes) for item, event, nbytes, _ in _copy(src, dst, plan, if_absent)]


def _cmd_cp(args: argparse.Namespace) -> int:
    if args.prefix == "" and args.keys:
        args.parser.error("--prefix needs a non-empty prefix (with no KEY and no --prefix, cp copies every value)")
    src = _open(args, args.src)
    dst = _open(args, args.dst, create=True)
    if src.url == dst.url:
        args.parser.error(f"the source and the destination are the same store ({src.url})")
    prefix = "" if not args.keys and args.prefix is None else args.prefix
    plan, missing = _plan(src, args.keys, prefix)
    for key in missing:
        print(f"freight cp: {src.url}: no value is stored under {_q(key)}", file=sys.stderr)
    copied = kept = nbytes = sides = 0
    for item, event, n, bar in _copy(src, dst, plan, args.no_clobber):
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


# --------------------------------------------------------------------------------------------
# The parsers
# --------------------------------------------------------------------------------------------


def add_parsers(sub: Any) -> None:
    """Adds ls, cat, rm and cp to the ``freight`` command's subparsers."""
    p = sub.add_parser(
        "ls",
        help="list the values of a store (a folder or s3://)",
        description="List the values of a store.",
        epilog=_ENV_HELP,
    )
    p.add_argument("url", metavar="URL", help="a folder (file://PATH or a plain path) or s3://BUCKET/PREFIX")
    p.add_argument("prefix", metavar="PREFIX", nargs="?", default="", help="only the keys that start with this")
    p.add_argument(
        "-l", "--long", action="store_true", help="also read each header: pickle needed, signed, serializer tags"
    )
    p.add_argument("-a", "--all", action="store_true", help="also list side objects (KEY.freight-side/...)")
    p.set_defaults(func=_cmd_ls, parser=p, intermixed=True)

    p = sub.add_parser(
        "cat",
        help="describe a stored value without decoding it (as `inspect` does for a file)",
        description="Describe a stored value without decoding it, as `freight inspect` does for a file.",
        epilog=_ENV_HELP,
    )
    p.add_argument("url", metavar="URL")
    p.add_argument("key", metavar="KEY", help="the key as it was saved")
    p.add_argument(
        "--key-file",
        metavar="PATH",
        help="also check the signature with the key in this file (its bytes as they are; one trailing "
        "newline is ignored)",
    )
    p.set_defaults(func=_cmd_cat, parser=p, intermixed=True)

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
