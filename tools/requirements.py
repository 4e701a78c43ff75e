"""Prints requirements read from pyproject.toml, one per line, for ``pip install -r``.

pyproject.toml is the one list of freight's dependencies: ``make install`` installs the ``test``
extra from it (with the build backend and freight's own dependencies), and the extras compose
each other (``all = ["freight[numpy,pandas,...]"]``). pip could follow those ``freight[...]``
entries only by installing freight itself; this expands them in place instead, so the printed
list names third-party packages only.

    python tools/requirements.py test            # the test extra, expanded
    python tools/requirements.py --build test    # plus maturin and freight's own dependencies

Runs on Python 3.11+ (tomllib) with nothing installed: it is what installs the rest.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
PROJECT = "freight"
# `freight[a,b]`: a requirement on other extras of this project (no version, no marker).
SELF_REFERENCE = re.compile(rf"^\s*{PROJECT}\s*\[([^\]]+)\]\s*$")


def expand(extras: dict[str, list[str]], name: str, seen: tuple[str, ...] = ()) -> list[str]:
    """The requirements of extra ``name``, with ``freight[...]`` entries replaced by theirs."""
    if name not in extras:
        raise SystemExit(f"pyproject.toml has no extra {name!r}; extras: {', '.join(sorted(extras))}")
    if name in seen:
        raise SystemExit(f"the extras refer to each other in a circle: {' -> '.join((*seen, name))}")
    out: list[str] = []
    for requirement in extras[name]:
        match = SELF_REFERENCE.match(requirement)
        if match is None:
            if requirement.strip().lower().startswith(PROJECT + "["):
                raise SystemExit(f"extra {name!r}: write {requirement!r} as freight[extra,...] (no version, no marker)")
            out.append(requirement)
        else:
            for other in match.group(1).split(","):
                out.extend(expand(extras, other.strip(), (*seen, name)))
    return out


def requirements(names: list[str], build: bool, pyproject: Path = PYPROJECT) -> list[str]:
    """The requirements of extras ``names`` (and of building freight, with ``build``), each once."""
    data = tomllib.loads(pyproject.read_text())
    extras: dict[str, list[str]] = data["project"].get("optional-dependencies", {})
    out: list[str] = []
    if build:
        out += data["build-system"]["requires"] + data["project"].get("dependencies", [])
    for name in names:
        out += expand(extras, name)
    return list(dict.fromkeys(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("extras", nargs="*", help="extras of pyproject.toml's [project.optional-dependencies]")
    parser.add_argument("--build", action="store_true", help="also the build backend and freight's dependencies")
    args = parser.parse_args(argv)
    print("\n".join(requirements(args.extras, args.build)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
