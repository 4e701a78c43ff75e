"""The producer-version policy. A payload records the versions of what wrote it: Python and
cloudpickle when it holds pickled parts (code objects and pickled classes are specific to a
Python minor version), and each library whose serializer it uses (``pandas 3.1.1``). Loading
compares them with this process, once per payload, before decoding:

* a **promised crossing** (:data:`PROMISED`: numpy 1.26 <-> 2, pandas 2.2 <-> 3, pyarrow from 15
  on, polars 1 <-> 2, both ways): nothing. freight's serializers write layouts both
  generations read, and ``tests/golden/test_versions_crossing.py`` checks every case both ways;
  what one generation truly cannot hold (a dtype the older library lacks) raises a
  :class:`freight.ProducerVersionError` from the serializer (:func:`refusal`), naming the
  library, both versions and what to do;
* another **major** version outside those (pandas 3 vs 4, say), or pickled parts written by
  another **Python minor** version: a :class:`freight.FreightWarning` naming both versions, or,
  with ``strict_versions=True``, a :class:`freight.ProducerVersionError`;
* anything else (minor library versions, cloudpickle): nothing.

The versions of the payload being loaded are kept for this thread (:func:`written`), so that a
serializer that meets what this generation cannot hold can name the writer's version.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import threading
import warnings

from freight.exceptions import FreightWarning, ProducerVersionError

_INSTALLED: dict[str, str | None] = {}
_IGNORED = frozenset({"cloudpickle"})

#: The crossings freight promises, by library: the oldest version (major, minor) and the
#: majors between which payloads load, both ways, with equal values (tested against numpy
#: 1.26, pandas 2.2, pyarrow 17 and polars 1.44 in ``.venv-old``). pyarrow's majors follow its
#: release calendar, not its formats (the Arrow C data interface is stable): any from 15 on.
PROMISED: dict[str, tuple[tuple[int, int], frozenset[int] | None]] = {
    "numpy": ((1, 26), frozenset({1, 2})),
    "pandas": ((2, 2), frozenset({2, 3})),
    "pyarrow": ((15, 0), None),
    "polars": ((1, 0), frozenset({1, 2})),
}

_loading = threading.local()


def _installed(name: str) -> str | None:
    if name not in _INSTALLED:
        module = sys.modules.get(name)
        version = getattr(module, "__version__", None) if module is not None else None
        if not isinstance(version, str):
            try:
                version = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                version = None
        _INSTALLED[name] = version
    return _INSTALLED[name]


def _major(version: str) -> str:
    return version.split(".", 1)[0]


def _numbers(version: str) -> tuple[int, int] | None:
    """(major, minor) of "3.0.0rc1", "2.2.3", "26.0.1"; None for what is not a version."""
    found = re.match(r"(\d+)(?:\.(\d+))?", version)
    return (int(found.group(1)), int(found.group(2) or 0)) if found else None


def promised(name: str, written: str, here: str) -> bool:
    """Whether freight promises that ``name``'s payloads cross between these two versions."""
    rule = PROMISED.get(name)
    if rule is None:
        return False
    oldest, majors = rule
    for version in (_numbers(written), _numbers(here)):
        if version is None or version < oldest or (majors is not None and version[0] not in majors):
            return False
    return True


def check(versions: list[tuple[str, str]], strict: bool) -> None:
    """Warns (or raises, when ``strict``) about producer versions that matter; see the module.
    Keeps ``versions`` for :func:`written` (called once per payload, before it is decoded)."""
    _loading.versions = dict(versions)
    problems = []
    for name, written in versions:
        if name in _IGNORED:
            continue
        if name == "python":
            here = f"{sys.version_info.major}.{sys.version_info.minor}"
            if written != here:
                problems.append(f"its pickled parts were written by Python {written}, and this is Python {here}")
            continue
        here = _installed(name)
        if here is not None and _major(here) != _major(written) and not promised(name, written, here):
            problems.append(f"it was written with {name} {written}, and this process has {name} {here}")
    if not problems:
        return
    text = "; ".join(problems)
    if strict:
        raise ProducerVersionError(
            f"refusing the payload: {text} (strict_versions=True); load it where the versions match, or "
            "without strict_versions to get a warning instead"
        )
    warnings.warn(f"freight: {text}; loading may fail or give different values", FreightWarning, stacklevel=3)


def written(name: str) -> str | None:
    """The version of ``name`` that wrote the payload this thread is loading, if it recorded one."""
    return getattr(_loading, "versions", {}).get(name)


def versions_text(name: str) -> str:
    """The versions of ``name`` for error messages: "written with pandas 3.1.1, and this process has pandas 2.2.3"."""
    writer = written(name)
    here = _installed(name) or "none"
    if writer is None:
        return f"written with a {name} version it did not record, and this process has {name} {here}"
    return f"written with {name} {writer}, and this process has {name} {here}"


def refusal(name: str, what: str, todo: str) -> ProducerVersionError:
    """The error for a value this version of ``name`` cannot hold: ``what`` cannot load, the
    versions, and ``todo`` (what the user can do)."""
    return ProducerVersionError(f"{what}: the payload was {versions_text(name)}; {todo}")


def differs(name: str) -> bool:
    """Whether the payload being loaded was written by another version of ``name`` than this
    process's (a failure to decode it is then reported with both versions)."""
    writer = written(name)
    return writer is not None and writer != _installed(name)


def failed_crossing(name: str, tag: str, exc: BaseException) -> ProducerVersionError | None:
    """The error for a ``tag`` payload of ``name`` that failed to decode (``exc``) when another
    version of ``name`` wrote it: the difference is then the likely cause, and the user needs
    both versions to act. None when the versions are the same (a corrupt payload, say)."""
    if isinstance(exc, ProducerVersionError) or not differs(name):
        return None
    writer, here = written(name) or "?", _installed(name) or "none"
    if promised(name, writer, here):
        todo = (
            f"freight promises this crossing ({name} {writer} -> {here}), so please report it as a freight bug; "
            f"meanwhile load it where {name} {writer} is installed"
        )
    else:
        todo = f"freight does not promise this crossing: load it where {name} {writer} is installed"
    return ProducerVersionError(f"a {tag} could not load ({exc}): the payload was {versions_text(name)}; {todo}")


def pickle_refusal(exc: BaseException) -> ProducerVersionError | None:
    """For the pickle bridge: an import failure (``exc``: a missing module or attribute) inside
    a library whose recorded writer version differs from this process's, as the error naming
    both versions; None otherwise. ``Can't get attribute 'X' on <module 'numpy.core._internal'``
    is numpy 2's pickle of a StringDType array met by numpy 1."""
    module = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    if not module:
        text = str(exc)
        start = text.find("<module '")
        module = text[start + 9 : text.find("'", start + 9)] if start >= 0 else None
    if not module:
        return None
    name = module.split(".", 1)[0]
    if not differs(name):
        return None
    return refusal(
        name,
        f"the payload's pickled part needs what this {name} lacks ({type(exc).__name__}: {exc})",
        f"load it where {name} {written(name)} is installed, or convert the value to types both versions have "
        "before sending",
    )
