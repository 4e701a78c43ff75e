"""Checks shared by the tests of freight's serializers for third-party libraries."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import freight


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def check_lazy_loading(tmp_path: pathlib.Path, obj: Any, library: str, extra: str, show: str) -> str:
    """Writes ``obj`` to a file, then, in fresh interpreters: (1) ``import freight`` does not
    import ``library`` and loading the file (with allow_pickle=False) imports what it needs;
    returns what ``show`` (an expression over the loaded value ``x``) printed; (2) with the
    library made unimportable, loading raises MissingDependencyError naming the extra."""
    path = tmp_path / "payload.frt"
    freight.dump(obj, path)
    ok = _run(
        f"""
        import sys, freight
        assert {library!r} not in sys.modules, "import freight imported {library}"
        x = freight.load({str(path)!r}, allow_pickle=False)
        print({show})
        """
    )
    assert ok.returncode == 0, ok.stderr
    missing = _run(
        f"""
        import sys
        sys.modules[{library!r}] = None  # as if it were not installed
        import freight
        try:
            freight.load({str(path)!r})
        except freight.MissingDependencyError as exc:
            print(exc)
        """
    )
    assert missing.returncode == 0, missing.stderr
    assert f"pip install 'freight[{extra}]'" in missing.stdout, missing.stdout
    return ok.stdout.strip()


def loaded_without_pickle(obj: Any) -> tuple[Any, Any]:
    """``obj`` loaded back with ``allow_pickle=False`` from ``dumps`` and from ``dumps_frames``,
    after checking that its payload needs no pickle."""
    blob = freight.dumps(obj)
    assert not freight.inspect(blob)["needs_pickle"]
    return freight.loads(blob, allow_pickle=False), freight.loads_frames(freight.dumps_frames(obj), allow_pickle=False)
