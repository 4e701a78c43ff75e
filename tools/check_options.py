"""Checks every place that names the codec's options against their one declaration,
``freight._options.OPTIONS`` (``make lint``; tests/core/test_option_table.py).

The places: the extension's signatures (``Codec.__new__`` takes every per-instance option, in its
``#[pyo3(signature)]``; the dumps calls and the loads calls take theirs, from the table of
crates/freight-py/src/call_options.rs, which writes their ``__text_signature__`` and parses their
calls), ``FreightOptions`` (its fields, and its defaults
against the table's), ``Freight``'s own signature and defaults, the stubs of those methods
(python/freight/_freight.pyi) and the options table of docs/guide/options.md (its names and
which calls take each). An option declared in one place and not another fails with a line that
says where and what to do.

    python tools/check_options.py        # exit 1 and the findings on stderr when any
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STUBS = ROOT / "python" / "freight" / "_freight.pyi"
DOCS = ROOT / "docs" / "guide" / "options.md"
METHODS = {
    "__new__": None,  # every per-instance option
    "dumps": "dumps",
    "dumps_frames": "dumps",
    "_dumps_parts": "dumps",
    "loads": "loads",
    "loads_frames": "loads",
}
FIX = "declare it in python/freight/_options.py and in every place this checker lists"


def _keywords(text_signature: str) -> list[str]:
    inside = text_signature.strip()[1:-1]
    return [part.split("=")[0].strip() for part in inside.split(",") if "=" in part]


def _stub_keywords(stubs: str) -> dict[str, list[str]]:
    tree = ast.parse(stubs)
    (codec,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Codec"]
    return {
        node.name: [arg.arg for arg in node.args.kwonlyargs]
        for node in codec.body
        if isinstance(node, ast.FunctionDef) and node.name in METHODS
    }


def _docs_rows(docs: str) -> dict[str, str]:
    """Option name -> the "of" column of the docs' options table."""
    rows = {}
    for line in docs.splitlines():
        match = re.match(r"\|\s*`(\w+)`\s*\|\s*`?(\w+)`?\s*\|", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def problems(options: Sequence[Any] | None = None, stubs: str | None = None, docs: str | None = None) -> list[str]:
    """Every disagreement with the declaration (``options``: the table, by default freight's)."""
    import freight
    from freight._freight import Codec
    from freight._options import OPTIONS

    options = OPTIONS if options is None else options
    stubs = STUBS.read_text() if stubs is None else stubs
    docs = DOCS.read_text() if docs is None else docs
    instance = [o.name for o in options if o.per_instance]
    wanted = {
        m: instance if call is None else [o.name for o in options if o.calls in (call, "both")]
        for m, call in METHODS.items()
    }
    found: list[str] = []

    def compare(where: str, have: Sequence[str], want: Sequence[str]) -> None:
        for name in sorted(set(want) - set(have)):
            found.append(f"{where}: does not take the declared option {name!r}; {FIX}")
        for name in sorted(set(have) - set(want)):
            found.append(f"{where}: takes {name!r}, which python/freight/_options.py does not declare; {FIX}")

    for method in METHODS:
        owner = Codec if method == "__new__" else getattr(Codec, method)  # #[new]'s is the class's
        signature = owner.__text_signature__ or "()"
        where = (
            "crates/freight-py/src/codec.rs Codec.__new__ (its #[pyo3(signature)])"
            if method == "__new__"
            else f"crates/freight-py/src/call_options.rs Codec.{method} (the options its table gives it)"
        )
        compare(where, _keywords(signature), wanted[method])
    stub = _stub_keywords(stubs)
    for method in METHODS:
        compare(f"python/freight/_freight.pyi Codec.{method}", stub.get(method, []), wanted[method])
    compare("freight.FreightOptions", list(freight.FreightOptions.NAMES), instance)
    parameters = inspect.signature(freight.Freight).parameters
    compare("freight.Freight's signature", [p for p in parameters if p != "registry"], instance)
    plain = freight.FreightOptions()
    for option in options:
        if not option.per_instance:
            continue
        if option.name in parameters and parameters[option.name].default != option.default:
            found.append(
                f"freight.Freight's signature: {option.name}={parameters[option.name].default!r}, declared "
                f"{option.default!r}; make them agree"
            )
        if option.name in freight.FreightOptions.NAMES and getattr(plain, option.name) != option.default:
            found.append(
                f"freight.FreightOptions(): {option.name} is {getattr(plain, option.name)!r}, declared "
                f"{option.default!r}; make them agree"
            )
    rows = _docs_rows(docs)
    compare("docs/guide/options.md's options table", list(rows), [o.name for o in options])
    for option in options:
        if option.name in rows and rows[option.name] != option.calls:
            found.append(
                f"docs/guide/options.md: {option.name!r} is an option of {rows[option.name]!r} there, of "
                f"{option.calls!r} in python/freight/_options.py; make them agree"
            )
    return found


def main() -> int:
    found = problems()
    for line in found:
        print(line, file=sys.stderr)
    if found:
        print(f"check_options: {len(found)} finding(s)", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
