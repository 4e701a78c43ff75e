"""Functions made at run time (lambdas, closures, the functions of ``__main__``) as one freight
node, walked with the rest of the payload, instead of a pickle island that cloudpickle writes.

Why: cloudpickle rebuilds a function through several pickled calls (``_make_function``, the code
object's constructor, ``_function_setstate``), and freight paid that plus its own envelope, so a
lambda loaded 0.9× as fast as with cloudpickle alone. As a node, the code's fields, the closure's
values and the globals the code names are plain values the walker writes (an array in a closure
becomes a frame), and loading is one ``CodeType`` call per code object and one ``FunctionType``
call.

What goes this way (:func:`native`), the rest keeps cloudpickle's path unchanged: a function
that is not importable by reference, whose closure cells, defaults, attributes and referenced
globals hold only plain values (None, bools, numbers, str, bytes, numpy arrays of a plain dtype,
and lists, tuples, sets and dicts of those, up to :data:`PLAIN_ITEMS` nested ones), modules, and
functions or classes importable by name. So nothing in the node can lead back to the function (a
recursive closure, two local functions calling each other, a dynamic class): those are exactly
what cloudpickle's memo handles, and they keep it.

As cloudpickle does: the functions of one module share one rebuilt globals dict within a payload
(the dict of ``__name__``, ``__file__``, ... is one object for all of them, kept once by the
walker's memo, and each function adds the globals it names to it), builtins are this process's,
modules and importable names are imported on load. The node is ``safe=False``: loading it runs
code, so ``allow_pickle=False`` refuses it like any pickle. A code object is specific to its
Python version: the node records it, and another version refuses the payload with
:class:`freight.ProducerVersionError`.

Wire form (an Ext node, tag ``builtins.function``; docs/FORMAT.md): a tuple ``(python, code,
name, qualname, module, doc, defaults, kwdefaults, annotations, attributes, cells, base,
names)``. ``code`` is a list of the ``co_*`` fields in the order ``CodeType``'s constructor takes
them on that Python, ``co_consts`` a tuple in which a nested code object is such a list and
Ellipsis is ``[]`` (constants hold no lists). Every other value that may be a reference is a pair: ``("v", value)``,
``("m", module, submodules)`` (the submodules the code reaches by attribute, imported too) or
``("r", module, qualname)``; a closure cell is ``(pair,)`` or ``()`` when
empty.
"""

from __future__ import annotations

import builtins
import importlib
import sys
import types
import weakref
from typing import Any

from freight.exceptions import DeserializationError, ProducerVersionError, SerializationError

__all__ = ["TAG", "ENTRY", "native", "rebuild"]

TAG = "builtins.function"
#: How many containers and arrays a closure's or a global's values may hold in all to be checked
#: here (a container of leaves only is checked in C, its items not counted); past that the
#: function keeps cloudpickle's path (the check is Python, per nested value).
PLAIN_ITEMS = 10_000

_PYTHON = list(sys.version_info[:2])
# The fields of a code object in the order CodeType's constructor takes them on this Python
# (positional: the fastest way to make one). Checked below on a code object of this Python; where
# the order is not known, functions keep cloudpickle's path.
_CODE_FIELDS: tuple[str, ...] | None = (
    ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize", "co_flags",
     "co_code", "co_consts", "co_names", "co_varnames", "co_filename", "co_name")
    + (("co_qualname",) if sys.version_info >= (3, 11) else ())
    + ("co_firstlineno", "co_linetable")
    + (("co_exceptiontable",) if sys.version_info >= (3, 11) else ())
    + ("co_freevars", "co_cellvars")
)  # fmt: skip
_CONSTS = _CODE_FIELDS.index("co_consts")


def _fields_work() -> bool:
    def probe(a, *b, c=1):  # every field in use: constants, names, free and cell variables
        d = a

        def inner():
            return d + len(b) + c

        return inner

    code = probe.__code__
    try:
        rebuilt = types.CodeType(*[getattr(code, f) for f in _CODE_FIELDS])  # type: ignore[union-attr]
    except (TypeError, ValueError, AttributeError):
        return False
    return all(getattr(rebuilt, f) == getattr(code, f) for f in _CODE_FIELDS)  # type: ignore[union-attr]


if not _fields_work():  # pragma: no cover - a Python whose constructor differs
    _CODE_FIELDS = None
_BASE_NAMES = ("__package__", "__name__", "__path__", "__file__")
_LEAVES = frozenset([type(None), bool, int, float, complex, str, bytes])
_GLOBAL_OPS = frozenset(("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL"))
_FunctionType, _CodeType, _ModuleType, _Cell = types.FunctionType, types.CodeType, types.ModuleType, types.CellType
_BUILTINS = builtins.__dict__


class _NotPlain(Exception):
    """A value the node cannot hold: the function keeps cloudpickle's path."""


# -- encoding ------------------------------------------------------------------------------------

_names_cache: weakref.WeakKeyDictionary[Any, tuple[tuple[str, ...], frozenset[str]]] = weakref.WeakKeyDictionary()


def _code_names(code: Any) -> tuple[tuple[str, ...], frozenset[str]]:
    """The global names ``code`` and the code objects nested in it read or write, and every name
    they use (attributes included: how a submodule is reached). Once per code object: ``dis``
    costs tens of microseconds."""
    found = _names_cache.get(code)
    if found is None:
        import dis

        globals_ = {ins.argval: None for ins in dis.get_instructions(code) if ins.opname in _GLOBAL_OPS}
        names = set(code.co_names)
        for const in code.co_consts:
            if isinstance(const, _CodeType):
                inner_globals, inner_names = _code_names(const)
                globals_.update(dict.fromkeys(inner_globals))
                names |= inner_names
        found = _names_cache[code] = (tuple(globals_), frozenset(names))
    return found


def _submodules(module: Any, names: frozenset[str]) -> tuple[str, ...]:
    """The submodules of ``module`` already imported here that the code reaches by attribute
    (``xml.etree.ElementTree`` from ``xml``): imported on load too, which importing ``xml``
    alone would not do (as cloudpickle does it)."""
    prefix = module.__name__ + "."
    return tuple(
        sorted(n for n in list(sys.modules) if n.startswith(prefix) and set(n[len(prefix) :].split(".")) <= names)
    )


def _const(value: Any) -> Any:
    if value is ...:
        return []
    if type(value) is tuple:
        return tuple(_const(v) for v in value)
    if type(value) is frozenset and ... in value:
        raise _NotPlain
    if isinstance(value, _CodeType):
        return _code(value)
    return value


def _code(code: Any) -> list[Any]:
    fields = [getattr(code, f) for f in _CODE_FIELDS]  # type: ignore[union-attr]
    fields[_CONSTS] = tuple(_const(c) for c in code.co_consts)
    return fields


def _plain(value: Any, budget: list[int]) -> None:
    """Raises _NotPlain unless ``value`` holds only plain values (see the module's docstring)."""
    t = type(value)
    if t in _LEAVES:
        return
    budget[0] -= 1
    if budget[0] < 0:
        raise _NotPlain
    if t is list or t is tuple or t is set or t is frozenset:
        if _LEAVES.issuperset(map(type, value)):  # the common case, checked in C
            return
        for item in value:
            _plain(item, budget)
        return
    if t is dict:
        if _LEAVES.issuperset(map(type, value)) and _LEAVES.issuperset(map(type, value.values())):
            return
        for k, v in value.items():
            _plain(k, budget)
            _plain(v, budget)
        return
    numpy = sys.modules.get("numpy")
    if numpy is not None and t is numpy.ndarray and not value.dtype.hasobject:
        return
    raise _NotPlain


def _importable(obj: Any) -> tuple[str, str] | None:
    """(module, qualname) where ``obj`` is found by name, or None."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or module == "__main__" or "<" in qualname:
        return None
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return (module, qualname) if found is obj else None


def _pair(value: Any, budget: list[int], names: frozenset[str]) -> tuple[Any, ...]:
    t = type(value)
    if t is _ModuleType:
        name = value.__name__
        if sys.modules.get(name) is not value:
            raise _NotPlain
        return ("m", name, _submodules(value, names))
    if t is _FunctionType or isinstance(value, type) or t is types.BuiltinFunctionType:
        where = _importable(value)
        if where is None:
            raise _NotPlain
        return ("r", *where)
    _plain(value, budget)
    return ("v", value)


#: The base globals dict of each module seen, so that the functions of one module share one dict
#: object within a payload (the walker's memo keeps it once): module globals -> (globals, base).
_bases: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}


def _base(module_globals: dict[str, Any]) -> dict[str, Any]:
    held = _bases.get(id(module_globals))
    if held is not None and held[0] is module_globals:
        return held[1]
    base = {k: module_globals[k] for k in _BASE_NAMES if k in module_globals}
    for v in base.values():
        _plain(v, [PLAIN_ITEMS])
    if len(_bases) >= 256:  # modules made at run time: the table stays small
        _bases.clear()
    _bases[id(module_globals)] = (module_globals, base)
    return base


def native(fn: Any) -> tuple[Any, list[Any]] | None:
    """The node's ``(metadata, frames)`` for function ``fn``, or None when ``fn`` keeps
    cloudpickle's path (importable by name, or holding what the node cannot: see the module's
    docstring). Called by the walker for every function it meets outside a serializer's
    metadata."""
    if type(fn) is not _FunctionType or _CODE_FIELDS is None or _importable(fn) is not None:
        return None
    try:
        budget = [PLAIN_ITEMS]
        code = fn.__code__
        module_globals = fn.__globals__
        names = {}
        global_names, used = _code_names(code)
        for name in global_names:
            if name in module_globals:
                names[name] = _pair(module_globals[name], budget, used)
        closure = fn.__closure__
        cells: Any = None
        if closure is not None:
            cells = []
            for cell in closure:
                try:
                    value = cell.cell_contents
                except ValueError:  # an empty cell (a name assigned after the function was made)
                    cells.append(())
                    continue
                if value is fn:
                    return None
                cells.append((_pair(value, budget, used),))
            cells = tuple(cells)
        defaults = fn.__defaults__
        if defaults is not None:
            defaults = tuple(_pair(v, budget, used) for v in defaults)
        kwdefaults = fn.__kwdefaults__
        if kwdefaults is not None:
            kwdefaults = {k: _pair(v, budget, used) for k, v in kwdefaults.items()}
        annotations = {k: _pair(v, budget, used) for k, v in fn.__annotations__.items()} or None
        attributes = {k: _pair(v, budget, used) for k, v in fn.__dict__.items()} or None
        doc = fn.__doc__
        if doc is not None and type(doc) is not str:
            return None
        meta = (
            _PYTHON, _code(code), fn.__name__, fn.__qualname__, fn.__module__, doc, defaults, kwdefaults,
            annotations, attributes, cells, _base(module_globals), names,
        )  # fmt: skip
    except (_NotPlain, RecursionError):
        return None
    return meta, []


# -- decoding ------------------------------------------------------------------------------------


def _value(pair: Any) -> Any:
    kind = pair[0]
    if kind == "v":
        return pair[1]
    module = sys.modules.get(pair[1]) or importlib.import_module(pair[1])
    if kind == "m":
        for submodule in pair[2]:
            if submodule not in sys.modules:
                importlib.import_module(submodule)
        return module
    if kind != "r":
        raise ValueError(f"unknown value kind {kind!r}")
    found: Any = module
    for part in pair[2].split("."):
        found = getattr(found, part)
    return found


def _unconst(value: Any) -> Any:
    t = type(value)
    if t is list:
        return _uncode(value) if value else ...
    if t is tuple:
        return tuple(_unconst(v) for v in value)
    return value


def _uncode(fields: list[Any]) -> Any:
    consts = fields[_CONSTS]
    if any(type(c) is list or type(c) is tuple for c in consts):
        fields = list(fields)
        fields[_CONSTS] = tuple(_unconst(c) for c in consts)
    return _CodeType(*fields)


def rebuild(meta: Any, frames: Any) -> Any:
    """The function a node describes (its metadata as :func:`native` wrote it, decoded: the
    ``base`` dict in it becomes the function's globals and is changed; no frames)."""
    try:
        python = meta[0]
        if python != _PYTHON:
            raise ProducerVersionError(
                f"this payload holds a function compiled by Python {python[0]}.{python[1]}, and its code "
                f"cannot run on this Python {_PYTHON[0]}.{_PYTHON[1]}: load it with Python "
                f"{python[0]}.{python[1]}, or send the function by reference (define it in a module both "
                "sides import)"
            )
        (_, code, name, qualname, module, doc, defaults, kwdefaults, annotations, attributes, cells, base,
         names) = meta  # fmt: skip
        # One dict for the payload's functions of one module (the memo shares it), as cloudpickle
        # shares one: what one function assigns to a global, the others read.
        if names:
            base.update({k: _value(v) for k, v in names.items()})
        base["__builtins__"] = _BUILTINS
        closure = None if cells is None else tuple(_Cell(_value(c[0])) if c else _Cell() for c in cells)
        fn = _FunctionType(
            _uncode(code), base, name, None if defaults is None else tuple(map(_value, defaults)), closure
        )
        fn.__qualname__ = qualname
        if fn.__module__ != module:
            fn.__module__ = module
        if fn.__doc__ != doc:
            fn.__doc__ = doc
        if kwdefaults is not None:
            fn.__kwdefaults__ = {k: _value(v) for k, v in kwdefaults.items()}
        if annotations:
            fn.__annotations__ = {k: _value(v) for k, v in annotations.items()}
        if attributes:
            fn.__dict__.update({k: _value(v) for k, v in attributes.items()})
    except DeserializationError:
        raise
    except ImportError as exc:
        raise DeserializationError(
            f"the payload's function {meta[3]!r} names module {exc.name!r}, which cannot be imported here "
            f"({exc}): install it on this side"
        ) from None
    except Exception as exc:  # noqa: BLE001 - malformed metadata raises anything of these calls
        raise DeserializationError(f"the payload holds an invalid {TAG} node: {exc!r}") from None
    return fn


class _FunctionNode:
    """Stands for the node in the registry's type table: nothing is ever of this type, so the
    walker reaches functions through :func:`native` alone, never through the registry (whose
    entries the pickle sink also consults, for every object inside a pickle island)."""


class FunctionSerializer:
    """The registry's entry for the tag (decoding, and the ``safe`` flag ``allow_pickle=False``
    reads); the walker itself calls :func:`native`, and writes its result through the same
    path as a registry entry's, with :data:`ENTRY` as the entry."""

    tag = TAG
    types = (_FunctionNode,)
    safe = False
    subclasses = False
    #: What the walker reads of an entry besides ``tag``, ``safe`` and ``encode``: no Arrow node.
    arrow = False

    def serialize(self, fn: Any) -> tuple[Any, list[Any]]:
        out = native(fn)
        if out is None:
            raise SerializationError(f"{fn!r} has no {TAG} node (it keeps cloudpickle's path)")
        return out

    encode = serialize  # the walker caches native()'s result first: reached only if it did not
    deserialize = staticmethod(rebuild)  # no method frame around it: called on every load


#: The entry the walker hands :func:`native`'s result to (``encode/serializer.rs``).
ENTRY = FunctionSerializer()
