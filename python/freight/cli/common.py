"""What every verb of the command line shares: its error (reported on one line, exit status 1),
the signing key file, and how sizes and keys are written."""

from __future__ import annotations

import json

__all__ = ["CliError", "read_key", "fmt_bytes", "quote"]


class CliError(Exception):
    """A failure to report on stderr with exit status 1."""


def read_key(path: str | None) -> bytes | None:
    """The key in a key file (its bytes, as written; a trailing newline is kept out)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            key = fh.read().rstrip(b"\r\n")
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from exc
    if not key:
        raise CliError(f"{path}: the key file is empty; write the signing key into it")
    return key


def fmt_bytes(n: int, exact: bool = True) -> str:
    """``1.5 MiB (1,572,864 bytes)``, or just ``1.5 MiB`` with ``exact=False``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}" + (f" ({n:,} bytes)" if exact else "")
    return f"{n} B"


def quote(key: str) -> str:
    """A key in a message, quoted as the storage errors quote it: ``"run-3/a b"``."""
    return json.dumps(key, ensure_ascii=False)
