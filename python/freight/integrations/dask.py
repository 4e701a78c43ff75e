"""Dask distributed integration: freight as a serialization family and per-type serializer.

One line on the client::

    import freight.integrations.dask as fd

    client = Client(cluster)
    fd.install(client)  # the client, the scheduler and every worker, now and later ones

What it does, and why in two ways (from distributed's own code, 2026.8):

1. **A family named "freight"** (``register_serialization_family``): its ``dumps`` returns a
   msgpack-able header and freight's frames (``dumps_frames``: views of the objects' memory, no
   copy) and its ``loads`` takes them back with ``loads_frames``, which views the frames Dask hands
   over without copying when they are writable (Dask reads messages into writable buffers). A
   family reaches only the messages whose ``serializers`` name it: the client's scatter, gather
   and the results it receives. :func:`install` puts "freight" first there. What freight cannot
   encode, whatever it raises, is passed on to the next family (``NotImplementedError``, the
   only exception Dask passes on), and so are the types Dask has a handler for and freight no
   encoding of its own (a user's ``dask_serialize``, torch's ``Module``), torch tensors with
   a ``.grad`` (Dask's handler sends it; freight's does not), and numpy arrays (Dask's handler
   is zero copy as freight is, costs the same, and is the one workers use between themselves).
2. **Per type** (``dask_serialize`` / ``dask_deserialize``): task arguments inside the graph are
   pickled, worker-to-worker transfers use ``("dask", "pickle")`` and spilling uses the defaults,
   so a family alone never reaches them. freight registers itself for the types where it beats
   Dask's own handling (measured, see docs/integrations/dask.md), for values of at least
   ``min_bytes`` (``dask.sizeof``): smaller ones go the way Dask sends them without freight, since
   freight's fixed cost per table is higher than pickle's today. Installing imports none of
   these libraries: a library not yet imported gets freight's handlers when Dask first looks
   up one of its types (``register_lazy``). Dask registers its own handlers for some of these
   types lazily too, which would overwrite an earlier registration: freight runs Dask's first
   and keeps its handler for the small values.

Workers get both through a ``WorkerPlugin`` (``client.register_plugin``: it also reaches workers
that join later), the scheduler through a ``SchedulerPlugin``. Without code on the client, a
worker preload does the same: ``dask worker --preload freight.integrations.dask`` (or the config
``distributed.worker.preload: [freight.integrations.dask]``), with options from the Dask config
key ``freight`` (``freight: {allow_pickle: false, compression: lz4}``).

The options are :class:`freight.Freight`'s (``allow_pickle``, ``compression``, ``key``, ...).
They travel to the workers inside the plugin, over the cluster's own connections: use TLS
(``distributed.comm.tls``) if a ``key`` must not cross the network in the clear.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import freight
from freight import carrier
from freight import registry as _registry
from freight.exceptions import FreightError
from freight.integrations import check_options, require, size

__all__ = [
    "DESERIALIZERS",
    "FAMILY",
    "SERIALIZERS",
    "TYPES",
    "FreightSchedulerPlugin",
    "FreightWorkerPlugin",
    "install",
    "install_local",
    "stats",
]

logger = logging.getLogger("freight.integrations.dask")

FAMILY = "freight"
#: what :func:`install` selects on the client: freight first, Dask's own after it
SERIALIZERS = (FAMILY, "dask", "pickle")
#: what the client accepts back ("error" carries a worker's failure to serialize)
DESERIALIZERS = (FAMILY, "dask", "pickle", "msgpack", "error")
#: the types freight takes over from Dask at or above ``min_bytes`` (module, class name)
TYPES = (
    ("pandas", "DataFrame"),
    ("pandas", "Series"),
    ("polars", "DataFrame"),
    ("pyarrow", "Table"),
    ("torch", "Tensor"),
)
#: below this size (``dask.sizeof``) a value of those types goes Dask's own way: the carrier's
#: threshold for ``"dask"`` (``freight.carrier.THRESHOLDS``, 1 MiB, measured in docs/integrations/dask.md)
MIN_BYTES = carrier.threshold(integration="dask")

_lock = threading.Lock()
_codec: freight.Freight = freight.DEFAULT
_min_bytes = MIN_BYTES
_registered: set[type] = set()  # the types whose handlers this process replaced
_counts = {"family_dumps": 0, "family_loads": 0, "type_dumps": 0, "type_loads": 0, "type_passed": 0}


def stats() -> dict[str, int]:
    """How many values this process encoded and decoded through freight, by path (a copy):
    ``family_*`` (the "freight" family), ``type_*`` (per-type handlers), ``type_passed`` (small
    values handed to Dask's own handling)."""
    return dict(_counts)


# -- the family -------------------------------------------------------------------------------------


def _encode(x: Any, path: str) -> tuple[dict[str, Any], list[Any]]:
    """freight's header and frames for Dask (views of ``x``'s memory), counted under ``path``."""
    frames = list(_codec.dumps_frames(x))
    _counts[f"{path}_dumps"] += 1
    return {"freight": 1}, frames


def _decode(frames: list[Any], path: str) -> Any:
    """Frames Dask received (writable: viewed, not copied) back into the value."""
    _counts[f"{path}_loads"] += 1
    return _codec.loads_frames(frames)


def _family_dumps(x: Any) -> tuple[dict[str, Any], list[Any]]:
    cls = type(x)
    if _leaves_to_dask(cls) or _loses(x):
        raise NotImplementedError(f"a {cls.__qualname__} goes through Dask's own handler for it")
    try:
        return _encode(x, "family")
    except Exception as exc:  # noqa: BLE001 - whatever the cause (a __getstate__ that raises ValueError)
        # Dask tries the next family ("dask", "pickle") only on NotImplementedError; any other
        # exception ends serialization, so the value would fail where Dask alone sends it.
        raise NotImplementedError(f"freight cannot encode a {cls.__qualname__}: {type(exc).__name__}: {exc}") from exc


# Per type, whether the family leaves it to Dask: Dask has a handler for it (a library's, such as
# torch's or h5py's, or a user's ``dask_serialize.register``) and freight has no encoding of its
# own (native, a serializer in its registry; numpy arrays stay Dask's, see _freight_encodes). A
# handler encodes what freight cannot know about (torch sends ``.grad``); freight's pickling would
# bypass it. Decided once per type (the lookups cost microseconds); install_local() starts over,
# so registrations made before it count.
_leave_to_dask: dict[type, bool] = {}
_own_handlers: set[Callable[..., Any]] = set()  # freight's per-type handlers (TYPES)


def _leaves_to_dask(cls: type) -> bool:
    known = _leave_to_dask.get(cls)
    if known is None:
        known = _leave_to_dask[cls] = _dask_handles(cls) and not _freight_encodes(cls)
    return known


def _dask_handles(cls: type) -> bool:
    from distributed.protocol.serialize import dask_serialize

    try:
        handler = dask_serialize.dispatch(cls)  # runs Dask's lazy registration for cls's library
    except TypeError:
        return False
    return handler not in _own_handlers


def _freight_encodes(cls: type) -> bool:
    """Whether freight has its own encoding for ``cls`` (what it replaces Dask's handler with on
    purpose): a native type or a serializer in the codec's registry (its built-in ones for the
    library loaded first); a serializer for a base class counts when it takes subclasses.

    numpy's ``ndarray`` is not counted: Dask's handler for it is zero copy both ways, as freight's
    frames are, at the same cost and with the same bytes on the wire (measured in
    docs/integrations/dask.md), keeps a broadcast or strided array unexpanded, and is what Dask
    uses for arrays between workers, where no family reaches: one path for arrays everywhere."""
    if cls in _registry._NATIVE_TYPES:
        return True
    _registry._load_library(cls.__module__.partition(".")[0])
    view = _codec.registry.types_view()
    if cls in view:
        return True
    return any(getattr(view.get(base), "subclasses", False) for base in cls.__mro__[1:])


def _loses(x: Any) -> bool:
    """Values of a type freight encodes that it would not carry whole, which Dask's handler for
    the type carries: a torch tensor with a gradient (freight keeps ``requires_grad``, not
    ``.grad``)."""
    return type(x).__module__.startswith("torch") and getattr(x, "grad", None) is not None


def _family_loads(header: dict[str, Any], frames: list[Any]) -> Any:
    return _decode(frames, "family")


# -- per type ---------------------------------------------------------------------------------------


def _nbytes(x: Any) -> int:
    """The size of a value's data: the library's own figure where it has one (dask.sizeof knows
    pandas, but not polars, and would count a polars frame as a small Python object)."""
    for attr in ("estimated_size", "nbytes"):  # polars; pyarrow, numpy
        size = getattr(x, attr, None)
        if size is not None and not hasattr(x, "memory_usage"):
            return int(size() if callable(size) else size)
    if hasattr(x, "element_size"):  # torch
        return int(x.nelement() * x.element_size())
    from dask.sizeof import sizeof

    return int(sizeof(x))


def _make_type_handlers(cls: type, dask_dumps: Callable[..., Any] | None, dask_loads: Callable[..., Any] | None):
    """The (dumps, loads) freight registers for ``cls``: freight's frames at or above min_bytes,
    below it Dask's own handler for the type (or, if it has none, pickle)."""

    def dumps(x: Any) -> tuple[dict[str, Any], list[Any]]:
        if _nbytes(x) >= _min_bytes and not _loses(x):
            try:
                return _encode(x, "type")
            except Exception:  # noqa: BLE001 - Dask's own handler (or pickle) may still send it
                logger.debug("freight could not encode a %s; Dask's handler sends it", cls.__qualname__, exc_info=True)
        _counts["type_passed"] += 1
        if dask_dumps is None:
            raise NotImplementedError("a small value: Dask pickles it")  # serialize() tries "pickle" next
        header, frames = dask_dumps(x)
        return {"freight": 0, "dask": header}, list(frames)

    def loads(header: dict[str, Any], frames: list[Any]) -> Any:
        if header.get("freight"):
            return _decode(frames, "type")
        if dask_loads is None:  # pragma: no cover - a sender with another registration
            raise freight.DeserializationError(
                f"a {cls.__qualname__} was sent with Dask's own handler, which this process lacks: "
                "install freight the same way (freight.integrations.dask.install) on the whole cluster"
            )
        return dask_loads(header["dask"], frames)

    return dumps, loads


def _register_type(module: str, name: str) -> None:
    """freight's handlers for ``module.name``: now if its library is imported, else when Dask
    first looks up one of its types (a value of a library's type cannot exist before the library
    is imported), so that installing freight imports none of them (torch alone takes seconds and
    hundreds of MiB in every worker)."""
    toplevel = module.partition(".")[0]
    if toplevel not in sys.modules and _register_lazily(toplevel, module, name):
        return
    pending = _lazy_registrations.get(toplevel)
    if pending is not None:
        # registered lazily by an earlier install and not looked up since: run it now (Dask's own
        # registration first), or it would run later and overwrite what is registered here
        pending()
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return  # not in this version of the library: nothing of that type will arrive
    if cls in _registered:
        return
    from distributed.protocol.serialize import dask_deserialize, dask_serialize

    # Looking the type up first makes Dask run its lazy registration for the module now (it
    # would overwrite ours later); what it finds is kept for the values under min_bytes.
    previous: list[Callable[..., Any] | None] = []
    for dispatch in (dask_serialize, dask_deserialize):
        try:
            previous.append(dispatch.dispatch(cls))
        except TypeError:
            previous.append(None)
    _registered.add(cls)
    dumps, loads = _make_type_handlers(cls, previous[0], previous[1])
    _own_handlers.add(dumps)
    dask_serialize.register(cls)(dumps)
    dask_deserialize.register(cls)(loads)


#: library -> the (module, name) types registered on Dask's first lookup of one of its types
_pending: dict[str, list[tuple[str, str]]] = {}
#: library -> the function that registers them (in Dask's lazy tables until it runs)
_lazy_registrations: dict[str, Callable[[], None]] = {}


def _register_lazily(toplevel: str, module: str, name: str) -> bool:
    """Registers ``module.name`` on Dask's first lookup of a type from the library ``toplevel``
    (``register_lazy``, one function per library on each of Dask's two dispatchers, both replaced
    by one of freight's): what was there (Dask's own, for torch and pyarrow) runs first, as it
    would have, then freight registers the library's types over it. False where Dask's
    dispatchers have no lazy table to read (another version): then register now."""
    from distributed.protocol.serialize import dask_deserialize, dask_serialize

    dispatchers = (dask_serialize, dask_deserialize)
    tables = [getattr(d, "_lazy", None) for d in dispatchers]
    if not all(isinstance(t, dict) for t in tables):
        return False
    types = _pending.get(toplevel)
    if types is None:
        types = _pending[toplevel] = []
        previous: list[Callable[[], None]] = []
        for table in tables:
            before = table.get(toplevel)
            if before is not None and before not in previous:
                previous.append(before)

        def register() -> None:
            _lazy_registrations.pop(toplevel, None)
            for table in tables:  # the first lookup, on either dispatcher, does it for both
                if table.get(toplevel) is register:
                    table.pop(toplevel)
            for before in previous:
                before()
            for pending in _pending.pop(toplevel, ()):
                _register_type(*pending)

        _lazy_registrations[toplevel] = register
        for dispatch in dispatchers:
            dispatch.register_lazy(toplevel, register)
    if (module, name) not in types:
        types.append((module, name))
    return True


def _require_distributed(function: str) -> None:
    require("distributed.protocol.serialize", "dask", f"freight.integrations.dask.{function}", "Dask's distributed")


def install_local(options: dict[str, Any] | None = None, *, types: Iterable[tuple[str, str]] = TYPES,
                  min_bytes: int = MIN_BYTES) -> None:  # fmt: skip
    """Registers the family and the per-type handlers in this process, with ``options`` for
    :class:`freight.Freight`. Idempotent; the last call's options win.

    Raises:
        freight.MissingDependencyError: Dask's distributed is not installed.
    """
    global _codec, _min_bytes
    _require_distributed("install_local()")
    check_options("freight.integrations.dask.install_local", options or {})
    min_bytes = size("min_bytes", min_bytes)
    from distributed.protocol.serialize import register_serialization_family

    with _lock:
        # The global registry with these options (a misspelled one: OptionError, with a suggestion).
        _codec = freight.DEFAULT.replace(**(options or {}))
        _min_bytes = min_bytes
        register_serialization_family(FAMILY, _family_dumps, _family_loads)
        for module, name in types:
            _register_type(module, name)
        _leave_to_dask.clear()  # registrations (and the codec's registry) may have changed


# -- plugins ----------------------------------------------------------------------------------------

try:
    from distributed.diagnostics.plugin import SchedulerPlugin as _SchedulerPluginBase
    from distributed.diagnostics.plugin import WorkerPlugin as _WorkerPluginBase
except ImportError:  # pragma: no cover - distributed is optional
    _SchedulerPluginBase = object  # type: ignore[assignment,misc]
    _WorkerPluginBase = object  # type: ignore[assignment,misc]


class _Installs:
    """What both plugins carry: the options and types :func:`install_local` runs with."""

    def __init__(self, options: dict[str, Any] | None = None, types: Iterable[tuple[str, str]] = TYPES,
                 min_bytes: int = MIN_BYTES) -> None:  # fmt: skip
        self.options = dict(options or {})
        self.types = tuple(tuple(t) for t in types)
        self.min_bytes = min_bytes

    def _install(self) -> None:
        install_local(self.options, types=self.types, min_bytes=self.min_bytes)


class FreightWorkerPlugin(_Installs, _WorkerPluginBase):  # type: ignore[misc,valid-type]
    """Runs :func:`install_local` on each worker when it starts (and on workers that join later)."""

    name = "freight"
    idempotent = False

    def setup(self, worker: Any) -> None:
        self._install()


class FreightSchedulerPlugin(_Installs, _SchedulerPluginBase):  # type: ignore[misc,valid-type]
    """Runs :func:`install_local` on the scheduler."""

    name = "freight"

    async def start(self, scheduler: Any) -> None:
        self._install()


def _worker_version() -> str:
    import freight as f

    return f.__version__


def install(client: Any, *, types: Iterable[tuple[str, str]] = TYPES, min_bytes: int = MIN_BYTES,
            **options: Any) -> None:  # fmt: skip
    """Makes freight the serialization of ``client``'s cluster: the client, the scheduler and every
    worker (workers that join later included), with ``options`` for :class:`freight.Freight`.

    Raises:
        freight.MissingDependencyError: Dask's distributed is not installed
            (``pip install 'freight[dask]'``).
        freight.OptionError: an option :class:`freight.Freight` does not accept (raised here, not
            on workers; also a TypeError).
        FreightError: a worker or the scheduler could not install freight (it names them and why;
            usually freight is not installed there).
    """
    _require_distributed("install()")
    check_options("freight.integrations.dask.install", options, takes=("types", "min_bytes"))
    min_bytes = size("min_bytes", min_bytes)
    freight.DEFAULT.replace(**options)  # check the options here, once
    types = tuple(tuple(t) for t in types)
    install_local(options, types=types, min_bytes=min_bytes)
    try:
        with warnings.catch_warnings():
            # installing again replaces the plugins (new options): Dask warns that it overwrites
            warnings.filterwarnings("ignore", message=".*already contains a plugin with name freight")
            client.register_plugin(FreightSchedulerPlugin(options, types, min_bytes))
            client.register_plugin(FreightWorkerPlugin(options, types, min_bytes))
    except Exception as exc:  # noqa: BLE001 - the cluster's error, explained
        raise FreightError(
            f"freight could not be installed on the Dask cluster: {type(exc).__name__}: {exc}. "
            "Install freight (the same version as the client's) on the scheduler and every worker."
        ) from exc
    try:
        versions = client.run(_worker_version)
    except Exception as exc:  # noqa: BLE001
        raise FreightError(
            f"a Dask worker cannot import freight ({type(exc).__name__}: {exc}); install freight on every worker"
        ) from exc
    mismatched = {w: v for w, v in versions.items() if v != freight.__version__}
    if mismatched:
        logger.warning("freight versions differ from the client's %s: %s", freight.__version__, mismatched)
    # Select the family first on this client's connections (scatter, gather, results).
    client._serializers = SERIALIZERS
    client._deserializers = DESERIALIZERS
    client.rpc.serializers = SERIALIZERS
    client.rpc.deserializers = DESERIALIZERS
    if getattr(client, "scheduler", None) is not None:  # the scheduler's rpc, made at connection
        client.scheduler.serializers = SERIALIZERS
        client.scheduler.deserializers = DESERIALIZERS


# -- worker preload -----------------------------------------------------------------------------------


def dask_setup(worker: Any) -> None:
    """``--preload freight.integrations.dask``: installs freight on this worker with the options
    under the Dask config key ``freight`` (e.g. ``freight: {allow_pickle: false}``)."""
    import dask

    options = {k.replace("-", "_"): v for k, v in (dask.config.get("freight", default={}) or {}).items()}
    install_local(options)
