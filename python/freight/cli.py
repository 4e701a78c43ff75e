"""The ``freight`` command line (also ``python -m freight``).

Subcommands::

    freight demo [--store DIR]   run a mixed workload through a local folder store and compare
                                 it with pickle and cloudpickle
    freight inspect FILE         describe a payload without decoding it
    freight verify FILE          check the header and every frame checksum without decoding
    freight bench [--quick] [--json PATH] [other bench_core.py options]
                                 run benchmarks/bench_core.py (source checkouts only)

Exit status: 0 on success, 1 when a file is not a valid freight payload or fails verification,
2 on a usage error.
"""

from __future__ import annotations

import argparse
import mmap
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

__all__ = ["main"]


# --------------------------------------------------------------------------------------------
# Reading a file and inspecting it
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
        raise _CliError(f"{path}: the key file is empty")
    return key


def _read_and_inspect(path: str, key: bytes | None = None) -> dict[str, Any]:
    """``freight.inspect`` of the file's bytes (memory-mapped when possible)."""
    import freight

    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                raise _CliError(f"{path}: empty file, not a freight payload")
            try:
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):
                mm = None
            if mm is None:
                data: Any = fh.read()
                return _inspect(freight, data, path, key)
            try:
                try:
                    return _inspect(freight, mm, path, key)
                except TypeError:
                    # This build does not take mmap objects: fall back to bytes.
                    return _inspect(freight, mm[:], path, key)
            finally:
                try:
                    mm.close()
                except BufferError:
                    pass  # a result still references it; the OS unmaps it when freed
    except OSError as exc:
        raise _CliError(f"{path}: {exc.strerror or exc}") from exc


def _inspect(freight: Any, data: Any, path: str, key: bytes | None = None) -> dict[str, Any]:
    try:
        info = freight.inspect(data, key=key)
    except freight.FreightError as exc:
        raise _CliError(f"{path}: not a valid freight payload: {exc}") from exc
    if not isinstance(info, dict):  # defensive: the API promises a dict
        info = {"info": info}
    return info


# --------------------------------------------------------------------------------------------
# Formatting an inspect dict. Key names are looked up under a few spellings, so the CLI keeps
# working if the dict grows; keys it does not know are printed generically at the end.
# --------------------------------------------------------------------------------------------

_VERSION_KEYS = ("format_version", "version")
_FLAG_KEYS = ("flags",)
_NEEDS_PICKLE_KEYS = ("needs_pickle",)
_TAG_KEYS = ("tags",)
_PRODUCER_KEYS = ("producer_versions", "versions", "producer")
_FRAME_KEYS = ("frames",)
_TREE_KEYS = ("tree", "summary", "tree_summary")
_SIZE_KEYS = ("total_length", "size", "total_size", "nbytes", "length", "payload_size")
_HEADER_KEYS = ("header_length", "header_size", "header_len")


def _first(d: dict[str, Any], keys: Iterable[str], default: Any = None) -> tuple[str | None, Any]:
    for k in keys:
        if k in d:
            return k, d[k]
    return None, default


def _fmt_bytes(n: Any, exact: bool = True) -> str:
    """``1.5 MiB (1,572,864 bytes)``, or just ``1.5 MiB`` with ``exact=False``."""
    if not isinstance(n, int) or isinstance(n, bool):
        return str(n)
    if n < 1024:
        return f"{n} B"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}" + (f" ({n:,} bytes)" if exact else "")
    return f"{n} B"


def _fmt_scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if v is None:
        return "-"
    return str(v)


def _flags_text(flags: Any) -> str:
    if isinstance(flags, dict):
        on = [k.replace("_", "-") for k, v in flags.items() if v is True]
        other = [f"{k}={v}" for k, v in flags.items() if not isinstance(v, bool)]
        return ", ".join(on + other) or "(none)"
    if isinstance(flags, (list, tuple, set, frozenset)):
        return ", ".join(str(f).replace("_", "-") for f in flags) or "(none)"
    if isinstance(flags, int) and not isinstance(flags, bool):
        names = {1: "needs-pickle", 2: "frames", 4: "meta", 8: "signed"}
        on = [name for bit, name in names.items() if flags & bit]
        unknown = flags & ~0xF
        if unknown:
            on.append(f"unknown bits 0x{unknown:x}")
        return f"0x{flags:02x} ({', '.join(on) or 'none'})"
    return _fmt_scalar(flags)


def _frame_size(f: dict[str, Any]) -> Any:
    for k in ("length", "raw_length", "raw_len", "size", "raw_size", "nbytes"):
        if k in f:
            return f[k]
    return None


def _derived_flags(info: dict[str, Any]) -> str:
    """The preamble's flags, from the inspect dict's individual fields."""
    on = []
    if _needs_pickle(info):
        on.append("needs-pickle")
    if info.get("frames"):
        on.append("frames")
    if info.get("tags") or info.get("producer") or info.get("producer_versions") or info.get("versions"):
        on.append("meta")
    if info.get("signed"):
        on.append("signed")
    return ", ".join(on) or "(none)"


def _needs_pickle(info: dict[str, Any]) -> bool | None:
    _, v = _first(info, _NEEDS_PICKLE_KEYS)
    if isinstance(v, bool):
        return v
    flags = info.get("flags")
    if isinstance(flags, dict):
        for k in ("needs_pickle", "needs-pickle", "NEEDS_PICKLE"):
            if k in flags:
                return bool(flags[k])
    if isinstance(flags, (list, tuple, set, frozenset)):
        norm = {str(f).lower().replace("-", "_") for f in flags}
        return "needs_pickle" in norm
    if isinstance(flags, int) and not isinstance(flags, bool):
        return bool(flags & 1)
    return None


def _frame_status(frame: Any) -> tuple[str, bool | None]:
    """(text, ok) for one frame's checksum: ok is True (matches), False (mismatch or error) or
    None (no checksum stored, so nothing to verify)."""
    if not isinstance(frame, dict):
        return "?", None
    for k in ("checksum_ok", "checksum_valid", "checksum_matches", "verified", "valid", "ok", "matches"):
        if k in frame:
            v = frame[k]
            if v is None:
                return "no checksum", None
            return ("ok" if v else "MISMATCH"), bool(v)
    status = frame.get("checksum_status", frame.get("status"))
    if status is not None:
        s = str(status).lower()
        if s in ("ok", "match", "matches", "valid", "verified", "good", "pass", "passed"):
            return str(status), True
        if s in ("none", "absent", "missing", "no checksum", "unchecked", "not checked", "no_checksum", "skipped"):
            return str(status), None
        return str(status).upper(), False
    if frame.get("error"):
        return f"ERROR: {frame['error']}", False
    cs = frame.get("checksum")
    if cs is None:
        return "no checksum", None
    return "stored, not checked", None


def _frame_rows(frames: list[Any]) -> tuple[list[str], list[list[str]]]:
    headers = ["#", "offset", "size", "stored", "codec", "checksum", "status"]
    rows = []
    for i, f in enumerate(frames):
        if not isinstance(f, dict):
            rows.append([str(i), "", str(f), "", "", "", ""])
            continue
        idx = f.get("index", i)
        raw = _frame_size(f)
        stored = f.get("stored_length", f.get("stored_len", f.get("stored_size", raw)))
        offset = f.get("offset")
        codec = f.get("codec", "")
        cs = f.get("checksum")
        if isinstance(cs, int) and not isinstance(cs, bool):
            cs_text = f"{cs:016x}"
        else:
            cs_text = _fmt_scalar(cs) if cs is not None else "-"
        status, _ = _frame_status(f)
        rows.append(
            [
                str(idx),
                str(offset) if offset is not None else "",
                _fmt_bytes(raw, exact=False) if raw is not None else "?",
                _fmt_bytes(stored, exact=False) if stored != raw and stored is not None else "",
                _fmt_scalar(codec) if codec not in ("", None, 0, "none") else "",
                cs_text,
                status,
            ]
        )
    # Drop columns that are empty everywhere (stored == size, no codec).
    keep = [c for c in range(len(headers)) if c in (0, 2) or any(r[c] for r in rows) or headers[c] in ("checksum", "status")]
    return [headers[c] for c in keep], [[r[c] for c in keep] for r in rows]


def _table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    out = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    out.append(indent + "  ".join("-" * w for w in widths))
    for r in rows:
        out.append(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return out


def _kv_lines(d: Any, indent: str = "  ") -> list[str]:
    if isinstance(d, dict):
        if not d:
            return [indent + "(none)"]
        w = max(len(str(k)) for k in d)
        lines = []
        for k, v in d.items():
            if isinstance(v, dict) and v:
                lines.append(f"{indent}{str(k)}:")
                lines.extend(_kv_lines(v, indent + "  "))
            else:
                lines.append(f"{indent}{str(k).ljust(w)}  {_fmt_value(v)}")
        return lines
    if isinstance(d, (list, tuple)):
        if not d:
            return [indent + "(none)"]
        return [f"{indent}{_fmt_value(v)}" for v in d]
    return [indent + _fmt_value(d)]


def _fmt_value(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt_value(x)}" for k, x in v.items()) or "(none)"
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt_value(x) for x in v) or "(none)"
    return _fmt_scalar(v)


def format_inspect(info: dict[str, Any], path: str | None = None) -> str:
    """Renders ``freight.inspect``'s dict as readable text."""
    used: set[str] = set()
    lines: list[str] = []
    if path is not None:
        lines.append(f"file:            {path}")

    k, version = _first(info, _VERSION_KEYS)
    if k:
        used.add(k)
        lines.append(f"format version:  {version}")
    k, size = _first(info, _SIZE_KEYS)
    if k:
        used.add(k)
        lines.append(f"payload size:    {_fmt_bytes(size)}")
    k, hsize = _first(info, _HEADER_KEYS)
    if k:
        used.add(k)
        lines.append(f"header size:     {_fmt_bytes(hsize)}")
    k, flags = _first(info, _FLAG_KEYS)
    if k:
        used.add(k)
        lines.append(f"flags:           {_flags_text(flags)}")
    else:
        lines.append(f"flags:           {_derived_flags(info)}")
    np_ = _needs_pickle(info)
    k, _ = _first(info, _NEEDS_PICKLE_KEYS)
    if k:
        used.add(k)
    if np_ is not None:
        lines.append(
            "needs pickle:    "
            + ("yes (loading runs pickle: refused under allow_pickle=False)" if np_ else "no (safe to load)")
        )
    for key in ("header_checksum", "header_checksum_ok", "signed", "signature_ok"):
        if key in info:
            used.add(key)
            lines.append(f"{key.replace('_', ' ') + ':':<17}{_fmt_scalar(info[key])}")

    k, tags = _first(info, _TAG_KEYS)
    if k:
        used.add(k)
        lines.append("serializer tags:")
        lines.extend(_kv_lines(tags) if tags else ["  (none)"])
    k, producers = _first(info, _PRODUCER_KEYS)
    if k:
        used.add(k)
        lines.append("producer versions:")
        lines.extend(_kv_lines(producers) if producers else ["  (none)"])

    k, frames = _first(info, _FRAME_KEYS)
    if k:
        used.add(k)
        if isinstance(frames, (list, tuple)):
            total = 0
            for f in frames:
                if isinstance(f, dict):
                    raw = _frame_size(f)
                    if isinstance(raw, int):
                        total += raw
            lines.append(f"frames:          {len(frames)}" + (f", {_fmt_bytes(total)} in all" if frames else ""))
            if frames:
                headers, rows = _frame_rows(list(frames))
                lines.extend(_table(headers, rows))
        else:
            lines.append(f"frames:          {_fmt_value(frames)}")

    k, tree = _first(info, _TREE_KEYS)
    if k:
        used.add(k)
        lines.append("node tree:")
        lines.extend(_kv_lines(tree))

    rest = {k: v for k, v in info.items() if k not in used}
    if rest:
        lines.append("other:")
        lines.extend(_kv_lines(rest))
    return "\n".join(lines)


def check_frames(info: dict[str, Any]) -> tuple[list[str], int, int]:
    """(failures, frames checked, frames without checksum) from an inspect dict."""
    failures: list[str] = []
    for key in ("header_checksum_ok", "checksum_ok", "valid", "ok"):
        if info.get(key) is False:
            failures.append(f"{key.replace('_', ' ')}: false")
    _, tree = _first(info, _TREE_KEYS)
    if isinstance(tree, dict) and tree.get("ok") is False:
        failures.append(f"node tree is malformed: {tree.get('error', 'walk failed')}")
    errors = info.get("errors")
    if errors:
        failures.extend(str(e) for e in (errors if isinstance(errors, (list, tuple)) else [errors]))
    _, frames = _first(info, _FRAME_KEYS, [])
    checked = unchecked = 0
    if isinstance(frames, (list, tuple)):
        for i, f in enumerate(frames):
            text, ok = _frame_status(f)
            idx = f.get("index", i) if isinstance(f, dict) else i
            if ok is True:
                checked += 1
            elif ok is False:
                failures.append(f"frame {idx}: checksum {text}")
            else:
                unchecked += 1
    return failures, checked, unchecked


# --------------------------------------------------------------------------------------------
# Subcommands
# --------------------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    from freight import demo

    rc = demo.main(args.store)
    return int(rc or 0)


def _cmd_inspect(args: argparse.Namespace) -> int:
    info = _read_and_inspect(args.file, _read_key(args.key_file))
    print(format_inspect(info, args.file))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    key = _read_key(args.key_file)
    info = _read_and_inspect(args.file, key)
    failures, checked, unchecked = check_frames(info)
    if key is not None and not info.get("signed"):
        failures.append("not signed, but a key was given")
    elif key is not None and info.get("signature_ok") is not True:
        failures.append("signature does not match the key (tampered with, or signed with another key)")
    if failures:
        for f in failures:
            print(f"{args.file}: {f}", file=sys.stderr)
        print(f"{args.file}: FAILED ({len(failures)} problem{'s' if len(failures) != 1 else ''})", file=sys.stderr)
        return 1
    total = checked + unchecked
    if total == 0:
        detail = "header ok, no frames"
    else:
        detail = f"header ok, {checked}/{total} frame checksum{'s' if total != 1 else ''} ok"
    if key is not None:
        detail += ", signature ok"
    if unchecked:
        detail += f", {unchecked} frame{'s' if unchecked != 1 else ''} without a checksum (not verifiable)"
    print(f"{args.file}: OK ({detail})")
    return 0


def _find_bench_script() -> Path | None:
    here = Path(__file__).resolve()
    candidates = [here.parents[2] / "benchmarks" / "bench_core.py"]
    # A source checkout with the package installed elsewhere: try the working directory too.
    candidates.append(Path.cwd() / "benchmarks" / "bench_core.py")
    for c in candidates:
        if c.is_file() and (c.parent.parent / "pyproject.toml").is_file():
            return c
    return None


def _cmd_bench(args: argparse.Namespace) -> int:
    script = _find_bench_script()
    if script is None:
        print(
            "freight bench: the benchmarks are only available from a source checkout "
            "(run it from the repository root, or `python benchmarks/bench_core.py` there)",
            file=sys.stderr,
        )
        return 1
    cmd = [sys.executable, str(script)]
    if args.quick:
        cmd.append("--quick")
    if args.json:
        cmd += ["--json", args.json]
    cmd += args.extra
    return subprocess.call(cmd, cwd=str(script.parent.parent))


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

    p = sub.add_parser("inspect", help="describe a payload file without decoding it")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--key-file", metavar="PATH", help="also check the signature with the key in this file")
    p.set_defaults(func=_cmd_inspect)

    p = sub.add_parser("verify", help="check a payload file's header and frame checksums without decoding it")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--key-file", metavar="PATH", help="also require a valid signature under the key in this file")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("bench", help="run the core benchmarks (source checkouts only)")
    p.add_argument("--quick", action="store_true", help="smaller array, fewer repetitions")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.set_defaults(func=_cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if getattr(args, "command", None) != "bench":
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.extra = extra  # passed through to bench_core.py (e.g. --cases ab, --strict)
    else:
        args.extra = []
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except _CliError as exc:
        print(f"freight {args.command}: {exc}", file=sys.stderr)
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
