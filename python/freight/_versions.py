"""The producer-version policy. A payload records the versions of what wrote it: Python and
cloudpickle when it holds pickled parts (code objects and pickled classes are specific to a
Python minor version), and each library whose serializer it uses (``pandas 3.1.1``). Loading
compares them with this process, once per payload, before decoding:

* a library of another **major** version (pandas 2 vs 3, polars 0 vs 1), or pickled parts written
  by another **Python minor** version: a :class:`freight.FreightWarning` naming both versions,
  or, with ``strict_versions=True``, a :class:`freight.ProducerVersionError`;
* anything else (minor library versions, cloudpickle): nothing, since freight's serializers
  write version-independent layouts.
"""

from __future__ import annotations

import importlib.metadata
import sys
import warnings

from freight.exceptions import FreightWarning, ProducerVersionError

_INSTALLED: dict[str, str | None] = {}
_IGNORED = frozenset({"cloudpickle"})


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


def check(versions: list[tuple[str, str]], strict: bool) -> None:
    """Warns (or raises, when ``strict``) about producer versions that matter; see the module."""
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
        if here is not None and _major(here) != _major(written):
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
