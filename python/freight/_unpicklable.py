"""What cannot travel, and where it is: only after a pickling failure.

:func:`freight._pickle.dump` calls :func:`_note_where` on an error an object's own code raised,
and :func:`_cannot_serialize` (with :func:`_diagnose`'s finding) for the message of a value
nothing can pickle: the path to the entry that failed (``value["lock"]``, ``value[3].attr``) and
advice that fits its kind (a lock or a socket cannot travel; another class needs a serializer or
a ``__reduce__``). Nothing here runs while pickling succeeds. Imports nothing of freight but its
exceptions.
"""

from __future__ import annotations

import functools
import io
import pickle
import types
from collections.abc import Callable
from typing import Any


def _open_file_message(obj: Any, path: str = "value", reached: bool = True) -> str:
    """``path``: where the file is in the value (``value["log"][0]``); ``reached``: False when the
    file is somewhere inside what ``path`` names."""
    name = getattr(obj, "name", None)
    what = f"an open file ({type(obj).__name__} {name!r})"
    if path != "value":
        what = f"{path}, {what}" if reached else f"{what} inside {path}"
    return (
        f"cannot serialize {what}: a file handle does not mean the same thing in another process; send its "
        "path, or its contents (f.read())"
    )


# Every kind of open file of the io module (what open() returns, in any mode).
_FILE_TYPES = (io.TextIOWrapper, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.FileIO)

# The same, by (module, name), as pickle's messages name them.
_FILE_NAMES = frozenset((kind.__module__, kind.__name__) for kind in _FILE_TYPES)


def _note_where(exc: Exception, obj: Any, sink: Any, pickler_class: Callable[[], Any]) -> None:
    """Notes on ``exc``, an error the object's own code raised while ``obj`` was pickled, the
    path to the entry that raised it (found by pickling ``obj`` again: see below)."""
    finding = _diagnose(obj, sink, pickler_class)
    if finding is not None and finding.path != "value":
        where = f"{finding.path}, a {_type_name(finding.culprit)}" if finding.reached else finding.path
        exc.add_note(f"(raised while freight pickled {where})")
    else:
        exc.add_note(f"(raised while freight pickled a {_type_name(obj)})")


# -- what failed, and where: only after a failure ---------------------------------------------------
#
# pickle says which object it could not pickle ("cannot pickle '_thread.RLock' object") but not
# where that object was: a lock in a dict of a list of a dataclass reads as "cannot serialize a
# dict". On a failure, and only then, dump() pickles the value once more with pickle's
# pure-Python pickler, whose save() is overridden to keep the stack of objects being saved: when
# the pickling fails, that stack runs from the value to the object that failed. The probe uses
# the failed attempt's own reductions (freight's sink, then cloudpickle's reducer and dispatch
# table), so it fails where the real attempt failed; its output is thrown away (out-of-band
# buffers are never copied) and it gives up after _PROBE_LIMIT objects, so that a huge value
# costs a bounded time on its way to the error, and nothing on the way to a payload. Atomic
# values (ints, strs, floats, bytes, None, bools), which pickle always takes, are passed over
# without being pickled and counted apart (_ATOMIC_LIMIT): a long list of numbers beside the lock
# does not use up the search. When the probe gives up, the message names what pickle named.

_PROBE_LIMIT = 200_000  # objects saved before the probe gives up (about a second of pure-Python pickling)
_ATOMIC_LIMIT = 20 * _PROBE_LIMIT  # atomic values passed over before it gives up (about as long)
_ATOMIC = frozenset({int, str, float, bytes, bool, type(None)})
_SCAN_LIMIT = _PROBE_LIMIT  # entries of one container searched for the next step of the path
_REPR_LIMIT = 60


class _ProbeGaveUp(Exception):
    pass


class _Discard:
    """A file that keeps nothing: the probe's output."""

    def write(self, data: Any) -> int:
        return len(data)


def _out_of_band(_buffer: Any) -> bool:
    return True  # out of band: the probe never copies an array's data


class _Probe(pickle._Pickler):  # type: ignore[name-defined,misc]
    """pickle's pure-Python pickler, keeping the stack of the objects it is saving."""

    def __init__(self, hook: Any, persistent_id: Any, dispatch_table: Any) -> None:
        super().__init__(_Discard(), protocol=5, buffer_callback=_out_of_band)  # freight._pickle's
        self.reducer_override = hook
        if persistent_id is not None:
            self.persistent_id = persistent_id
        self.dispatch_table = dispatch_table
        self.stack: list[Any] = []
        self.left = _PROBE_LIMIT
        self.atomic_left = _ATOMIC_LIMIT
        # A serializer registered for a built-in type sees atomic values through persistent_id.
        self.skips_atomic = persistent_id is None

    def save(self, obj: Any, save_persistent_id: bool = True) -> None:
        if type(obj) in _ATOMIC and self.skips_atomic:
            self.atomic_left -= 1
            if self.atomic_left < 0:
                raise _ProbeGaveUp
            return  # pickle takes it whatever it is; the output is thrown away
        self.left -= 1
        if self.left < 0:
            raise _ProbeGaveUp
        self.stack.append(obj)
        super().save(obj, save_persistent_id)
        self.stack.pop()  # kept on a failure: the stack then ends at the object that failed


class _Finding:
    """Where the probe failed: ``path`` (``value["a"][3].attr``) of the deepest object of the
    failing stack that is an entry of its parent (a dict value, a list or tuple item, an
    attribute, a closure variable); ``culprit``, that object; ``failed``, the object pickle
    failed on, and ``reached``, whether it is ``culprit`` (not when it is a set's item or a
    dict's key, which have no path); ``outer``: the outermost object of the path that cannot
    travel to another process (a lock, a thread, a socket, ...) with its path, or None."""

    __slots__ = ("path", "culprit", "reached", "failed", "outer")

    def __init__(self, path: str, culprit: Any, reached: bool, failed: Any, outer: tuple[str, Any] | None):
        self.path = path
        self.culprit = culprit
        self.reached = reached
        self.failed = failed
        self.outer = outer


def _diagnose(obj: Any, sink: Any, pickler_class: Callable[[], Any]) -> _Finding | None:
    """Pickles ``obj`` again with :class:`_Probe` and says where it fails (None: the probe did not
    fail, or gave up). ``pickler_class`` gives the class of the failed attempt (freight._pickle's
    cloudpickle subclass), whose reductions the probe uses. Never raises."""
    try:
        cloud = pickler_class()
        hook = cloud(_Discard(), sink).reducer_override
    except Exception:  # noqa: BLE001 - a diagnosis only
        return None
    stack: list[Any] = []
    try:
        sink.begin(True)
        probe = _Probe(hook, sink.persistent_id if sink.needs_persistent_id else None, cloud.probe_dispatch_table)
        try:
            probe.dump(obj)
        except _ProbeGaveUp:
            return None
        except RecursionError:
            return None  # the pure-Python pickler nests deeper than the C one: not the failure
        except BaseException as exc:  # noqa: BLE001 - any failure is the one to locate
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            stack = probe.stack
            _clear_frames(exc)
        del probe
        if not stack:
            return None
        return _locate(stack)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - a diagnosis only: the caller reports what it has
        return None
    finally:
        hook.close()
        sink.begin(True)


def _clear_frames(error: BaseException) -> None:
    """Lets go of the probe's frames (they hold it, its hook and the sink, a Rust object that
    must be dropped on this thread)."""
    tb = error.__traceback__
    while tb is not None:
        try:
            tb.tb_frame.clear()
        except RuntimeError:  # the frame is still running (this one)
            pass
        tb = tb.tb_next


def _locate(stack: list[Any]) -> _Finding:
    """The path through ``stack`` (the objects being saved when pickling failed, from the value
    to the one that failed): each step is the next object of the stack that is an entry of the
    current one; objects between (the argument tuples and state dicts of reductions) are skipped."""
    path = "value"
    current = stack[0]
    outer = (path, current) if _kind(current) is not None else None
    i = 1
    while i < len(stack):
        for j in range(i, len(stack)):
            step = _step(current, stack[j])
            if step is not None:
                break
        else:
            break
        path += step
        current = stack[j]
        if outer is None and _kind(current) is not None:
            outer = (path, current)
        i = j + 1
    return _Finding(path, current, current is stack[-1], stack[-1], outer)


def _shown(key: Any) -> str:
    """A dict key as the path shows it: ``"name"`` (in double quotes), ``3``, or a shortened repr."""
    text = repr(key)
    if isinstance(key, str) and text.startswith("'") and '"' not in key:
        text = '"' + text[1:-1] + '"'
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


def _step(parent: Any, child: Any) -> str | None:
    """How ``child`` is reached from ``parent`` (``["key"]``, ``[3]``, ``.attr``), or None when it is
    not one of its entries. Identity only: nothing is compared, hashed or called."""
    if child is parent:
        return None
    if isinstance(parent, dict):
        for n, (key, value) in enumerate(parent.items()):
            if n >= _SCAN_LIMIT:
                break
            if value is child:
                return f"[{_shown(key)}]"
        return None
    if isinstance(parent, (list, tuple)):
        fields = getattr(type(parent), "_fields", None)  # a namedtuple: its fields by name
        for n, item in enumerate(parent):
            if n >= _SCAN_LIMIT:
                break
            if item is child:
                if isinstance(fields, tuple) and n < len(fields) and isinstance(fields[n], str):
                    return f".{fields[n]}"
                return f"[{n}]"
        return None
    if isinstance(parent, (set, frozenset, str, bytes, bytearray, int, float, complex)):
        return None
    if isinstance(parent, types.FunctionType):
        closure = parent.__closure__ or ()
        for n, cell in enumerate(closure):
            try:
                if cell.cell_contents is child:
                    return f".__closure__[{n}].cell_contents"
            except ValueError:  # an empty cell
                continue
        for name in parent.__code__.co_names:
            if parent.__globals__.get(name, _step) is child:
                return f".__globals__[{_shown(name)}]"
        return None
    if isinstance(parent, types.MethodType):
        return ".__self__" if parent.__self__ is child else ".__func__" if parent.__func__ is child else None
    if isinstance(parent, functools.partial):
        if parent.func is child:
            return ".func"
        for n, arg in enumerate(parent.args):
            if arg is child:
                return f".args[{n}]"
        for key, value in parent.keywords.items():
            if value is child:
                return f".keywords[{_shown(key)}]"
    if isinstance(parent, (type, types.ModuleType)):
        return None
    try:
        attributes = getattr(parent, "__dict__", None)
    except Exception:  # noqa: BLE001 - a __getattr__ or property raising something else
        attributes = None
    if isinstance(attributes, dict):
        for n, (name, value) in enumerate(attributes.items()):
            if n >= _SCAN_LIMIT:
                break
            if value is child and isinstance(name, str):
                return f".{name}"
    for cls in type(parent).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if not isinstance(name, str) or name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{cls.__name__.lstrip('_')}{name}"  # a private slot, as Python stores it
            try:
                if getattr(parent, name) is child:
                    return f".{name}"
            except Exception:  # noqa: BLE001, S112 - an unset slot, a failing descriptor
                continue
    return None


def _type_name(obj: Any) -> str:
    cls = type(obj)
    module = getattr(cls, "__module__", None)
    return cls.__qualname__ if module in (None, "builtins") else f"{module}.{cls.__qualname__}"


_PROCESS_BOUND = (
    "it belongs to this process and cannot travel to another one: leave it out of what you send and "
    "create a new one on the other side (an attribute: drop it in __getstate__ and recreate it in "
    "__setstate__, or send the object without it)"
)


def _kind(obj: Any) -> tuple[str, str] | None:
    """What ``obj`` is when it cannot travel to another process whatever serializer is used (a
    lock, a generator, a socket, ...): (what it is, what to do instead); None for any other
    object (a class pickle could serialize with a ``__reduce__`` or a registered serializer)."""
    if isinstance(obj, type):
        return None
    for base in _KIND_BASES:  # their subclasses too (an io class may be subclassed)
        if isinstance(obj, base):
            return _kind_of_class(base.__module__, base.__name__)
    cls = type(obj)
    return _kind_of_class(getattr(cls, "__module__", "") or "", cls.__name__, mapping=isinstance(obj, (dict, set)))


def _names(*classes: type) -> tuple[tuple[str, str], ...]:
    return tuple((cls.__module__, cls.__name__) for cls in classes)


_KIND_BASES = (
    types.GeneratorType,
    types.CoroutineType,
    types.AsyncGeneratorType,
    types.FrameType,
    types.TracebackType,
    *_FILE_TYPES,
)
_GENERATOR, _COROUTINE, _ASYNC_GENERATOR, _FRAME, _TRACEBACK = _names(*_KIND_BASES[:5])


def _kind_of_class(module: str, name: str, mapping: bool = False) -> tuple[str, str] | None:
    """:func:`_kind` of an object of the class ``module.name`` (``mapping``: the object is a dict
    or a set, which no weak-reference rule covers), from the class's names alone: also what
    pickle's own message names (``cannot pickle '_thread.RLock' object``)."""
    if (module, name) == _GENERATOR:
        return "a generator", (
            "its paused state cannot travel to another process: send the values it yields (list(...)), "
            "or what makes it (the generator function and its arguments) and call it on the other side"
        )
    if (module, name) in (_COROUTINE, _ASYNC_GENERATOR):
        return "a coroutine" if (module, name) == _COROUTINE else "an async generator", (
            "a started coroutine's state cannot travel to another process: send the coroutine function "
            "and its arguments and start it on the other side"
        )
    if (module, name) in (_FRAME, _TRACEBACK):
        return "a stack frame" if (module, name) == _FRAME else "a traceback", (
            "it is a running call of this process and cannot travel to another one: send what you need "
            "from it (traceback.format_exc() as text, the exception without its __traceback__)"
        )
    if module in ("_thread", "threading", "multiprocessing.synchronize", "queue", "_queue", "asyncio.locks"):
        lowered = name.lower()
        for word, what in (
            ("rlock", "a lock"),
            ("lock", "a lock"),
            ("condition", "a condition variable"),
            ("semaphore", "a semaphore"),
            ("event", "an event"),
            ("barrier", "a barrier"),
            ("thread", "a thread"),
            ("timer", "a thread"),
            ("queue", "a queue"),
        ):
            if word in lowered:
                if what == "a thread":
                    return what, (
                        "a running thread cannot travel to another process: send what it runs (its "
                        "function and arguments) and start a thread on the other side"
                    )
                return what, _PROCESS_BOUND
        return "a threading object", _PROCESS_BOUND
    if module in ("socket", "ssl", "select", "selectors") or name in ("socket", "SSLSocket"):
        return "a socket" if "socket" in name.lower() else "a selector", (
            "an open connection belongs to this process and cannot travel to another one: send the "
            "address it connects to and connect again on the other side"
        )
    if (module, name) in _FILE_NAMES:
        return "an open file", (
            "a file handle does not mean the same thing in another process; send its path, or its contents (f.read())"
        )
    if module == "mmap":
        return "a memory map", "send the file's path and map it again on the other side"
    if module == "subprocess" and name == "Popen":
        return "a running subprocess", (
            "wait for it here and send its result, or send the command and start it on the other side"
        )
    if module == "sqlite3":
        return "a database connection", (
            "send what connects to it (the database's path) and connect again on the other side"
        )
    if module in ("_weakref", "weakref") and not mapping:
        return "a weak reference", "send the object itself, or make the reference again on the other side"
    if module in ("concurrent.futures._base", "asyncio.futures", "_asyncio", "asyncio.tasks") and name in (
        "Future",
        "Task",
    ):
        return "a future", "send its result() instead, once it is done"
    if module.startswith("asyncio") and name.endswith("EventLoop"):
        return "an event loop", _PROCESS_BOUND
    return None


def _cannot_serialize(obj: Any, exc: BaseException, finding: _Finding | None) -> str:
    """The message for a value neither freight nor pickle nor cloudpickle could encode."""
    said = f"{type(exc).__name__}: {exc}"
    if finding is not None and (finding.outer is not None or _kind(finding.failed) is not None):
        path, culprit = finding.outer if finding.outer is not None else (finding.path, finding.failed)
        what, advice = _kind(culprit)  # type: ignore[misc]
        cls = _type_name(culprit)
        if cls not in what.split():  # "a lock (_thread.RLock)", but "a generator"
            what = f"{what} ({cls})"
        if finding.outer is None and not finding.reached:  # in a set, a dict key: no path to it
            subject = f"{what} inside {'the value' if path == 'value' else path}"
        else:
            subject = f"the value, {what}" if path == "value" else f"{path}, {what}"
        return f"cannot serialize {subject}: {advice} (pickle: {said})"
    if finding is not None:
        culprit = finding.failed
        cls = _type_name(culprit)
        if finding.reached:
            subject = f"the value (a {cls})" if finding.path == "value" else f"{finding.path} (a {cls})"
        else:
            subject = f"a {cls} inside {finding.path}"
        return (
            f"cannot serialize {subject}: neither freight's native encoder, a registered serializer, pickle nor "
            f"cloudpickle could encode it ({said}); register a serializer for {cls} with freight.register, or give "
            "the class a __reduce__ method (or __getstate__/__setstate__) that pickle can use"
        )
    import re  # only on this error path: not needed to import freight

    named = re.search(r"cannot pickle '([\w.]+)' object", str(exc))  # the probe gave up: what pickle named
    if named is not None:
        cls = named.group(1)
        module, _, name = cls.rpartition(".")
        kind = _kind_of_class(module or "builtins", name)
        if kind is not None:
            what, advice = kind
            if cls not in what.split():
                what = f"{what} ({cls})"
            return f"cannot serialize {what} inside the value (a {_type_name(obj)}): {advice} (pickle: {said})"
    return (
        f"cannot serialize a {_type_name(obj)}: neither freight's native encoder, a registered serializer, pickle nor "
        f"cloudpickle could encode it or something inside it ({said}); register a serializer for the type that "
        "fails with freight.register, or give it a __reduce__ method that pickle can use"
    )
