"""Rendering a payload's description (``freight.inspect``, ``Store.info``: the same keys) as
the text that ``freight inspect``, ``freight cat`` and ``freight verify`` print."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import freight
from freight import _files
from freight.cli.common import CliError
from freight.cli.common import fmt_bytes as _fmt_bytes

if TYPE_CHECKING:
    from freight._freight import FrameInfo, PayloadInfo, TreeInfo

__all__ = ["not_a_payload", "format_inspect", "frame_table", "read_payload", "inspect_payload", "inspect_file"]

_MAGIC = b"\x89FRT"


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


def _fmt_digests(frame: FrameInfo) -> str:
    """A frame's block digests (format 1.2): ``sha256 / 256 KiB``, or ``-`` without."""
    digests = frame["digests"]
    if digests is None:
        return "-"
    kind, block = digests
    return f"{kind} / {_fmt_bytes(block, exact=False)}"


def frame_table(frames: list[FrameInfo]) -> list[str]:
    """One row per frame: position, sizes, compression, checksum, block digests and whether they
    match. The offset column is left out for a dumps_frames list, the compression columns when
    no frame is compressed, and the digests column when no frame has block digests."""
    with_offsets = any(f["offset"] is not None for f in frames)
    compressed = any(f["codec"] != "none" for f in frames)
    digested = any(f["digests"] is not None for f in frames)
    headers = ["#"] + (["offset"] if with_offsets else []) + ["size"]
    if compressed:
        headers += ["stored", "ratio", "codec", "shuffle"]
    headers += ["checksum"] + (["digests"] if digested else []) + ["status"]
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
        row += [checksum] + ([_fmt_digests(f)] if digested else []) + [_checksum_status(f)]
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


def _runs(info: PayloadInfo) -> str:
    """What loading a payload flagged as needing pickle runs: pickle, or (with no pickle node)
    the code of a function or of a serializer marked unsafe."""
    tree = info["tree"]
    if tree["ok"] and tree["pickle_nodes"] == 0 and info["tags"]:
        what = "code (a function or an unsafe serializer"
        if "builtins.function" in info["tags"]:
            what = "code (a function made at run time"
        return f"yes (loading runs {what}, no pickle): refused under allow_pickle=False)"
    return "yes (loading runs pickle: refused under allow_pickle=False)"


def format_inspect(info: PayloadInfo, path: str | None = None) -> str:
    """Renders ``freight.inspect``'s result as readable text."""
    lines = [] if path is None else [f"file:            {path}"]
    needs_pickle = info["needs_pickle"]
    lines += [
        f"format version:  {info['format_version']}",
        f"payload size:    {_fmt_bytes(info['total_length'])}",
        f"header size:     {_fmt_bytes(info['header_length'])}",
        f"flags:           {', '.join(info['flags']) or '(none)'}",
        "needs pickle:    " + (_runs(info) if needs_pickle else "no"),
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


def read_payload(path: str) -> Any:
    """The file's bytes (memory-mapped when large, as freight.load does)."""
    try:
        data = _files.read_payload(path)
    except OSError as exc:  # freight.PathError: its text says what to check
        raise CliError(f"{path}: {exc.strerror or exc}") from exc
    if len(data) == 0:
        raise CliError(f"{path}: empty file, not a freight payload")
    return data


def inspect_payload(path: str, data: Any, key: bytes | None = None) -> PayloadInfo:
    reason = not_a_payload(data)
    if reason is not None:
        raise CliError(f"{path}: {reason}")
    try:
        return freight.inspect(data, key=key)
    except freight.FreightError as exc:
        raise CliError(f"{path}: not a valid freight payload: {exc}") from exc


def inspect_file(path: str, key: bytes | None) -> int:
    """``inspect FILE`` (and ``cat FILE``): what the payload in the file holds, not decoded."""
    info = inspect_payload(path, read_payload(path), key)
    print(format_inspect(info, path))
    return 0
