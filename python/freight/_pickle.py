"""The pickle bridge: one pickler per payload for everything the native walker cannot encode.

The Rust encoder calls :func:`dump` with a *sink*. The sink's ``reduce`` (the pickler's
``reducer_override``) hands numpy arrays and registered types found anywhere in the object graph
back to freight, which encodes them as nodes and frames ("externals", rebuilt on load by
:func:`_external`). ``reducer_override`` is used rather than ``persistent_id`` because pickle
calls ``persistent_id`` for every object, ints and strs included, and that costs a call each;
``persistent_id`` is used only when a serializer is registered for such a built-in type;
``buffer_callback`` turns protocol-5 out-of-band buffers into frames. Plain pickle is tried
first (fast); when it fails, or the sink sees a lambda, a local function or anything defined in
``__main__``, the whole payload is pickled again by one cloudpickle pickler, so identity holds
across the payload (the same function twice is one function; functions share their globals;
dynamic classes stay the same class).
"""

from __future__ import annotations

import copyreg
import io
import pickle
import sys
import threading
from collections import ChainMap, deque
from typing import Any

from freight._unpicklable import _FILE_TYPES, _cannot_serialize, _diagnose, _note_where, _open_file_message
from freight.exceptions import DeserializationError, SerializationError

PROTOCOL = 5


class NeedsCloudpickle(Exception):
    """Raised by the sink when plain pickle would pickle something by a reference that does not
    resolve on the other side (a lambda, a local, anything in ``__main__``)."""


class _Pickler(pickle.Pickler):
    """Plain pickle, with the sink's ``reduce`` as ``reducer_override``. The C pickler looks the
    hook up on the instance when it is initialised, so the Rust method is called directly."""

    def __init__(self, file: io.BytesIO, sink: Any):
        self.reducer_override = sink.reduce
        super().__init__(file, protocol=PROTOCOL, buffer_callback=sink.buffer_callback)


def _refuse_file(obj: Any) -> Any:
    """Open files are refused, as pickle refuses them (cloudpickle would send a text file's
    contents as an ``io.StringIO``, which the other side would take for the file): a file handle
    does not mean the same thing in another process. ``sys.stdout`` and ``sys.stderr`` stay
    references to the other side's own, as cloudpickle sends them."""
    if obj is sys.stdout:
        return getattr, (sys, "stdout")
    if obj is sys.stderr:
        return getattr, (sys, "stderr")
    raise _OpenFileError(_open_file_message(obj))


class _OpenFileError(SerializationError):
    """What :func:`_refuse_file` raises; :func:`dump` says where the file was in the value."""


_CloudPickler: Any = None


def _cloud_pickler_class() -> Any:
    global _CloudPickler
    if _CloudPickler is None:
        import cloudpickle

        _cloud_reduce = cloudpickle.Pickler.reducer_override
        _cloud_init = cloudpickle.Pickler.__init__
        refuse = dict.fromkeys(_FILE_TYPES, _refuse_file)
        table = getattr(cloudpickle.Pickler, "_dispatch_table", None)
        if isinstance(table, dict):
            # cloudpickle's own reducers (code objects, cells, modules, ...) and the refusal of
            # files are looked up by the native hook, in a plain dict; the C pickler then reads
            # copyreg's table directly. cloudpickle's dispatch_table, a ChainMap of both, costs a
            # Python __getitem__ (and a KeyError) for every object it does not hold.
            reducers = {**table, **refuse}
            dispatch: Any = None
        else:  # a cloudpickle without that table: its dispatch_table, as it is
            reducers = {}
            dispatch = ChainMap(refuse, cloudpickle.Pickler.dispatch_table)

        class CloudPickler(cloudpickle.Pickler):
            """cloudpickle, asking freight's sink first: the hook is a native callable that tries
            the sink, then cloudpickle's own reducer_override (looked up on the instance at init)
            for classes and functions, then cloudpickle's reducers by type."""

            # What a pure-Python pickler using this hook consults after it (_unpicklable's probe).
            probe_dispatch_table = dispatch if dispatch is not None else copyreg.dispatch_table

            if dispatch is not None:
                dispatch_table = dispatch
            else:

                @property
                def dispatch_table(self) -> Any:
                    """None, for the C pickler (which reads it when it is initialised): it then
                    uses copyreg's table, without a Python call per object."""
                    raise AttributeError("dispatch_table")

            def __init__(self, file: Any, sink: Any):
                self.reducer_override = sink.chain(_cloud_reduce.__get__(self), reducers)
                _cloud_init(self, file, protocol=PROTOCOL, buffer_callback=sink.buffer_callback)

        _CloudPickler = CloudPickler
    return _CloudPickler


def _pickler(cloud: bool, file: Any, sink: Any) -> pickle.Pickler:
    pickler = _cloud_pickler_class()(file, sink) if cloud else _Pickler(file, sink)
    if sink.needs_persistent_id:
        # A serializer is registered for a type pickle saves without asking reducer_override
        # (int, str, list, ...): only persistent_id sees every object.
        pickler.persistent_id = sink.persistent_id  # type: ignore[method-assign]
    return pickler


def session_pickler(sink: Any) -> tuple[pickle.Pickler, bool, Any]:
    """The pickler of a payload's pickle islands (objects the walker has no native encoding for,
    pickled where they are met): one cloudpickle pickler whose memo spans the payload's islands,
    writing each island's stream to the sink; plain pickle's when cloudpickle is not installed.
    Returns (pickler, is_cloudpickle, dump): Rust calls ``dump(pickler, obj)`` once per island,
    the C pickler's own method (cloudpickle's Python override only rewords a RecursionError,
    which the whole-payload fallback reports anyway)."""
    try:
        _cloud_pickler_class()
    except ImportError:
        sink.begin(False)
        return _pickler(False, sink, sink), False, pickle.Pickler.dump
    return _pickler(True, sink, sink), True, pickle.Pickler.dump


class _IdleSession:
    """This thread's island pickler between payloads (see :func:`take_idle_session`): building a
    cloudpickle pickler and its hook costs about as much as pickling a small lambda, so each
    thread keeps the one its last payload used. It lives in a ``threading.local``, so it is freed
    on its own thread when the thread ends (its sink and hook are Rust objects that must be
    dropped on the thread that made them)."""

    __slots__ = ("owner", "session")

    def __init__(self) -> None:
        self.owner = threading.get_ident()
        self.session: tuple[Any, pickle.Pickler, bool, Any] | None = None

    def __del__(self) -> None:
        session, self.session = self.session, None
        if session is None:
            return
        if threading.get_ident() == self.owner:
            _close_hook(session[1])  # the hook refers back to the pickler: break the cycle
        else:
            # A forked child deleting the states of its parent's other threads: their Rust
            # objects cannot be dropped on this thread, so they stay (a few per thread, once).
            _STRANDED.append(session)


_idle = threading.local()
_STRANDED: list[Any] = []


def _close_hook(pickler: pickle.Pickler) -> None:
    close = getattr(pickler.reducer_override, "close", None)  # the cloudpickle pickler's only
    if close is not None:
        close()


def take_idle_session() -> tuple[Any, pickle.Pickler, bool, Any] | None:
    """This thread's idle island pickler, as (sink, pickler, is_cloudpickle, dump), taken out so
    that a payload pickled inside this one (a ``__reduce__`` calling ``freight.dumps``) builds its
    own; None when there is none (the first payload of the thread, or one inside another)."""
    holder = getattr(_idle, "holder", None)
    if holder is None:
        return None
    session, holder.session = holder.session, None
    return session


def keep_idle_session(sink: Any, pickler: pickle.Pickler, cloud: bool, dump: Any) -> None:
    """After a payload: its island pickler becomes the thread's idle one, its memo (which holds
    every object it pickled) and cloudpickle's record of function globals forgotten, so that the
    next payload's stream is the one a new pickler would write. When the thread already has one
    (this payload ran inside another), it is closed instead."""
    pickler.clear_memo()
    globals_ref = getattr(pickler, "globals_ref", None)
    if globals_ref:
        globals_ref.clear()  # keyed by id(): a dead module's id may be reused
    holder = getattr(_idle, "holder", None)
    if holder is None:
        holder = _idle.holder = _IdleSession()
    if holder.session is None:
        holder.session = (sink, pickler, cloud, dump)
    else:
        _close_hook(pickler)


# How pickle and cloudpickle say that they cannot pickle something (as opposed to an error raised
# by the object's own code while being pickled).
_PICKLE_FAILURES = (pickle.PicklingError, TypeError, AttributeError, NotImplementedError)


def dump(obj: Any, sink: Any, cloud_first: bool = False) -> tuple[bytes, bool]:
    """Pickles ``obj`` (with plain pickle, else cloudpickle). Returns (stream, used_cloudpickle).

    ``cloud_first``: the caller already knows plain pickle would fail (the object is a lambda,
    a local or lives in ``__main__``), so skip the attempt."""
    if not cloud_first:
        file = io.BytesIO()
        sink.begin(False)
        try:
            _pickler(False, file, sink).dump(obj)
            return file.getvalue(), False
        except (NeedsCloudpickle, pickle.PicklingError, TypeError, AttributeError, RecursionError, ValueError):
            pass
        except Exception as exc:
            # Raised by the object's own code (a __reduce__ raising RuntimeError, KeyError, OSError,
            # its own exception class): passed on as itself, saying where, as below.
            _note_where(exc, obj, sink, _cloud_pickler_class)
            _release(exc)
            raise
        sink.begin(True)  # forget what the failed attempt encoded
    file = io.BytesIO()
    pickler = _pickler(True, file, sink)
    done = False
    try:
        pickler.dump(obj)
        done = True
    except RecursionError as exc:
        raise SerializationError(
            f"{type(obj).__name__} nests too deeply for pickle ({exc}); flatten it or raise sys.setrecursionlimit"
        ) from exc
    except _OpenFileError as exc:
        finding = _diagnose(obj, sink, _cloud_pickler_class)
        if finding is None or not isinstance(finding.failed, _FILE_TYPES):
            raise SerializationError(str(exc)) from None
        raise SerializationError(_open_file_message(finding.failed, finding.path, finding.reached)) from None
    except SerializationError:
        raise
    except _PICKLE_FAILURES as exc:
        raise SerializationError(_cannot_serialize(obj, exc, _diagnose(obj, sink, _cloud_pickler_class))) from exc
    except Exception as exc:
        # Raised by the object's own code (its __reduce__, __getstate__, a property pickle
        # read): the caller's error, passed on as itself, as pickle does.
        _note_where(exc, obj, sink, _cloud_pickler_class)
        raise
    finally:
        pickler.reducer_override.close()  # the hook refers back to the pickler: break the cycle
        if not done and sys.exc_info()[1] is not None:
            _release(sys.exc_info()[1])
        # On an error, this frame lives on in the traceback: let go of the Rust objects now.
        del pickler, sink
    return file.getvalue(), True


def _release(error: BaseException) -> None:
    """Clears the frames of pickle's and cloudpickle's own methods in ``error``'s tracebacks (and
    its causes'): their ``self`` is the pickler. Otherwise a caller that keeps the error (in a
    cycle, as ``except ... as e`` with its traceback does) keeps the pickler and its hook, a Rust
    object that must be dropped on the thread that made it, until the garbage collector frees
    them on whatever thread it runs: an open file refused above raised "ChainedReduce is
    unsendable, but is being dropped on another thread" on zarr's event-loop thread. The
    frames of the user's own code (a ``__reduce__`` that raised) keep their locals."""
    import cloudpickle

    picklers = {pickle.__file__, cloudpickle.cloudpickle.__file__}
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename in picklers:
                tb.tb_frame.clear()
            tb = tb.tb_next
        current = current.__cause__ or current.__context__


def dump_island(obj: Any) -> tuple[bytes, bool]:
    """Pickles one value on its own (a value inside a serializer's metadata that freight cannot
    encode natively, such as the values of an object column). Returns (stream, used_cloudpickle)."""
    try:
        return pickle.dumps(obj, protocol=PROTOCOL), False
    except Exception:
        pass
    import cloudpickle

    try:
        return cloudpickle.dumps(obj, protocol=PROTOCOL), True
    except Exception as exc:
        raise SerializationError(
            f"cannot serialize a {type(obj).__qualname__} found in a serializer's metadata: {type(exc).__name__}: {exc}"
        ) from exc


_loading = threading.local()


def _by(producer: str | None) -> str:
    return f" (written by {producer})" if producer else ""


def _exception(cls: type, args: tuple, state: dict | None) -> BaseException:
    """Rebuilds an exception freight reduced (see pickle_sink.rs): ``cls(*args)`` as pickle
    would, or, when the class's ``__init__`` wants other arguments (a keyword-only one), the
    instance without ``__init__``; then its attributes. Only ever called by unpickling, which
    ``allow_pickle=False`` refuses."""
    try:
        exc = cls(*args)
    except TypeError:
        exc = cls.__new__(cls, *args)
        exc.args = args
    if state:
        exc.__dict__.update(state)
    return exc


def _external(pid: int) -> Any:
    """What ``reducer_override`` wrote for arrays and registered objects: decoded by the freight
    load that is running this unpickling (a stack, since a ``__setstate__`` may load again)."""
    stack = getattr(_loading, "sources", None)
    if not stack or stack[-1] is None:
        raise DeserializationError(
            "corrupt freight payload: its pickle refers to an external object the payload does not hold "
            "(or it was loaded without freight.loads)"
        )
    return stack[-1].persistent_load(pid)


def load(data: Any, buffers: list[Any], source: Any, producer: str | None) -> Any:
    """Unpickles a stream written by :func:`dump`; ``source.persistent_load`` decodes externals
    (``source`` is None when the payload has none)."""
    stack = getattr(_loading, "sources", None)
    if stack is None:
        stack = _loading.sources = []
    stack.append(source)
    try:
        if source is None:
            return pickle.loads(data, buffers=buffers) if buffers else pickle.loads(data)
        unpickler = pickle.Unpickler(io.BytesIO(data), buffers=buffers)
        unpickler.persistent_load = source.persistent_load  # type: ignore[method-assign]
        return unpickler.load()
    except DeserializationError:
        raise
    except Exception as exc:
        raise _load_error(exc, producer) from exc
    finally:
        stack.pop()


class LoadSession:
    """The unpickler of one payload's pickle islands (Pickle nodes of flavour 2, see
    :func:`session_pickler`): their streams come from one pickler, so a later island may refer to
    an object an earlier one memoized. Each island's stream is loaded, in tree order, by one
    ``pickle.Unpickler`` over a file that holds that stream; its out-of-band buffers are what the
    unpickler's buffer iterator yields next."""

    __slots__ = ("_buffers", "_file", "_unpickler")

    def __init__(self) -> None:
        self._file = io.BytesIO()
        self._buffers: deque[Any] = deque()
        self._unpickler = pickle.Unpickler(self._file, buffers=iter(self._buffers.popleft, None))

    def load(self, data: Any, buffers: list[Any], source: Any, producer: str | None) -> Any:
        file = self._file
        file.seek(0)
        file.truncate()
        file.write(data)
        file.seek(0)
        self._buffers.clear()
        self._buffers.extend(buffers)
        if source is not None:
            self._unpickler.persistent_load = source.persistent_load  # type: ignore[method-assign]
        stack = getattr(_loading, "sources", None)
        if stack is None:
            stack = _loading.sources = []
        stack.append(source)
        try:
            return self._unpickler.load()
        except DeserializationError:
            raise
        except Exception as exc:
            raise _load_error(exc, producer) from exc
        finally:
            stack.pop()


def load_failed(exc: BaseException, producer: str | None) -> BaseException:
    """What the decoder raises when its own ``pickle.loads`` of a stream without externals failed
    (see :func:`load`): a DeserializationError passed on, else one saying what failed."""
    if isinstance(exc, DeserializationError) or not isinstance(exc, Exception):
        return exc
    error = _load_error(exc, producer)
    error.__cause__ = exc
    return error


def _load_error(exc: Exception, producer: str | None) -> Exception:
    """What a failed unpickling raises (chained to ``exc``)."""
    if isinstance(exc, pickle.UnpicklingError):
        return DeserializationError(f"the pickle part of the payload{_by(producer)} is corrupt: {exc}")
    if isinstance(exc, (AttributeError, ModuleNotFoundError, ImportError)):
        from freight import _versions

        refused = _versions.pickle_refusal(exc)  # another version of the library wrote it
        if refused is not None:
            return refused
        return DeserializationError(
            f"the pickle part of the payload{_by(producer)} refers to code this process cannot import: "
            f"{type(exc).__name__}: {exc}; install the same modules (and versions) on this side"
        )
    if isinstance(exc, (RecursionError, MemoryError)):
        return DeserializationError(
            f"the pickle part of the payload{_by(producer)} nests too deeply or is too large to load: {exc!r}"
        )
    return DeserializationError(
        f"unpickling the payload{_by(producer)} failed: {type(exc).__name__}: {exc} (raised by the "
        "payload's pickle data or by a __setstate__/__reduce__ it calls; see the chained exception)"
    )
