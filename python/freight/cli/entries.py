"""The entries of one stored value, read in part (:func:`freight.lazy`, ``Store.lazy``)::

    freight ls URL KEY [ENTRY...]       the entries of a stored dict, list or tuple (nested ones
    freight ls FILE [ENTRY...]          by naming them), each with its kind, dtype and shape or
                                        length, and its stored size, from the header alone
    freight cat URL KEY ENTRY...        one entry's value, printed (numpy, pandas and pyarrow
    freight cat FILE ENTRY...           summarise large ones), reading only that entry's frames;
                                        --rows A:B reads only those rows of an array, --columns
                                        only those columns of a pyarrow or polars table

Both say on stderr how many bytes they read (the header included) out of the stored size, so
that what a part cost is visible. An ENTRY names a dict's key as ``ls`` shows it (a string as it
is, anything else, or a string that would be read as one, by its ``repr``: ``3``, ``'3'``,
``(1, 2)``) or a list's or tuple's index (``0``, ``-1``).

Nothing is unpickled unless ``--allow-pickle`` says so (the payload may come from anyone who can
write to the store); ``--key-file`` authenticates the header and every block read.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import freight
from freight.cli.common import CliError, fmt_bytes, quote, read_key

__all__ = ["is_payload_file", "options", "open_file", "list_entries", "print_entry", "add_arguments"]

_CONTAINERS = ("dict", "list", "tuple")
# Kinds as the header names them, as a reader knows them.
_KIND_NAMES = {"none_": "None", "true": "bool", "false": "bool", "framestr": "str", "framebytes": "bytes"}
_PREVIEW = 48


def is_payload_file(url: str) -> bool:
    """Whether ``url`` is a plain path to a file (a payload), not a store's folder or URL."""
    return "://" not in url and os.path.isfile(url)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """What a lazy read of the command line decodes with: no pickle unless asked, the key file's
    key when there is one."""
    opts: dict[str, Any] = {"allow_pickle": bool(getattr(args, "allow_pickle", False))}
    key = read_key(getattr(args, "key_file", None))
    if key is not None:
        opts["key"] = key
    return opts


def open_file(path: str, opts: dict[str, Any]) -> Any:
    """The payload in the file at ``path``, opened lazily."""
    return freight.lazy(path, **opts)


def _kind(info: dict[str, Any]) -> str:
    kind = info["kind"]
    return info.get("tag") or _KIND_NAMES.get(kind, kind)


def _shown_names(names: list[Any]) -> dict[Any, str]:
    """How ``ls`` shows each name, so that ``cat`` finds it again: a string as it is, unless it
    reads as the repr of another name; anything else by its repr."""
    reprs = {repr(n) for n in names}
    return {n: n if isinstance(n, str) and n not in reprs and n != "" else repr(n) for n in names}


def _container_kind(obj: Any) -> str | None:
    """dict, list or tuple for a lazy container or one decoded from the header, else None."""
    if isinstance(obj, freight.LazyValue):
        return obj.kind if obj.kind in _CONTAINERS else None
    return type(obj).__name__ if type(obj) in (dict, list, tuple) else None


def _pick(container: Any, text: str, label: str) -> Any:
    """The name in ``container`` that ``text`` (a command-line word) stands for."""
    kind = _container_kind(container)
    names = list(container.keys()) if kind == "dict" else list(range(len(container)))
    if kind in ("list", "tuple"):
        try:
            i = int(text)
        except ValueError:
            raise CliError(f"{label} is a {kind}: name an entry by its index (0 to {len(names) - 1})") from None
        if not -len(names) <= i < len(names):
            raise CliError(f"{label} is a {kind} of {len(names)} items: it has no index {i}")
        return i % len(names)
    for name in names:  # a repr first (3, '3', (1, 2)), then a string as it is
        if repr(name) == text:
            return name
    if text in names:
        return text
    shown = list(_shown_names(names).values())
    more = " ..." if len(shown) > 20 else ""
    raise CliError(f"{label} has no entry {text}; its entries are {', '.join(shown[:20])}{more}")


def _label(base: str, path: list[Any]) -> str:
    return base + "".join(f"[{n!r}]" for n in path)


def walk(lv: Any, words: list[str], base: str) -> tuple[Any, Any, list[Any]]:
    """(the lazy container holding the last entry named, that entry's name, the names walked)
    for the ENTRY words; the entries on the way must be containers that hold frames (those
    without frames lie in the header and are decoded when named last)."""
    path: list[Any] = []
    parent = lv
    for i, text in enumerate(words):
        if _container_kind(parent) is None:
            raise CliError(f"{_label(base, path)} has no entries: it is {_what(parent)}")
        name = _pick(parent, text, _label(base, path))
        path.append(name)
        if i == len(words) - 1:
            return parent, name, path
        parent = parent[name]
    return None, None, path


def _what(obj: Any) -> str:
    if isinstance(obj, freight.LazyValue):
        return f"a {obj.kind}" + (" (the value was pickled as a whole)" if obj.kind == "pickle" else "")
    if isinstance(obj, freight.LazyArray):
        return f"an array ({obj.dtype}, shape {obj.shape})"
    return f"a {type(obj).__name__}"


# --------------------------------------------------------------------------------------------
# ls
# --------------------------------------------------------------------------------------------


def _detail(lv: Any, name: Any, info: dict[str, Any]) -> str:
    """An entry's dtype and shape, length, columns, or (for a scalar in the header) its value."""
    kind = info["kind"]
    if kind == "ndarray":
        return f"{info['dtype']} {info['shape']}"
    if "length" in info:
        n = info["length"]
        return f"{n:,} {'entry' if kind == 'dict' and n == 1 else 'entries' if kind == 'dict' else 'items'}"
    if "schema" in info:
        schema = info["schema"]
        return f"{len(schema):,} columns: {', '.join(schema.names[:6])}{', ...' if len(schema) > 6 else ''}"
    if info["frames"] == 0 and kind not in ("ext", "pickle"):
        try:
            return _preview(lv[name])  # in the header: nothing more is read
        except freight.FreightError:
            return ""
    return ""


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 3] + "..."


def _table(headers: list[str], rows: list[list[str]], right: tuple[int, ...]) -> list[str]:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        out = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(out).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _read_line(lv: Any, total: int) -> str:
    return f"read {fmt_bytes(lv.bytes_read, exact=False)} of {fmt_bytes(total, exact=False)} ({lv.bytes_read:,} bytes)"


def list_entries(lv: Any, words: list[str], base: str, total: int) -> int:
    """``ls``: the entries of ``lv`` (or of its entry named by ``words``), or, for an entry
    that is not a container, what it is (a table's columns)."""
    target: Any = lv
    label = base
    if words:
        parent, name, path = walk(lv, words, base)
        label = _label(base, path)
        if not isinstance(parent, freight.LazyValue):  # inside a container held in the header
            target = parent[name]
            if _container_kind(target) is None:
                print(f"{label}: {type(target).__name__}\n  {_preview(target)}")
                print(f"stored in the header; {_read_line(lv, total)}")
                return 0
        else:
            info = parent.info(name)
            if info["kind"] not in _CONTAINERS:
                return _describe_one(parent, name, info, label, lv, total)
            target = parent[name]
    if not isinstance(target, freight.LazyValue):  # a small dict, list or tuple held in the header
        return _list_plain(target, label, lv, total)
    if target.kind not in _CONTAINERS:
        hint = " (it was pickled as a whole)" if target.kind == "pickle" else ""
        raise CliError(f"{label} is a {target.kind}, not a dict, list or tuple: it has no entries{hint}")
    names = target.keys()
    shown = _shown_names(names)
    rows = []
    stored = 0
    for name in names:
        info = target.info(name)
        stored += info["stored_bytes"]
        nbytes = info.get("nbytes")
        rows.append(
            [
                shown[name],
                _kind(info),
                _detail(target, name, info),
                "" if nbytes is None else fmt_bytes(nbytes, exact=False),
                fmt_bytes(info["stored_bytes"], exact=False) if info["stored_bytes"] else "-",
            ]
        )
    print(f"{label}: a {target.kind} of {len(names):,} {'entry' if len(names) == 1 else 'entries'}")
    if rows:
        print("\n".join(_table(["entry", "kind", "details", "size", "stored"], rows, (3, 4))))
    print(f"{len(names):,} entries, {fmt_bytes(stored, exact=False)} in frames; {_read_line(lv, total)}")
    return 0


def _list_plain(value: Any, label: str, lv: Any, total: int) -> int:
    items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
    shown = _shown_names([k for k, _ in items])
    rows = []
    for name, item in items:
        rows.append([shown[name], type(item).__name__, _preview(item), "", "-"])
    print(f"{label}: a {type(value).__name__} of {len(items):,} entries (held in the header)")
    if rows:
        print("\n".join(_table(["entry", "kind", "details", "size", "stored"], rows, (3, 4))))
    print(f"{len(items):,} entries; {_read_line(lv, total)}")
    return 0


def _describe_one(parent: Any, name: Any, info: dict[str, Any], label: str, lv: Any, total: int) -> int:
    """``ls`` of an entry that is not a container: its kind, size and, for a table, columns."""
    print(f"{label}: {_kind(info)}")
    if info["kind"] == "ndarray":
        print(f"  dtype {info['dtype']}, shape {info['shape']}, {fmt_bytes(info['nbytes'])}")
    if "schema" in info:
        schema = info["schema"]
        rows = [[f.name, str(f.type), "" if f.nullable else "not null"] for f in schema]
        print("\n".join("  " + line for line in _table(["column", "type", ""], rows, ())))
    else:
        detail = _detail(parent, name, info)
        if detail and info["kind"] != "ndarray":
            print(f"  {detail}")
    frames = info["frames"]
    where = f"{frames} frame{'s' if frames != 1 else ''}, {fmt_bytes(info['stored_bytes'])}" if frames else "the header"
    print(f"stored in {where}; {_read_line(lv, total)}")
    return 0


# --------------------------------------------------------------------------------------------
# cat
# --------------------------------------------------------------------------------------------


def _rows(text: str) -> Any:
    """``A:B``, ``A:B:STEP`` or ``I`` (Python's slice and index syntax, negatives included)."""
    try:
        if ":" not in text:
            return int(text)
        parts = [int(p) if p.strip() else None for p in text.split(":")]
    except ValueError:
        raise CliError(f"--rows {text}: write rows as A:B (a slice, as in Python) or I (one row)") from None
    if len(parts) > 3:
        raise CliError(f"--rows {text}: write rows as A:B or A:B:STEP")
    return slice(*parts)


def print_entry(lv: Any, words: list[str], base: str, total: int, rows: str | None, columns: str | None) -> int:
    """``cat``: prints the entry named by ``words`` (or, with ``--columns``, the value itself
    when it is a table), reading only its frames; says on stderr how much was read."""
    if words:
        parent, name, path = walk(lv, words, base)
        label = _label(base, path)
    else:
        parent, name, label = None, None, base
    if columns is not None:
        names = [c.strip() for c in columns.split(",") if c.strip()]
        if not names:
            raise CliError("--columns needs column names, separated by commas")
        if parent is not None and not isinstance(parent, freight.LazyValue):
            raise CliError(f"--columns reads columns of a table; {label} is {_what(parent[name])}")
        value = lv.columns(names) if parent is None else parent.columns(names, entry=name)
        if rows is not None:
            value = value.slice(*_slice_bounds(_rows(rows), value.num_rows))
    else:
        value = lv if parent is None else parent[name]
        if rows is not None:
            if not isinstance(value, freight.LazyArray):
                raise CliError(f"--rows reads rows of an array; {label} is {_what(value)}")
            value = value[_rows(rows)]
        elif isinstance(value, (freight.LazyValue, freight.LazyArray)):
            value = value.load()
    print(repr(value))
    print(f"freight cat: {label}: {_read_line(lv, total)}", file=sys.stderr)
    return 0


def _slice_bounds(index: Any, n: int) -> tuple[int, int]:
    if isinstance(index, int):
        i = index + n if index < 0 else index
        return i, 1
    start, stop, step = index.indices(n)
    if step != 1:
        raise CliError("--rows with --columns takes A:B (no step)")
    return start, max(0, stop - start)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """--allow-pickle, shared by ls and cat (cat has --key-file already)."""
    p.add_argument(
        "--allow-pickle",
        action="store_true",
        help="let an entry that was pickled be unpickled (runs code from the payload: only for payloads you trust); "
        "without it such an entry is refused",
    )


def missing_value(url: str, key: str) -> CliError:
    return CliError(f"{url}: no value is stored under {quote(key)}")
