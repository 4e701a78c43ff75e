"""Ray integration: freight for the types where Ray's own serialization does worse.

One line for the user::

    import freight.integrations.ray as fr

    ray.init(runtime_env=fr.runtime_env())   # workers register freight's serializers at start
    fr.install()                             # and this (driver) process

Ray has no whole-object hook: it pickles every object with cloudpickle (protocol 5, out-of-band
buffers in its shared-memory object store) and lets a process route one exact class to other
functions with ``ray.util.register_serializer``. This module registers freight for
:data:`DEFAULT_TYPES`, the classes where freight measured faster end to end (see
docs/integrations/ray.md); never for numpy arrays, whose zero-copy path Ray already has. The
freight payload's frames go to Ray as ``pickle.PickleBuffer`` s, so they travel out of band into
the object store like Ray's own buffers, and are loaded back as views of the object store where
the type allows it (read-only, as Ray's numpy arrays are; torch tensors get their own writable
copy, torch having no read-only tensors).

Registration is per process and only changes how a process *writes* objects of those classes: a
payload names its deserializer (:func:`deserialize`, by reference), so any process with freight
installed reads it, registered or not. ``fr.runtime_env()`` adds a ``worker_process_setup_hook``
that registers in every worker at start (so that results and ``ray.put`` in tasks use freight
too); a worker without freight installed cannot read the payloads (Ray reports the
``ModuleNotFoundError`` for ``freight``).
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Iterable
from typing import Any

import freight
from freight import carrier
from freight.exceptions import FreightError, checks_options
from freight.integrations import require

__all__ = [
    "DEFAULT_TYPES",
    "install",
    "uninstall",
    "installed",
    "runtime_env",
    "setup_worker",
    "serialize",
    "deserialize",
    "RayNotStartedError",
]

#: The classes freight is registered for by default, as ``"module.Class"`` (resolved when their
#: library is importable; the others are skipped). Chosen by measurement (docs/integrations/ray.md):
#: not pandas (Ray's pickle-5 path already ships its blocks out of band, and pandas' Arrow strings
#: too), not pyarrow (same), never numpy.
DEFAULT_TYPES: tuple[str, ...] = (
    "polars.DataFrame",
    "polars.Series",
    "torch.Tensor",
)

#: Below this many bytes, objects of these classes keep their own pickling (inside freight's
#: registration, which Ray gives no way to decline): polars' own IPC pickling is faster on small
#: frames, whose fixed costs dominate; freight's frames win from about this size (measured:
#: docs/integrations/ray.md): the carrier's threshold for ``"ray"`` (``freight.carrier.THRESHOLDS``).
MIN_BYTES: dict[str, int] = dict.fromkeys(("polars.DataFrame", "polars.Series"), carrier.threshold(integration="ray"))
_SIZE = {"polars.DataFrame": "estimated_size", "polars.Series": "estimated_size"}
_FALLBACK = "reduce"

# Environment variables the setup hook reads in the workers (set by runtime_env()).
_ENV_TYPES = "FREIGHT_RAY_TYPES"
_ENV_COMPRESSION = "FREIGHT_RAY_COMPRESSION"

# Frames smaller than this stay in the pickle stream (an out-of-band buffer costs more than a copy):
# the carrier's threshold for "ray-frames".
_INBAND = carrier.threshold(integration="ray-frames")

_LOCK = threading.Lock()
_INSTALLED: dict[type, str] = {}
# What this process writes with: the module-level Freight, or it with install()'s compression.
_CODEC: freight.Freight = freight.DEFAULT


class RayNotStartedError(FreightError, RuntimeError):
    """:func:`install` was called in a process that is not connected to Ray yet."""


def serialize(obj: Any) -> tuple[Any, ...]:
    """freight's payload for ``obj`` as Ray pickles it: the header in band, large frames as
    ``pickle.PickleBuffer`` (out of band: copied once, straight into Ray's object store).
    Objects smaller than their class's :data:`MIN_BYTES` keep their own reduction."""
    name = _INSTALLED.get(type(obj))
    if name in MIN_BYTES and getattr(obj, _SIZE[name])() < MIN_BYTES[name]:
        return _own_reduction(obj)
    frames = _CODEC.dumps_frames(obj)
    return tuple(
        bytes(f) if (i == 0 or memoryview(f).nbytes < _INBAND) else pickle.PickleBuffer(f) for i, f in enumerate(frames)
    )


def deserialize(parts: tuple[Any, ...]) -> Any:
    """Loads what :func:`serialize` wrote; the frames are the object store's buffers (zero copy,
    read-only views where the type allows it)."""
    if parts and parts[0] == _FALLBACK:
        return _reconstruct(*parts[1:])
    return freight.loads_frames([p.raw() if isinstance(p, pickle.PickleBuffer) else p for p in parts], zero_copy=True)


def _own_reduction(obj: Any) -> tuple[Any, ...]:
    """``obj``'s own ``__reduce_ex__(5)`` made picklable (iterators as lists): what pickle would
    have written without the registration."""
    rv = obj.__reduce_ex__(5)
    if isinstance(rv, str):  # a global: pickled by reference anyway
        return (_FALLBACK, _global, (obj,))
    rv = tuple(rv) + (None,) * (6 - len(rv))
    func, args, state, listitems, dictitems, setter = rv
    return (
        _FALLBACK,
        func,
        args,
        state,
        None if listitems is None else list(listitems),
        None if dictitems is None else list(dictitems),
        setter,
    )


def _global(obj: Any) -> Any:
    return obj


def _reconstruct(func: Any, args: Any, state: Any = None, listitems: Any = None, dictitems: Any = None,
                 setter: Any = None) -> Any:  # fmt: skip
    """Rebuilds an object from its reduction, as pickle does."""
    obj = func(*args)
    if state is not None:
        if setter is not None:
            setter(obj, state)
        elif hasattr(obj, "__setstate__"):
            obj.__setstate__(state)
        else:
            slots = None
            if isinstance(state, tuple) and len(state) == 2:
                state, slots = state
            if state:
                obj.__dict__.update(state)
            for k, v in (slots or {}).items():
                setattr(obj, k, v)
    for item in listitems or ():
        obj.append(item)
    for k, v in dictitems or ():
        obj[k] = v
    return obj


def _resolve(types: Iterable[str | type] | None) -> dict[type, str]:
    import importlib

    out: dict[type, str] = {}
    for t in DEFAULT_TYPES if types is None else types:
        if isinstance(t, type):
            out[t] = f"{t.__module__}.{t.__qualname__}"
            continue
        module, _, name = t.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
        except ImportError:
            if types is None:
                continue  # an optional library that is not installed here
            raise
        except AttributeError as e:
            raise TypeError(f"{t!r} names no class") from e
        if not isinstance(cls, type):
            raise TypeError(f"{t!r} is not a class")
        out[cls] = t
    for cls, name in out.items():
        if name in ("numpy.ndarray",) or cls.__module__ == "numpy":
            raise TypeError("freight is never registered for numpy types with Ray: Ray's own path is zero copy")
    return out


@checks_options("freight.integrations.ray.install")
def install(types: Iterable[str | type] | None = None, *, compression: Any = None) -> list[type]:
    """Registers freight with Ray in this process for ``types`` (default :data:`DEFAULT_TYPES`).

    Args:
        types: classes or ``"module.Class"`` names (exact classes: Ray does not look at subclasses).
        compression: freight's ``compression`` for what this process writes (None: off; Ray's
            object store is shared memory, where compression costs more than it saves).

    Returns:
        The classes registered.

    Raises:
        freight.MissingDependencyError: Ray is not installed (``pip install 'freight[ray]'``).
        RayNotStartedError: Ray is not initialized in this process (call ``ray.init()`` first).
    """
    require("ray.util", "ray", "freight.integrations.ray.install()", "Ray")
    import ray
    import ray.util

    if not ray.is_initialized():
        raise RayNotStartedError(
            "freight.integrations.ray.install() needs a connected Ray: call ray.init(...) first "
            "(workers register through ray.init(runtime_env=freight.integrations.ray.runtime_env()))"
        )
    global _CODEC
    # Checks the compression here, not at the first put.
    codec = freight.DEFAULT.replace(compression=compression) if compression is not None else freight.DEFAULT
    resolved = _resolve(types)
    with _LOCK:
        _CODEC = codec
        for cls, name in resolved.items():
            ray.util.register_serializer(cls, serializer=serialize, deserializer=deserialize)
            _INSTALLED[cls] = name
    return list(resolved)


def uninstall() -> None:
    """Gives the registered classes back to Ray's default serialization in this process."""
    require("ray.util", "ray", "freight.integrations.ray.uninstall()", "Ray")
    import ray.util

    with _LOCK:
        for cls in list(_INSTALLED):
            ray.util.deregister_serializer(cls)
            del _INSTALLED[cls]


def installed() -> list[str]:
    """The classes freight is registered for in this process (``"module.Class"``)."""
    return sorted(_INSTALLED.values())


def setup_worker() -> None:
    """The ``worker_process_setup_hook`` of :func:`runtime_env`: registers in a Ray worker, with
    the types and compression the environment variables ``FREIGHT_RAY_TYPES`` (comma-separated
    ``module.Class`` names) and ``FREIGHT_RAY_COMPRESSION`` name."""
    names = os.environ.get(_ENV_TYPES)
    compression = _compression_from_env(os.environ.get(_ENV_COMPRESSION) or None)
    install([n for n in names.split(",") if n] if names else None, compression=compression)


def _compression_to_env(compression: Any) -> str:
    """``"lz4"``, ``("zstd", 9)`` -> ``"zstd:9"``, ``("auto", 1e8)`` -> ``"auto:100000000.0"``: a
    text an environment variable can carry and :func:`_compression_from_env` reads back."""
    if isinstance(compression, tuple):
        name, setting = compression
        return f"{name}:{setting!r}"
    return str(compression)


def _compression_from_env(text: str | None) -> Any:
    if text is None or ":" not in text:
        return text
    name, _, setting = text.partition(":")
    return (name, float(setting) if name == "auto" else int(setting))


@checks_options("freight.integrations.ray.runtime_env")
def runtime_env(
    base: dict[str, Any] | None = None,
    *,
    types: Iterable[str | type] | None = None,
    compression: Any = None,
) -> dict[str, Any]:
    """A ``runtime_env`` for ``ray.init`` (or a job, task or actor) whose workers register freight
    when they start, merged into ``base`` (a copy; its own setup hook is refused).

    Args:
        base: another runtime_env to extend (``env_vars`` are merged).
        types: as for :func:`install`; classes are passed by name.
        compression: as for :func:`install` (``"lz4"``, ``"zstd"``, ``("zstd", 9)``, ...).
    """
    env = dict(base or {})
    hook = "freight.integrations.ray.setup_worker"
    if env.get("worker_process_setup_hook") not in (None, hook):
        raise ValueError(
            "the runtime_env already has a worker_process_setup_hook: call "
            "freight.integrations.ray.setup_worker() from it instead"
        )
    env["worker_process_setup_hook"] = hook
    env_vars = dict(env.get("env_vars") or {})
    if types is not None:
        names = list(_names(types))
        _resolve(names)  # fails here, in the driver, on a bad name or numpy
        env_vars[_ENV_TYPES] = ",".join(names)
    if compression is not None:
        freight.DEFAULT.replace(compression=compression)  # checks it here, in the driver
        env_vars[_ENV_COMPRESSION] = _compression_to_env(compression)
    if env_vars:
        env["env_vars"] = env_vars
    return env


def _names(types: Iterable[str | type]) -> Iterable[str]:
    for t in types:
        yield f"{t.__module__}.{t.__qualname__}" if isinstance(t, type) else t
