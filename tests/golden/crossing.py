"""Writes and checks version-crossing payloads (the cases of ``crossing_cases.py``), under either
environment:

    python tests/golden/crossing.py write DIR   # DIR/<case>.frt and DIR/expected.json
    python tests/golden/crossing.py check DIR   # prints a JSON report: {case: problem or null}
                                                # (under pandas 2, again with future.infer_string)

``tests/golden/old/`` was written once under ``.venv-old`` (numpy 1.26, pandas 2.2, pyarrow 17,
polars 1; ``make old-versions``, then ``PYTHONPATH=python .venv-old/bin/python
tests/golden/crossing.py write tests/golden/old``); ``write`` keeps files that exist, as the
other golden folders do. ``tests/golden/test_versions_crossing.py`` checks them under ``.venv``,
and runs ``check`` under ``.venv-old`` on payloads ``.venv`` writes.

``expected.json`` holds the writer's versions and each case's description (``describe``): what
the reader must get back, or, where the case's ``refused`` names a library for these two
versions, a ``ProducerVersionError`` naming that library and both of its versions.
"""

from __future__ import annotations

import json
import pathlib
import sys
import warnings
from typing import Any

import freight

# Run as a script, its own folder is on sys.path (and under pytest, pyproject's pythonpath puts it there).
from crossing_cases import CASES, Unavailable, describe

LIBRARIES = ("numpy", "pandas", "pyarrow", "polars")


def versions() -> dict[str, str]:
    return {name: __import__(name).__version__ for name in LIBRARIES}


def write(folder: pathlib.Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    manifest_path = folder / "expected.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"cases": {}}
    if manifest.get("versions", versions()) != versions():
        raise SystemExit(f"{folder} was written by {manifest['versions']}, this is {versions()}")
    manifest["versions"] = versions()
    for name, case in CASES.items():
        path = folder / f"{name}.frt"
        if path.exists():
            continue
        try:
            value = case.make()
        except Unavailable:
            continue
        path.write_bytes(freight.dumps(value))
        manifest["cases"][name] = describe(value)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return manifest


def check(folder: pathlib.Path) -> dict[str, str | None]:
    """Loads every payload of ``folder``; for each case, None when it kept its promise, else
    what went wrong."""
    manifest = json.loads((folder / "expected.json").read_text())
    return {name: check_case(folder, name, manifest) for name in manifest["cases"]}


def check_case(folder: pathlib.Path, name: str, manifest: dict[str, Any]) -> str | None:
    writer, reader = manifest["versions"], versions()
    data = (folder / f"{name}.frt").read_bytes()
    refused_by = CASES[name].refused(writer, reader) if CASES[name].refused else None
    return _check_one(data, manifest["cases"][name], refused_by, writer, reader)


def _check_one(data: bytes, want: Any, refused_by: str | None, writer: dict, reader: dict) -> str | None:
    try:
        with warnings.catch_warnings():
            # A crossing freight promises loads quietly (no "another major version" warning).
            warnings.simplefilter("error", freight.FreightWarning)
            got = freight.loads(data)
    except freight.ProducerVersionError as exc:
        if refused_by is None:
            return f"refused: {type(exc).__name__}: {exc}"
        text = str(exc)
        for needle in (refused_by, writer[refused_by], reader[refused_by]):
            if needle not in text:
                return f"the refusal does not name {needle!r}: {text}"
        return None
    except Exception as exc:  # noqa: BLE001 - reported, with its class
        return f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    if refused_by is not None:
        return f"loaded, but {refused_by} {writer[refused_by]} -> {reader[refused_by]} must refuse it"
    try:
        got_description = describe(got)
    except Exception as exc:  # noqa: BLE001
        return f"loaded a value that cannot be described: {type(exc).__name__}: {exc}"
    if got_description != want:
        return f"loaded {json.dumps(got_description, ensure_ascii=False)}, wrote {json.dumps(want, ensure_ascii=False)}"
    return None


def main() -> None:
    command, folder = sys.argv[1], pathlib.Path(sys.argv[2])
    if command == "write":
        write(folder)
    elif command == "check":
        out: dict[str, Any] = {"versions": versions(), "report": check(folder)}
        import pandas as pd

        if int(pd.__version__.split(".")[0]) < 3:
            # pandas 2 users who opted into pandas 3's strings read the same payloads
            pd.set_option("future.infer_string", True)
            out["infer_string"] = check(folder)
        print(json.dumps(out))
    else:
        raise SystemExit(f"unknown command {command!r}: write or check")


if __name__ == "__main__":
    main()
