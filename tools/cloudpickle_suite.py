"""Runs cloudpickle's own test suite through freight (issue 34): in its test module,
``cloudpickle.dumps`` is ``freight.dumps`` and ``pickle.loads`` / ``cloudpickle.loads`` load
freight payloads (anything else goes to pickle as before).

Run: ``.venv/bin/python tools/cloudpickle_suite.py [--tests DIR] [--wrap] [-- PYTEST ARGS]``

``--tests``: a directory holding cloudpickle's ``tests/``; without it, the sdist of the installed
cloudpickle version is fetched with ``pip download`` (needs the network). cloudpickle 3.1.3's sdist
ships no tests: take them from its repository (``git archive v3.1.2 tests | tar x -C DIR``). The
suite is copied into a temporary directory with a conftest that swaps freight in. ``--wrap``:
each value travels inside a container, so that it is a pickle island of a larger payload rather
than the payload itself. Not part of ``make test``: it takes about a minute and a download.

What fails, and why (2026-11-29, cloudpickle 3.1.3 with the v3.1.2 tests: 13 failed, 228 passed):
the open-file tests, by design (freight refuses open files; tests/core/test_exact_errors.py), and
tests that this harness cannot carry: a payload loaded by plain pickle in a subprocess that has no
freight (``test_import``, ``test_multiprocess``, ``test_logger``, the deterministic round trip,
whose child pickles with cloudpickle itself), ``test_module`` (it compares the swapped-in module
with the real one) and ``test_out_of_band_buffers`` (``buffer_callback`` is cloudpickle's, not
``freight.dumps``').
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version

# The conftest written next to cloudpickle's tests: the swap of freight for cloudpickle.
_CONFTEST = '''
import os
import pickle as _pickle
import types

import cloudpickle as _cp

import freight

WRAP = os.environ.get("FREIGHT_WRAP") == "1"


def _dumps(obj, protocol=None, buffer_callback=None):
    return freight.dumps({"pad": [1, "x"], "value": obj} if WRAP else obj)


def _loads(data, *args, **kwargs):
    if bytes(memoryview(data)[:4]) == b"\\x89FRT":
        out = freight.loads(data)
        return out["value"] if WRAP else out
    return _pickle.loads(data, *args, **kwargs)


class _Shim(types.ModuleType):
    """The real module, with some of its functions replaced."""

    def __init__(self, real, **over):
        super().__init__(real.__name__)
        self._real = real
        self.__dict__.update(over)

    def __getattr__(self, name):
        return getattr(self._real, name)

    def __reduce__(self):
        # A test function that names the module as a global sends it by reference, as it
        # would send the real module: the other side imports its own.
        return (__import__, (self._real.__name__,))


def pytest_collection_modifyitems(session, config, items):
    import tests.cloudpickle_test as m

    m.cloudpickle = _Shim(_cp, dumps=_dumps, loads=_loads)
    m.pickle = _Shim(_pickle, loads=_loads)
'''


def _fetch_tests(into: str) -> str:
    """cloudpickle's tests/ from the sdist of the installed version."""
    wanted = f"cloudpickle=={version('cloudpickle')}"
    pip = [sys.executable, "-m", "pip", "download", wanted, "--no-deps", "--no-binary", ":all:", "-d", into]
    subprocess.run(pip, check=True, stdout=subprocess.DEVNULL)
    (sdist,) = (f for f in os.listdir(into) if f.endswith(".tar.gz"))
    with tarfile.open(os.path.join(into, sdist)) as tar:
        tar.extractall(into, filter="data")
    (root,) = (d for d in os.listdir(into) if os.path.isdir(os.path.join(into, d)))
    if not os.path.isdir(os.path.join(into, root, "tests")):
        sys.exit(
            f"the sdist of {wanted} holds no tests/ (cloudpickle 3.1.3's does not): pass --tests with a "
            "checkout of https://github.com/cloudpipe/cloudpickle at the matching tag (git archive vX.Y.Z tests)"
        )
    return os.path.join(into, root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", help="a directory holding cloudpickle's tests/ (default: pip download the sdist)")
    parser.add_argument("--wrap", action="store_true", help="each value inside a container (a pickle island)")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cloudpickle-suite-") as tmp:
        source = args.tests or _fetch_tests(os.path.join(tmp, "sdist"))
        suite = os.path.join(tmp, "suite")
        shutil.copytree(os.path.join(source, "tests"), os.path.join(suite, "tests"))
        with open(os.path.join(suite, "tests", "conftest.py"), "w") as f:
            f.write(_CONFTEST)
        env = {**os.environ, "FREIGHT_WRAP": "1" if args.wrap else "0"}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/cloudpickle_test.py"]
        return subprocess.run([*command, *args.pytest_args], cwd=suite, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
