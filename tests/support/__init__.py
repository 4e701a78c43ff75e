"""Helpers shared by the tests, and by the child interpreters some tests start.

``tests/`` is on ``sys.path`` under pytest (pyproject's ``[tool.pytest.ini_options]
pythonpath``), so a test imports these as ``from support.forging import forge``; a child
interpreter gets the same path from :func:`child_env`. Nothing here is a test: pytest collects
only the ``test_*.py`` files of the feature folders.
"""

from __future__ import annotations

import os
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
GOLDEN = TESTS / "golden"


def child_env(**variables: str) -> dict[str, str]:
    """``os.environ`` plus ``variables`` for a child interpreter that imports what the tests
    import (``support``, and the golden cases), as pytest's ``pythonpath`` setting gives them."""
    paths = [str(TESTS), str(GOLDEN)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths), **variables)
