"""The serializer registry: dispatch by exact type, then MRO, then ``supported(obj)`` predicates.

A registry is a layer: a configured :class:`freight.Freight` has its own registry whose parent
is the global one, and lookups fall through layers from the innermost out (user layers before
the built-ins, as cloudpickle chains ``dispatch_table`` over ``copyreg``).

Three shapes of serializer register as they are:

* the full protocol: ``serialize(obj) -> (meta, frames)`` and ``deserialize(meta, frames)``,
  where ``meta`` is any natively encodable value and ``frames`` a list of buffers;
* Scaler's shape: ``serialize(obj) -> bytes`` and ``deserialize(payload: bytes)``;
* ProxyStore's predicates: ``serializable(obj)`` or ``supported(obj)`` choose the objects.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import importlib
import os
import pathlib
import pickle
import sys
import threading
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from freight._freight import DispatchTables
from freight.exceptions import FreightWarning, MissingDependencyError, SerializationError, UnknownTagError

__all__ = ["Entry", "Registry", "GLOBAL", "BUILTINS"]

# Results of simple (bytes) serializers at least this large travel as a frame, not inline.
_INLINE_LIMIT = 64 * 1024

# Libraries freight ships serializers for, by the top-level module of their types: the module
# of freight that holds them (its ``SERIALIZERS``, registered into BUILTINS by _register_module)
# and the extra that installs the library. They are imported the first time an object of the
# library is serialized (the Rust walker reads _PENDING) or a payload tag of the library
# ("<top>.<name>") is loaded; never at ``import freight``. Those modules never import this one:
# the registry loads them, by name, and they only define serializers.
_LIBRARIES: dict[str, tuple[str, str]] = {
    "scipy": ("freight.serializers.scipy_sparse", "scipy"),
    "pyarrow": ("freight.serializers.arrow", "arrow"),
    "pandas": ("freight.serializers.pandas", "pandas"),
    "polars": ("freight.serializers.polars", "polars"),
    "xarray": ("freight.serializers.xarray", "xarray"),
    "torch": ("freight.serializers.torch", "torch"),
    "tensorflow": ("freight.serializers.tensorflow", "tensorflow"),
    "collections": ("freight.serializers.stdlib", "all"),
    "builtins": ("freight.serializers.stdlib", "all"),
    "numpy": ("freight.serializers.numpy_masked", "numpy"),
}
_PENDING: dict[str, str] = {top: module for top, (module, _extra) in _LIBRARIES.items()}

# Types the Rust walker encodes natively (a registration for one of them overrides that).
_NATIVE_TYPES: frozenset[type] = frozenset(
    [
        type(None), bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset,
        datetime.datetime, datetime.date, datetime.time, datetime.timedelta, decimal.Decimal, uuid.UUID,
        pathlib.PosixPath, pathlib.WindowsPath, pathlib.PurePosixPath, pathlib.PureWindowsPath,
    ]
)  # fmt: skip


def _load_library(top: str) -> bool:
    """Registers freight's serializers for library ``top``: True once they are registered, False
    if nothing is left to load. ``top`` leaves _PENDING only after its serializers are in: a
    thread meeting the library while another thread registers it waits for that registration
    (in _register_module) instead of finding nothing pending and pickling the object."""
    module = _PENDING.get(top)
    if module is None:
        return False
    try:
        _register_module(module)
    except ImportError:
        return False  # the library itself is missing: nothing of it can be serialized anyway
    finally:
        _PENDING.pop(top, None)  # by every caller: the next lookup settles the type
    return True


_REGISTERED_MODULES: set[str] = set()
_REGISTER_LOCK = threading.Lock()


def _register_module(name: str) -> None:
    """Imports one of freight's serializer modules and registers its ``SERIALIZERS`` into
    BUILTINS, once however many threads ask (several libraries share one module: stdlib). The
    import runs outside the lock (Python's import lock makes it once): a module imported while
    this lock is held could not wait for another thread's import without risking a deadlock."""
    module = importlib.import_module(name)
    with _REGISTER_LOCK:
        if name in _REGISTERED_MODULES:
            return
        for serializer in module.SERIALIZERS:
            BUILTINS.register(serializer)
        _REGISTERED_MODULES.add(name)


def _takes_one_argument(func: Callable[..., Any]) -> bool:
    """True when ``deserialize`` is Scaler's ``deserialize(payload)`` rather than ours."""
    import inspect as _inspect  # here, not at import: it costs a fifth of ``import freight``

    try:
        sig = _inspect.signature(func)
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    has_varargs = any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())
    return len(positional) == 1 and not has_varargs


class Entry:
    """A registered serializer, normalised to the full protocol. The Rust walker calls
    ``encode``/``decode`` and reads ``tag``, ``safe``, ``arrow`` (the serializer's
    ``arrow_node``: True, or a check ``arrow_node(obj)``, when freight may write the Arrow data
    an object exports as this serializer's node itself; see ``freight.serializers.arrow``) and
    ``arrow_meta`` (whether its ``deserialize`` takes that node's metadata as an ``ArrowMeta``)."""

    __slots__ = (
        "tag",
        "safe",
        "types",
        "serializer",
        "predicate",
        "simple",
        "subclasses",
        "arrow",
        "arrow_meta",
        "_serialize",
        "_deserialize",
    )

    def __init__(self, serializer: Any, tag: str | None, types: Iterable[type] | None, safe: bool | None):
        self.serializer = serializer
        self.tag = tag or getattr(serializer, "tag", None) or _default_tag(serializer)
        if not isinstance(self.tag, str) or not self.tag:
            raise SerializationError(f"serializer {serializer!r} needs a non-empty str tag; pass tag='...'")
        if types is None:
            types = getattr(serializer, "types", None) or getattr(serializer, "serializer_class", None) or ()
        if isinstance(types, type):
            types = (types,)
        self.types = tuple(types)
        for t in self.types:
            if not isinstance(t, type):
                raise SerializationError(f"types must be classes; got {t!r} for serializer {self.tag!r}")

        self.predicate = getattr(serializer, "supported", None) or getattr(serializer, "serializable", None)
        if not self.types and self.predicate is None:
            raise SerializationError(
                f"serializer {self.tag!r} declares no types and no supported(obj) predicate, so no object "
                "would ever reach it; pass types=(...) to register()"
            )
        for method in ("serialize", "deserialize"):
            if not callable(getattr(serializer, method, None)):
                raise SerializationError(
                    f"serializer {self.tag!r} ({type(serializer).__qualname__}) has no callable {method}(); "
                    "a serializer needs serialize(obj) and deserialize(...)"
                )
        self._serialize = serializer.serialize
        self._deserialize = serializer.deserialize
        self.simple = _takes_one_argument(self._deserialize)
        # Scaler-style bytes serializers usually call pickle in deserialize: unless they say
        # otherwise, allow_pickle=False refuses them too.
        default_safe = not self.simple
        self.safe = bool(getattr(serializer, "safe", default_safe) if safe is None else safe)
        # Whether subclasses of ``types`` go to this serializer too (found by MRO). A serializer
        # that rebuilds exactly the classes it lists says False, so subclasses keep their type.
        self.subclasses = bool(getattr(serializer, "subclasses", True))
        self.arrow = getattr(serializer, "arrow_node", False)
        # Whether the decoder may hand the serializer its Arrow metadata as one
        # ``_freight.ArrowMeta`` (read straight from the payload) instead of the tuple form.
        self.arrow_meta = bool(getattr(serializer, "arrow_meta", False))
        if not tag and not getattr(serializer, "tag", None) and self.tag.startswith("__main__."):
            warnings.warn(
                FreightWarning(
                    f"serializer {self.tag[len('__main__.') :]} has no tag, so it is registered as {self.tag!r}, "
                    "which names whatever script runs as __main__: a payload that uses it will not load in "
                    "another process (a worker, or this code imported as a module); pass tag='myapp.Name' to "
                    "register(), or give the serializer a tag attribute"
                ),
                stacklevel=_caller_stacklevel(),
            )

    def encode(self, obj: Any) -> tuple[Any, list[Any]]:
        out = self._serialize(obj)
        if self.simple:
            if not isinstance(out, (bytes, bytearray, memoryview)):
                raise SerializationError(
                    f"serializer {self.tag!r} returned {type(out).__name__}; a one-argument deserialize "
                    "means serialize must return bytes"
                )
            if len(out) < _INLINE_LIMIT:
                return bytes(out), []
            return None, [out]
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], (list, tuple))):
            raise SerializationError(
                f"serializer {self.tag!r} must return (meta, frames) with frames a list of buffers; "
                f"got {type(out).__name__}"
            )
        return out[0], list(out[1])

    def decode(self, meta: Any, frames: list[memoryview]) -> Any:
        if self.simple:
            payload = meta if meta is not None else bytes(frames[0])
            return self._deserialize(payload)
        return self._deserialize(meta, frames)

    def accepts(self, obj: Any) -> bool:
        return self.predicate is not None and bool(self.predicate(obj))

    def __repr__(self) -> str:
        return f"<freight serializer {self.tag!r} types={[t.__qualname__ for t in self.types]} safe={self.safe}>"


# A layer's own registrations, as Registry._state() returns them: (serializer, tag, types, safe)
# per entry, (type, tag) per type, the tags of the predicate serializers in order.
_LayerState = tuple[list[tuple[Any, str, tuple[type, ...], bool]], list[tuple[type, str]], list[str]]


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of a warning that points at the first frame outside freight's package
    (the user's ``register`` call, however many of freight's frames lie in between)."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _default_tag(serializer: Any) -> str:
    cls = serializer if isinstance(serializer, type) else type(serializer)
    return f"{cls.__module__}.{cls.__qualname__}"


class Registry:
    """One layer of serializers, falling back to ``parent``."""

    def __init__(self, parent: Registry | None = None):
        self.parent = parent
        self._by_tag: dict[str, Entry] = {}
        self._by_type: dict[type, Entry] = {}
        self._predicates: list[Entry] = []
        self._lock = threading.RLock()
        self._children: weakref.WeakSet[Registry] = weakref.WeakSet()
        # What the Rust walker looks up, derived from this layer and its parents and replaced
        # (in place, on the Rust side) whenever any layer changes: Codec takes it from
        # dispatch_tables(); Rust reads nothing else of a Registry but by_tag(), for a tag the tables do
        # not hold yet. _PENDING, shared
        # by all registries: libraries whose built-in serializers are not loaded yet.
        self._tables = DispatchTables(_PENDING, _load_library)
        if parent is not None:
            parent._children.add(self)
        self._rebuild()

    # -- changing -------------------------------------------------------------------------
    def register(
        self,
        serializer: Any,
        *,
        tag: str | None = None,
        types: Iterable[type] | type | None = None,
        safe: bool | None = None,
        replace: bool = False,
    ) -> Entry:
        if isinstance(serializer, type):
            serializer = serializer()
        entry = Entry(serializer, tag, types, safe)
        with self._lock:
            old = self._by_tag.get(entry.tag)
            if old is not None:
                if not replace:
                    raise SerializationError(
                        f"a serializer with tag {entry.tag!r} is already registered; pass replace=True "
                        "to replace it or choose another tag"
                    )
                self._remove(old)
            self._by_tag[entry.tag] = entry
            for t in entry.types:
                self._by_type[t] = entry
            if entry.predicate is not None and not entry.types:
                self._predicates.append(entry)
            self._rebuild()
        return entry

    def unregister(self, tag: str) -> None:
        with self._lock:
            entry = self._by_tag.get(tag)
            if entry is None:
                raise UnknownTagError(f"no serializer with tag {tag!r} is registered in this registry")
            self._remove(entry)
            self._rebuild()

    def _remove(self, entry: Entry) -> None:
        del self._by_tag[entry.tag]
        for t, e in list(self._by_type.items()):
            if e is entry:
                del self._by_type[t]
        self._predicates = [e for e in self._predicates if e is not entry]

    # -- looking up ------------------------------------------------------------------------
    def _layers(self) -> list[Registry]:
        layers, layer = [], self
        while layer is not None:
            layers.append(layer)
            layer = layer.parent
        return layers

    def _rebuild(self) -> None:
        view: dict[type, Entry] = {}
        for layer in reversed(self._layers()):
            view.update(layer._by_type)
        # The part for types freight encodes natively (int, str, dict, datetime, ...): only when
        # it is non-empty does the walker look every object up (a registration for such a type
        # overrides the native encoding); other types are looked up when the walker meets them.
        native = {t: e for t, e in view.items() if t in _NATIVE_TYPES}
        predicates = [e for layer in self._layers() for e in layer._predicates]
        tags: dict[str, Entry] = {}
        for layer in reversed(self._layers()):
            tags.update(layer._by_tag)
        self._tables.update(view, native, predicates, tags)
        for child in list(self._children):
            child._rebuild()

    def dispatch_tables(self) -> DispatchTables:
        """The tables the encoder looks serializers up in (exact types, then predicates), over
        all layers: the one object a :class:`freight.Freight` codec takes from its registry."""
        return self._tables

    def types_view(self) -> dict[type, Entry]:
        """Exact type -> entry, over all layers (what the encoder checks first): a new dict."""
        return self._tables.types()

    def predicates_view(self) -> list[Entry]:
        """The entries that decide per object (``supported(obj)``), in the order they are
        asked: a new list."""
        return self._tables.predicates()

    def _registered(self, tag: str) -> Entry | None:
        for layer in self._layers():
            entry = layer._by_tag.get(tag)
            if entry is not None:
                return entry
        return None

    def by_tag(self, tag: str) -> Entry:
        entry = self._registered(tag)
        if entry is not None:
            return entry
        for top, (module, extra) in _LIBRARIES.items():
            if tag.startswith(top + "."):
                try:
                    _register_module(module)
                except ImportError as exc:
                    raise MissingDependencyError(
                        f"the payload holds a {tag!r} object; install it with: pip install 'freight[{extra}]'"
                    ) from exc
                entry = self._registered(tag)
                if entry is not None:
                    return entry
        raise UnknownTagError(
            f"the payload uses serializer tag {tag!r}, which is not registered here; register the same "
            "serializer on this side (freight.register) before loading"
        )

    # -- copying and pickling ------------------------------------------------------------------
    # GLOBAL and BUILTINS travel by reference: the other side uses its own, filled by its imports.
    # Any other layer travels by value: its parent, then its own registrations.
    def _state(self) -> _LayerState:
        """This layer's own registrations: each entry's (serializer, tag, types, safe) in the
        order they were made, then which entry holds each type, then the predicate order."""
        with self._lock:
            entries = [(e.serializer, e.tag, e.types, e.safe) for e in self._by_tag.values()]
            by_type = [(t, e.tag) for t, e in self._by_type.items()]
            predicates = [e.tag for e in self._predicates]
        return entries, by_type, predicates

    def __reduce__(self) -> str | tuple[Any, ...]:
        if self is GLOBAL:
            return "GLOBAL"
        if self is BUILTINS:
            return "BUILTINS"
        state = self._state()
        for serializer, tag, types, _safe in state[0]:
            try:
                pickle.dumps((serializer, types), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                raise SerializationError(
                    f"cannot pickle this registry layer: its serializer {tag!r} ({type(serializer).__qualname__}) "
                    f"cannot be pickled ({type(exc).__name__}: {exc}); register it with freight.register() in a "
                    "module that the unpickling side (every worker) imports, or define its class and types at the "
                    "top level of such a module so that they pickle by reference"
                ) from exc
        return (_restore_layer, (self.parent, state))

    def __copy__(self) -> Registry:
        if self is GLOBAL or self is BUILTINS:
            return self
        return _restore_layer(self.parent, self._state())

    def __deepcopy__(self, memo: dict[int, Any]) -> Registry:
        if self is GLOBAL or self is BUILTINS:
            return self
        try:
            state = copy.deepcopy(self._state(), memo)
        except Exception as exc:
            raise SerializationError(
                f"cannot deep-copy this registry layer: a serializer on it cannot be copied ({type(exc).__name__}: "
                f"{exc}); use copy.copy(), which shares the serializer objects"
            ) from exc
        return _restore_layer(copy.deepcopy(self.parent, memo), state)

    def __repr__(self) -> str:
        return f"<freight.Registry {sorted(self._by_tag)} parent={self.parent is not None}>"


def _restore_layer(parent: Registry | None, state: _LayerState) -> Registry:
    """Unpickles (and copies) a registry layer: a new layer over ``parent`` with the same entries."""
    entries, by_type, predicates = state
    layer = Registry(parent=parent)
    by_tag = {tag: Entry(serializer, tag, types, safe) for serializer, tag, types, safe in entries}
    layer._by_tag.update(by_tag)
    layer._by_type.update((t, by_tag[tag]) for t, tag in by_type)
    layer._predicates.extend(by_tag[tag] for tag in predicates)
    layer._rebuild()
    return layer


# freight's own serializers for third-party types; user registrations (GLOBAL, and the layers
# of Freight instances above it) take precedence.
BUILTINS = Registry()
GLOBAL = Registry(parent=BUILTINS)
