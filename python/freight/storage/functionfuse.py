"""FunctionFuse's storage interface on freight's stores: a drop-in for the storages that
``functionfuse.storage.storage_factory`` makes, for workflows (``LocalWorkflow``) that save each
node's result and read it back on the next run.

>>> from freight.storage.functionfuse import storage_factory
>>> storage = storage_factory({"kind": "file", "options": {"path": "storage"}})
>>> storage.new_workflow("run")
>>> storage.save("run", "_test_storage.<locals>.sum_0000", 2)
>>> storage.read_task("run", "_test_storage.<locals>.sum_0000"), storage.list_tasks("run", "*sum*")
(2, ['_test_storage.<locals>.sum_0000'])

Kinds: ``"file"`` (``options: {"path": folder}``), ``"S3"`` (``options: {"path": "bucket/prefix",
"s3fs": {...}}``, s3fs's options: ``key``, ``secret``, ``token``, ``endpoint_url`` or
``client_kwargs={"endpoint_url": ..., "region_name": ...}``) and ``"memory"`` (freight's own:
a new, empty store in this process). Each value is an ordinary freight payload under the key
``"<workflow>/<task>"`` (on a file store, the file ``<path>/<workflow>/<task>``, which
``freight.load`` reads).

FunctionFuse's persistent serializers (``serializer_class``, ``name``, classmethods
``pickle(obj, protocols) -> (name, pid)``, ``unpickle(pid, protocols)``, ``remove(pid,
protocols)``) register as they are (:meth:`register_persistent_serializers`): objects of exactly
``serializer_class`` go to ``pickle``, which writes them where ``protocols`` says (its own
format: HDF5, zarr, ...) and returns a reference that the payload keeps. ``protocols`` is
``{FILE_PROTOCOL: files}`` on file and memory stores (``files.open(filename, mode)``,
``files.remove(filename)``: a folder of the task on a file store, files kept in the store on a
memory store) and ``{S3_PROTOCOL: {"client": s3fs.S3FileSystem, "folder": path}}`` on S3 (needs
``s3fs``). The side objects of a task live under ``<workflow>/.functionfuse/bigdata/<task>/`` and
the references each task wrote under ``<workflow>/.functionfuse/index/<task>``; removing a task
(or the workflow) calls the serializers' ``remove`` for them.
"""

from __future__ import annotations

import contextvars
import fnmatch
import functools
import io
import os
import pickle
import posixpath
import re
import warnings
from collections.abc import Callable
from typing import IO, Any

from freight.exceptions import (
    DeserializationError,
    FreightError,
    KeyNotFoundError,
    SerializationError,
    StorageError,
)

__all__ = [
    "storage_factory",
    "FILE_PROTOCOL",
    "S3_PROTOCOL",
    "FunctionFuseStorage",
    "FileStorage",
    "MemoryStorage",
    "S3FileStorage",
]

# The keys of a serializer's ``protocols`` dict, spelled as FunctionFuse spells them
# (functionfuse.serializers.base).
FILE_PROTOCOL = "file_protocol"
S3_PROTOCOL = "s3 protocol"

# The first segment, under a workflow, of this module's own keys (side objects and their index):
# never a task (list_tasks skips it, save refuses it).
RESERVED = ".functionfuse"
_BIGDATA = f"{RESERVED}/bigdata"
_INDEX = f"{RESERVED}/index"

S3FS_EXTRA = "s3fs"


def storage_factory(opt: dict[str, Any]) -> FunctionFuseStorage:
    """Creates a storage from FunctionFuse's options dict: ``{"kind": "file" | "S3" | "memory",
    "options": {...}}`` (see the module docstring).

    Raises:
        ValueError: an unknown kind (FunctionFuse's ``"ray"`` storage has no freight counterpart).
        KeyError: a required option is missing (``path``).
    """
    kind = opt["kind"]
    options = opt.get("options") or {}
    if kind == "file":
        return FileStorage(options["path"])
    if kind in ("S3", "s3"):
        return S3FileStorage(options["path"], options.get("s3fs") or {})
    if kind == "memory":
        return MemoryStorage()
    raise ValueError(f"unknown storage kind {kind!r}; freight's FunctionFuse storages are 'file', 'S3' and 'memory'")


# -- names ----------------------------------------------------------------------------------------

# The bytes that object_store's PathPart percent-encodes in a key segment (besides the non-ASCII
# ones): freight's stores keep each segment of a key so encoded, as a file or folder name on a
# file store and in the object key on S3. Side files written beside the store (a file store's
# folders, s3fs) use the same names, so that the store lists and deletes them as its own keys.
_ENCODED = frozenset(b'/\\{^}%`]">[~<#|\r\n*?') | frozenset(range(0x20)) | {0x7F}


def _encode_segment(segment: str) -> str:
    if segment == ".":
        return "%2E"
    if segment == "..":
        return "%2E%2E"
    return "".join(f"%{b:02X}" if b in _ENCODED or b >= 0x80 else chr(b) for b in segment.encode("utf-8"))


def _encode_path(name: str) -> list[str]:
    segments = name.split("/")
    if not name or any(not s for s in segments):
        raise ValueError(f"invalid name {name!r}: non-empty segments separated by single '/'")
    return [_encode_segment(s) for s in segments]


def _task_segment(task_name: str) -> str:
    """A task name as one key segment (a task named "a" and one named "a/b" get disjoint areas)."""
    return task_name.replace("%", "%25").replace("/", "%2F")


def _segment_matches(name: str, pattern: str) -> bool:
    """One path segment against one glob segment, as ``glob.glob`` matches it: names starting
    with '.' only match a pattern starting with '.'; case-sensitive."""
    if not pattern:
        return False
    if name.startswith(".") and not pattern.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, pattern)


def _glob_matches(name: str, pattern: str) -> bool:
    names, patterns = name.split("/"), pattern.split("/")
    return len(names) == len(patterns) and all(_segment_matches(n, p) for n, p in zip(names, patterns))


# -- the save or read in progress --------------------------------------------------------------


class _Active:
    """What the registry adapters need while a task is saved or read: the protocols of the task
    (built on first use), the (name, pid) pairs written, and the exception a serializer raised
    (freight wraps it; save and read_task raise the serializer's own, as FunctionFuse does)."""

    def __init__(self, make_protocols: Callable[[], dict[str, Any]]):
        self._make_protocols = make_protocols
        self._protocols: dict[str, Any] | None = None
        self.written: list[tuple[str, Any]] = []
        self.error: BaseException | None = None

    @property
    def protocols(self) -> dict[str, Any]:
        if self._protocols is None:
            self._protocols = self._make_protocols()
        return self._protocols


_ACTIVE: contextvars.ContextVar[_Active | None] = contextvars.ContextVar("freight_functionfuse", default=None)


class _PersistentAdapter:
    """A FunctionFuse persistent serializer as an entry of the storage's registry layer: encode
    calls ``pickle(obj, protocols)`` and keeps its ``(name, pid)`` as metadata (no frames),
    decode calls ``unpickle(pid, protocols)`` of the serializer registered under that name."""

    safe = False  # decoding runs the serializer's code, on names (pid) read from the payload
    subclasses = False  # FunctionFuse dispatches on the exact type

    def __init__(self, serializer: Any, classes: dict[str, Any]):
        self.serializer = serializer
        self.name = serializer.name
        self.tag = f"functionfuse:{serializer.name}"
        self.types = (serializer.serializer_class,)
        self._classes = classes  # the storage's persistent_classes: name -> serializer

    def serialize(self, obj: Any) -> tuple[Any, list[Any]]:
        active = _ACTIVE.get()
        if active is None:
            raise SerializationError(
                f"objects of {type(obj).__qualname__} go to the FunctionFuse persistent serializer {self.name!r}, "
                "which writes through a FunctionFuse storage: save them with storage.save()"
            )
        try:
            pid = self.serializer.pickle(obj, active.protocols)
        except BaseException as exc:
            active.error = exc
            raise
        if pid is None:  # as pickle's persistent_id: None means "pickle it as usual"
            return None, [pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)]
        name, ref = pid
        active.written.append((name, ref))
        return (name, ref), []

    def deserialize(self, meta: Any, frames: list[Any]) -> Any:
        if meta is None:
            return pickle.loads(frames[0])
        active = _ACTIVE.get()
        if active is None:
            raise DeserializationError(
                f"the payload holds an object of the FunctionFuse persistent serializer {self.name!r}, kept beside "
                "it: read it with storage.read_task()"
            )
        name, pid = meta
        serializer = self._classes.get(name)
        if serializer is None:
            raise pickle.UnpicklingError(f"Deserialization error, unsupported persistent object {name}.")
        try:
            return serializer.unpickle(pid, active.protocols)
        except BaseException as exc:
            active.error = exc
            raise


def _check_serializer(serializer: Any) -> None:
    problems = []
    if not isinstance(getattr(serializer, "serializer_class", None), type):
        problems.append("serializer_class (a class)")
    name = getattr(serializer, "name", None)
    if not isinstance(name, str) or not name:
        problems.append("name (a non-empty str)")
    problems += [f"{m}()" for m in ("pickle", "unpickle", "remove") if not callable(getattr(serializer, m, None))]
    if problems:
        raise SerializationError(
            f"{serializer!r} is not a FunctionFuse persistent serializer: it lacks {', '.join(problems)}"
        )


# -- the storages -----------------------------------------------------------------------------


class FunctionFuseStorage:
    """FunctionFuse's storage interface on a :class:`freight.storage.Store` (``self.store``)
    with its own :class:`freight.Freight` (``self.freight``, a registry layer over the global
    one, which holds the persistent serializers)."""

    def __init__(self, url: str, **open_options: Any):
        from freight._api import Freight
        from freight.registry import GLOBAL, Registry
        from freight.storage import open as open_store

        self.freight = Freight(registry=Registry(parent=GLOBAL))
        self.store = open_store(url, freight=self.freight, **open_options)
        # FunctionFuse's attributes: serializer_class -> serializer, name -> serializer.
        self.persistent_serializers: dict[type, Any] = {}
        self.persistent_classes: dict[str, Any] = {}
        self._always_read = False

    # -- FunctionFuse's interface --------------------------------------------------------------

    @property
    def always_read(self) -> bool:
        """Whether a workflow reads each result back from the storage right after saving it
        (so that it continues with the stored object, e.g. an array backed by the saved file,
        rather than the computed one). The storage keeps the flag; ``LocalWorkflow`` reads it."""
        return self._always_read

    @always_read.setter
    def always_read(self, value: bool) -> None:
        self._always_read = value

    def register_persistent_serializers(self, *serializers: Any) -> None:
        """Registers FunctionFuse persistent serializers (classes or objects with
        ``serializer_class``, ``name``, ``pickle``, ``unpickle``, ``remove``); a later one with the
        same class or name replaces the earlier one.

        Raises:
            SerializationError: an argument lacks one of those attributes.
            StorageError: a serializer needs s3fs (any, on an S3 storage) and it is not installed.
        """
        for serializer in serializers:
            _check_serializer(serializer)
        self._check_protocol_dependencies()
        for serializer in serializers:
            adapter = _PersistentAdapter(serializer, self.persistent_classes)
            self.freight.register(adapter, tag=adapter.tag, types=adapter.types, safe=False, replace=True)
            self.persistent_serializers[serializer.serializer_class] = serializer
            self.persistent_classes[serializer.name] = serializer

    def new_workflow(self, workflow_name: str) -> None:
        """Prepares the storage for a workflow's results (a no-op but on file storages, which
        create its folder, as FunctionFuse's does). Saving does not need it."""

    def save(self, workflow_name: str, filename: str, obj: Any) -> None:
        """Stores ``obj`` as the result of task ``filename`` of the workflow, replacing an earlier
        one (whose side objects are then removed).

        Raises:
            ValueError: ``filename`` is under the reserved name ``.functionfuse``.
            the serializer's own exceptions; SerializationError, StorageError.
        """
        self._check_task(filename)
        active = _Active(lambda: self._protocols(workflow_name, filename))
        token = _ACTIVE.set(active)
        try:
            self.store.save(self._key(workflow_name, filename), obj)
        except BaseException as exc:
            # Side objects written before the failure belong to no value: remove them.
            self._remove_pairs(active.written, lambda: active.protocols, quiet=True)
            self._raise_original(exc, active)
            raise
        finally:
            _ACTIVE.reset(token)
        self._update_index(workflow_name, filename, active)

    def file_exists(self, workflow_name: str, filename: str) -> bool:
        """Whether a result of task ``filename`` is stored."""
        if self._is_reserved(filename) or not (_valid_name(workflow_name) and _valid_name(filename)):
            return False
        return self.store.exists(self._key(workflow_name, filename))

    def list_tasks(self, workflow_name: str, pattern: str) -> list[str]:
        """The names of the stored results of the workflow that match the glob ``pattern``
        (``glob.glob``'s rules: ``*``, ``?``, ``[...]``; '/' separates levels; names starting with
        '.' only match a pattern starting with '.'), sorted."""
        prefix = f"{workflow_name}/"
        names = [key[len(prefix) :] for key in self.store.list(prefix)]
        return [n for n in names if not self._is_reserved(n) and _glob_matches(n, pattern)]

    def read_task(self, workflow_name: str, task_name: str) -> Any:
        """The stored result of task ``task_name``.

        Raises:
            FileNotFoundError: no result of that task is stored.
            the serializers' own exceptions (e.g. FileNotFoundError for a missing side file);
            DeserializationError: the stored value cannot be decoded.
        """
        if self._is_reserved(task_name) or not (_valid_name(workflow_name) and _valid_name(task_name)):
            raise FileNotFoundError(f"Path {self._where(workflow_name, task_name)} is not found")
        active = _Active(lambda: self._protocols(workflow_name, task_name))
        token = _ACTIVE.set(active)
        try:
            return self.store.load(self._key(workflow_name, task_name))
        except KeyNotFoundError:
            raise FileNotFoundError(f"Path {self._where(workflow_name, task_name)} is not found") from None
        except BaseException as exc:
            self._raise_original(exc, active)
            raise
        finally:
            _ACTIVE.reset(token)

    def remove_task(self, workflow_name: str, task_name: str | None = None, pattern: str | None = None) -> None:
        """Removes the result of task ``task_name``, or of every task matching the glob
        ``pattern`` (which takes precedence; none matching is no error), with its side objects.

        Raises:
            FileNotFoundError: no result of task ``task_name`` is stored.
        """
        if pattern:
            for name in self.list_tasks(workflow_name, pattern):
                self._remove_task(workflow_name, name)
        elif task_name is None:
            raise TypeError("remove_task() needs task_name or pattern")
        else:
            self._remove_task(workflow_name, task_name)

    def remove_workflow(self, workflow_name: str) -> None:
        """Removes everything stored for the workflow (no error if nothing is). The serializers'
        ``remove`` is called for each side object first.

        Raises:
            StorageError: a serializer's ``remove`` failed (everything else is removed anyway).
        """
        if not _valid_name(workflow_name):
            raise ValueError(f"invalid workflow name {workflow_name!r}")
        errors: list[BaseException] = []
        index = f"{workflow_name}/{_INDEX}/"
        try:
            for key in self.store.list(index):
                task = _task_from_segment(key[len(index) :])
                pairs = self._load_index(workflow_name, task)
                self._remove_pairs(pairs, functools.partial(self._protocols, workflow_name, task), errors=errors)
        finally:
            self.store.delete_prefix(f"{workflow_name}/")
            self._remove_local(workflow_name, None)
        if errors:
            raise StorageError(
                f"{self._where(workflow_name, '')}: a persistent serializer failed to remove a side object "
                f"({type(errors[0]).__name__}: {errors[0]}); the workflow's stored results are removed"
            ) from errors[0]

    # -- the kinds' parts ----------------------------------------------------------------------

    def _protocols(self, workflow_name: str, task_name: str) -> dict[str, Any]:
        raise NotImplementedError

    def _check_protocol_dependencies(self) -> None:
        pass

    def _remove_local(self, workflow_name: str, task_name: str | None) -> None:
        """Removes what is left of the side area on a local folder (file storages)."""

    # -- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _key(workflow_name: str, task_name: str) -> str:
        return f"{workflow_name}/{task_name}"

    @staticmethod
    def _bigdata(workflow_name: str, task_name: str) -> str:
        """The key prefix of a task's side objects (no trailing '/')."""
        return f"{workflow_name}/{_BIGDATA}/{_task_segment(task_name)}"

    @staticmethod
    def _index_key(workflow_name: str, task_name: str) -> str:
        return f"{workflow_name}/{_INDEX}/{_task_segment(task_name)}"

    @staticmethod
    def _is_reserved(task_name: str) -> bool:
        return task_name.split("/", 1)[0] == RESERVED

    def _check_task(self, task_name: str) -> None:
        if self._is_reserved(task_name):
            raise ValueError(f"task name {task_name!r}: names under {RESERVED!r} are reserved for the storage's own")

    def _where(self, workflow_name: str, task_name: str) -> str:
        url = self.store.url
        return f"{url}{'' if url.endswith('/') else '/'}{workflow_name}/{task_name}"

    @staticmethod
    def _raise_original(exc: BaseException, active: _Active) -> None:
        """Raises the serializer's own exception where freight wrapped it."""
        error = active.error
        if error is not None and exc is not error and isinstance(exc, FreightError):
            cause: BaseException | None = exc
            while cause is not None:
                if cause is error:
                    raise error.with_traceback(error.__traceback__) from None
                cause = cause.__cause__

    def _load_index(self, workflow_name: str, task_name: str) -> list[tuple[str, Any]]:
        try:
            pairs = self.store.load(self._index_key(workflow_name, task_name))
        except KeyNotFoundError:
            return []
        return [(name, pid) for name, pid in pairs]

    def _update_index(self, workflow_name: str, task_name: str, active: _Active) -> None:
        """Writes the (name, pid) pairs the save wrote, and removes the side objects of the value
        it replaced."""
        if not active.written and not self.persistent_classes:
            return  # nothing written, and nothing could have been (no serializers): no requests
        key = self._index_key(workflow_name, task_name)
        old = self._load_index(workflow_name, task_name)
        if active.written:
            self.store.save(key, [(name, pid) for name, pid in active.written])
        elif old:
            self.store.delete(key)
        stale = [pair for pair in old if not _has_pair(active.written, pair)]
        if stale:
            errors: list[BaseException] = []
            self._remove_pairs(stale, lambda: self._protocols(workflow_name, task_name), errors=errors)
            if errors:
                warnings.warn(
                    f"{self._where(workflow_name, task_name)}: removing a side object of the replaced value failed "
                    f"({type(errors[0]).__name__}: {errors[0]})",
                    RuntimeWarning,
                    stacklevel=3,
                )

    def _remove_pairs(
        self,
        pairs: list[tuple[str, Any]],
        make_protocols: Callable[[], dict[str, Any]],
        *,
        errors: list[BaseException] | None = None,
        quiet: bool = False,
    ) -> None:
        """Calls each pair's serializer's ``remove``. A side object already gone is no error;
        other failures are raised, or collected in ``errors``, or ignored (``quiet``). Pairs of
        serializers not registered here are skipped: their side objects go with the side area."""
        protocols: dict[str, Any] | None = None
        for name, pid in pairs:
            serializer = self.persistent_classes.get(name)
            if serializer is None:
                continue
            try:
                if protocols is None:
                    protocols = make_protocols()
                serializer.remove(pid, protocols)
            except (FileNotFoundError, KeyNotFoundError):
                pass
            except Exception as exc:
                if quiet:
                    continue
                if errors is None:
                    raise
                errors.append(exc)

    def _remove_task(self, workflow_name: str, task_name: str) -> None:
        key = self._key(workflow_name, task_name)
        if self._is_reserved(task_name) or not self.store.exists(key):
            raise FileNotFoundError(f"Path {self._where(workflow_name, task_name)} is not found")
        pairs = self._load_index(workflow_name, task_name)
        self._remove_pairs(pairs, lambda: self._protocols(workflow_name, task_name))
        try:
            self.store.delete(key)
        except KeyNotFoundError:
            raise FileNotFoundError(f"Path {self._where(workflow_name, task_name)} is not found") from None
        try:
            self.store.delete(self._index_key(workflow_name, task_name))
        except KeyNotFoundError:
            pass
        if pairs or self.persistent_classes:
            self.store.delete_prefix(self._bigdata(workflow_name, task_name) + "/")
            self._remove_local(workflow_name, task_name)

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__} {self.store.url}>"


def _valid_name(name: str) -> bool:
    return isinstance(name, str) and bool(name) and all(name.split("/"))


def _task_from_segment(segment: str) -> str:
    return re.sub("%(25|2F)", lambda m: "%" if m.group(1) == "25" else "/", segment)


def _has_pair(pairs: list[tuple[str, Any]], pair: tuple[str, Any]) -> bool:
    for p in pairs:
        try:
            if p == pair:
                return True
        except Exception:  # a pid whose == gives no bool (an array): not the same
            pass
    return False


# -- file ---------------------------------------------------------------------------------------


class LocalFiles:
    """``protocols[FILE_PROTOCOL]`` on a file storage: files in the task's folder
    ``<path>/<workflow>/.functionfuse/bigdata/<task>/`` (``path`` is that folder)."""

    def __init__(self, path: str):
        self.path = path

    def _file(self, filename: str) -> str:
        return os.path.join(self.path, *_encode_path(filename))

    def open(self, filename: str, mode: str = "rb") -> IO[Any]:
        path = self._file(filename)
        if any(c in mode for c in "wax"):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, mode)

    def remove(self, filename: str) -> None:
        os.remove(self._file(filename))

    def __repr__(self) -> str:
        return f"<LocalFiles {self.path}>"


class FileStorage(FunctionFuseStorage):
    """FunctionFuse's ``"file"`` storage: results in the folder ``path`` (``<path>/<workflow>/<task>``)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        super().__init__(self.path)
        url = self.store.url
        self._root = url[len("file://") :] if url.startswith("file://") else os.path.abspath(self.path)

    def _folder(self, workflow_name: str) -> str:
        return os.path.join(self._root, *_encode_path(workflow_name))

    def _bigdata_folder(self, workflow_name: str, task_name: str) -> str:
        return os.path.join(self._root, *_encode_path(self._bigdata(workflow_name, task_name)))

    def new_workflow(self, workflow_name: str) -> None:
        os.makedirs(self._folder(workflow_name), exist_ok=True)

    def _protocols(self, workflow_name: str, task_name: str) -> dict[str, Any]:
        return {FILE_PROTOCOL: LocalFiles(self._bigdata_folder(workflow_name, task_name))}

    def _remove_local(self, workflow_name: str, task_name: str | None) -> None:
        import shutil

        if task_name is None:
            shutil.rmtree(self._folder(workflow_name), ignore_errors=True)
            return
        shutil.rmtree(self._bigdata_folder(workflow_name, task_name), ignore_errors=True)
        # Empty folders left above it, up to the workflow's.
        folder = os.path.join(self._folder(workflow_name), *_BIGDATA.split("/"))
        for path in (folder, os.path.dirname(folder)):
            try:
                os.rmdir(path)
            except OSError:
                break


# -- memory -------------------------------------------------------------------------------------


class _StoredFile(io.BytesIO):
    """A file kept as a value of the store: read in whole when opened, written back on close."""

    def __init__(self, store: Any, key: str, data: bytes, *, writable: bool, append: bool):
        super().__init__(data)
        self._store, self._key = store, key
        self._can_write = writable
        if append:
            self.seek(0, io.SEEK_END)

    def writable(self) -> bool:
        return self._can_write and super().writable()

    def _refuse(self) -> None:
        raise io.UnsupportedOperation("write: the file is not open for writing")

    def write(self, data: Any) -> int:
        if not self._can_write:
            self._refuse()
        return super().write(data)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def truncate(self, size: int | None = None) -> int:
        if not self._can_write:
            self._refuse()
        return super().truncate(size)

    def close(self) -> None:
        if not self.closed and self._can_write:
            self._store.save(self._key, self.getvalue())
        super().close()


class StoredFiles:
    """``protocols[FILE_PROTOCOL]`` on a memory storage: each file is a value of the store,
    under ``<workflow>/.functionfuse/bigdata/<task>/<filename>`` (``prefix``)."""

    def __init__(self, store: Any, prefix: str):
        self.store = store
        self.prefix = prefix if prefix.endswith("/") else prefix + "/"

    def _key(self, filename: str) -> str:
        _encode_path(filename)  # checks it
        return self.prefix + filename

    def open(self, filename: str, mode: str = "rb") -> IO[Any]:
        key = self._key(filename)
        kind = mode.replace("b", "").replace("t", "").replace("+", "")
        if len(kind) != 1 or kind not in "rwax" or len(set(mode)) != len(mode):
            raise ValueError(f"invalid mode: {mode!r}")
        update = "+" in mode
        data = b""
        if kind in "ra":
            try:
                data = bytes(self.store.load(key))
            except KeyNotFoundError:
                if kind == "r":
                    raise FileNotFoundError(f"No such file: {filename!r} ({key})") from None
        elif kind == "x" and self.store.exists(key):
            raise FileExistsError(f"File exists: {filename!r} ({key})")
        f = _StoredFile(self.store, key, data, writable=kind != "r" or update, append=kind == "a")
        if "b" not in mode:
            return io.TextIOWrapper(f, encoding="utf-8")
        return f

    def remove(self, filename: str) -> None:
        try:
            self.store.delete(self._key(filename))
        except KeyNotFoundError:
            raise FileNotFoundError(f"No such file: {filename!r}") from None

    def __repr__(self) -> str:
        return f"<StoredFiles {self.store.url}{self.prefix}>"


class MemoryStorage(FunctionFuseStorage):
    """A storage in this process's memory (``{"kind": "memory"}``; not one of FunctionFuse's):
    results and side files are values of a ``memory://`` store."""

    def __init__(self) -> None:
        super().__init__("memory://")

    def _protocols(self, workflow_name: str, task_name: str) -> dict[str, Any]:
        return {FILE_PROTOCOL: StoredFiles(self.store, self._bigdata(workflow_name, task_name))}


# -- S3 -----------------------------------------------------------------------------------------


def _s3_open_options(s3fs_options: dict[str, Any]) -> dict[str, Any]:
    """freight.storage.open's S3 options from s3fs.S3FileSystem's (``key``, ``secret``,
    ``token``, ``endpoint_url`` or ``client_kwargs["endpoint_url"]``, ``client_kwargs["region_name"]``)."""
    client = dict(s3fs_options.get("client_kwargs") or {})
    if s3fs_options.get("anon"):
        raise StorageError(
            "anonymous S3 access (s3fs anon=True) is not supported by freight's S3 store; pass key and secret"
        )
    endpoint = s3fs_options.get("endpoint_url") or client.get("endpoint_url")
    region = (
        client.get("region_name")
        or s3fs_options.get("region_name")
        or s3fs_options.get("region")
        or (s3fs_options.get("config_kwargs") or {}).get("region_name")
    )
    options: dict[str, Any] = {
        "endpoint_url": endpoint,
        "region": region,
        "access_key_id": s3fs_options.get("key") or client.get("aws_access_key_id"),
        "secret_access_key": s3fs_options.get("secret") or client.get("aws_secret_access_key"),
        "session_token": s3fs_options.get("token") or client.get("aws_session_token"),
    }
    if endpoint:
        options["allow_http"] = str(endpoint).startswith("http://")
    return {k: v for k, v in options.items() if v is not None}


def _import_s3fs() -> Any:
    try:
        import s3fs
    except ImportError as exc:
        raise StorageError(
            "FunctionFuse persistent serializers on an S3 storage write through s3fs (S3_PROTOCOL), which is not "
            f"installed; install it with: pip install 'freight[{S3FS_EXTRA}]'"
        ) from exc
    return s3fs


class S3FileStorage(FunctionFuseStorage):
    """FunctionFuse's ``"S3"`` storage: results under ``s3://<path>`` (``path``: "bucket/prefix");
    ``s3fs_options`` are s3fs.S3FileSystem's, mapped to freight's S3 options (and given to s3fs
    as they are for the persistent serializers' client)."""

    def __init__(self, path: str, s3fs_options: dict[str, Any] | None = None):
        s3fs_options = dict(s3fs_options or {})
        bare = str(path)
        for scheme in ("s3://", "s3:/"):
            if bare.startswith(scheme):
                bare = bare[len(scheme) :]
                break
        bare = bare.strip("/")
        if not bare:
            raise StorageError(f"an S3 storage needs a path 'bucket/prefix'; got {path!r}")
        self.s3fs_pars = s3fs_options
        self.path = f"s3://{bare}"
        bucket, _, prefix = bare.partition("/")
        self._bucket = bucket
        self._prefix = [s for s in prefix.split("/") if s]
        self._s3: Any = None
        super().__init__(self.path, **_s3_open_options(s3fs_options))

    def _check_protocol_dependencies(self) -> None:
        _import_s3fs()

    def get_s3(self) -> Any:
        """The s3fs.S3FileSystem of ``s3fs_options`` (the persistent serializers' client)."""
        if self._s3 is None:
            self._s3 = _import_s3fs().S3FileSystem(**self.s3fs_pars)
        return self._s3

    def _protocols(self, workflow_name: str, task_name: str) -> dict[str, Any]:
        segments = [_encode_segment(s) for s in self._prefix] + _encode_path(self._bigdata(workflow_name, task_name))
        folder = posixpath.join(self._bucket, *segments)
        return {S3_PROTOCOL: {"client": self.get_s3(), "folder": folder}}
