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
protocols)``) register as they are (:meth:`FunctionFuseStorage.register_persistent_serializers`)
and run on the store's one side-object mechanism (:mod:`freight.storage.persistent`): objects of
exactly ``serializer_class`` go to ``pickle``, which writes them where ``protocols`` says (its
own format: HDF5, zarr, ...), in a side area of the task's value
(``<workflow>/<task>.freight-side/<save id>/<name>-<n>/``), and returns a reference that the
payload keeps. ``protocols`` is ``{FILE_PROTOCOL: files}`` on file and memory stores
(``files.open(filename, mode)``, ``files.remove(filename)``: real files in the side area's
folder on a file store, objects of the store on a memory store) and ``{S3_PROTOCOL: {"client":
s3fs.S3FileSystem, "folder": "bucket/path of the side area"}}`` on S3 (needs ``s3fs``). Saving a
task again, removing it or its workflow calls the serializers' ``remove`` and deletes the side
area with the value.

Values stored by earlier versions of freight kept side files under ``<workflow>/.functionfuse/bigdata/``;
reading one raises a :class:`DeserializationError` that says to recompute it.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Any

from freight.exceptions import DeserializationError, KeyNotFoundError, SerializationError, StorageError
from freight.storage.opening import open as open_store
from freight.storage.side_objects import SideArea

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

# Where earlier versions of freight kept the side files and their index, under each workflow.
_OLD_LAYOUT = ".functionfuse"

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


def _valid_name(name: str) -> bool:
    return isinstance(name, str) and bool(name) and all(name.split("/"))


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


# -- FunctionFuse's serializers on freight's persistent protocol --------------------------------


class _Failed(Exception):
    """A FunctionFuse serializer's own exception, carried through freight's wrapping (which
    makes it a FreightError's cause) so that the storage raises it as FunctionFuse does."""

    def __init__(self, error: BaseException):
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


def _raise_original(exc: BaseException) -> None:
    """Raises the FunctionFuse serializer's own exception if ``exc`` wraps one."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, _Failed):
            error = cause.error
            raise error.with_traceback(error.__traceback__) from None
        cause = cause.__cause__ or cause.__context__


class FunctionFuseSerializer:
    """A FunctionFuse persistent serializer as one of freight's (``save``/``load``/``remove``
    on a side area): ``pickle``/``unpickle``/``remove`` get the protocols of the area. The
    reference is FunctionFuse's ``(name, pid)``; ``unpickle`` and ``remove`` are those of the
    serializer registered under ``name``, as FunctionFuse looks them up."""

    safe = False  # loading runs the serializer's code, on names (pid) read from the payload
    subclasses = False  # FunctionFuse dispatches on the exact type

    def __init__(self, serializer: Any, storage: FunctionFuseStorage):
        self.serializer = serializer
        self.name = serializer.name
        self.tag = f"functionfuse.{serializer.name}"
        self.types = (serializer.serializer_class,)
        self._storage = storage

    def _named(self, ref: Any) -> tuple[Any, Any]:
        name, pid = ref
        serializer = self._storage.persistent_classes.get(name)
        if serializer is None:
            import pickle

            raise pickle.UnpicklingError(f"Deserialization error, unsupported persistent object {name}.")
        return serializer, pid

    def save(self, obj: Any, side: SideArea) -> Any:
        try:
            pid = self.serializer.pickle(obj, self._storage._protocols(side))
        except Exception as exc:
            raise _Failed(exc) from exc
        if pid is None:  # as pickle's persistent_id: None means "pickle it as usual"
            return NotImplemented
        name, ref = pid
        return (name, ref)

    def load(self, ref: Any, side: SideArea) -> Any:
        serializer, pid = self._named(ref)
        try:
            return serializer.unpickle(pid, self._storage._protocols(side))
        except Exception as exc:
            raise _Failed(exc) from exc

    def remove(self, ref: Any, side: SideArea) -> None:
        name, pid = ref
        serializer = self._storage.persistent_classes.get(name)
        if serializer is None:
            return  # not registered here: its side objects go with the side area
        try:
            serializer.remove(pid, self._storage._protocols(side))
        except (FileNotFoundError, KeyNotFoundError):
            raise  # already gone: no error
        except Exception as exc:
            raise _Failed(exc) from exc


class _OldLayout:
    """The tag that earlier versions of freight wrote for a FunctionFuse serializer's objects, whose side
    files lay under ``<workflow>/.functionfuse/bigdata/``: objects kept in the payload (pickled)
    still load; the others raise an error that says what to do."""

    safe = False

    class _Nothing:  # reachable by tag only: never an object's type
        pass

    types = (_Nothing,)

    def __init__(self, name: str):
        self.name = name

    def serialize(self, obj: Any) -> tuple[Any, list[Any]]:  # pragma: no cover - never dispatched
        raise SerializationError("freight writes FunctionFuse objects in its current layout")

    def deserialize(self, meta: Any, frames: list[Any]) -> Any:
        if meta is None and len(frames) == 1:
            import pickle

            return pickle.loads(frames[0])
        raise DeserializationError(
            "this value was stored by an earlier version of freight, whose FunctionFuse storage kept the side "
            f"files of {self.name!r} under <workflow>/.functionfuse/bigdata/<task>/; freight now keeps them beside "
            "each value (<workflow>/<task>.freight-side/) and does not read the old layout: remove the "
            "task or workflow (remove_task, remove_workflow) and run it again to recompute the value"
        )


def _check_serializer(serializer: Any) -> None:
    problems = []
    if not isinstance(getattr(serializer, "serializer_class", None), type):
        problems.append("serializer_class (a class)")
    name = getattr(serializer, "name", None)
    if not isinstance(name, str) or not name or "/" in name:
        problems.append("name (a non-empty str without '/')")
    problems += [f"{m}()" for m in ("pickle", "unpickle", "remove") if not callable(getattr(serializer, m, None))]
    if problems:
        raise SerializationError(
            f"{serializer!r} is not a FunctionFuse persistent serializer: it lacks {', '.join(problems)}"
        )


# -- the storages -----------------------------------------------------------------------------


class FunctionFuseStorage:
    """FunctionFuse's storage interface on a :class:`freight.storage.Store` (``self.store``),
    whose persistent serializers are the FunctionFuse ones registered here."""

    def __init__(self, url: str, **open_options: Any):
        self.store = open_store(url, **open_options)
        # FunctionFuse's attributes: serializer_class -> serializer, name -> serializer.
        self.persistent_serializers: dict[type, Any] = {}
        self.persistent_classes: dict[str, Any] = {}
        self._always_read = False

    @property
    def freight(self) -> Any:
        """The store's :class:`freight.Freight` (its own registry layer once a persistent
        serializer is registered)."""
        return self.store.freight

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
            self.store.register_persistent(FunctionFuseSerializer(serializer, self))
            old = _OldLayout(serializer.name)
            self.store.freight.register(old, tag=f"functionfuse:{serializer.name}", safe=False, replace=True)
            self.persistent_serializers[serializer.serializer_class] = serializer
            self.persistent_classes[serializer.name] = serializer

    def new_workflow(self, workflow_name: str) -> None:
        """Prepares the storage for a workflow's results (a no-op but on file storages, which
        create its folder, as FunctionFuse's does). Saving does not need it."""

    def save(self, workflow_name: str, filename: str, obj: Any) -> None:
        """Stores ``obj`` as the result of task ``filename`` of the workflow, replacing an earlier
        one (whose side objects are then removed).

        Raises:
            the serializer's own exceptions; SerializationError, StorageError.
        """
        try:
            self.store.save(self._key(workflow_name, filename), obj)
        except Exception as exc:  # a FreightError, or the serializer's own through it
            _raise_original(exc)
            raise

    def file_exists(self, workflow_name: str, filename: str) -> bool:
        """Whether a result of task ``filename`` is stored."""
        if not (_valid_name(workflow_name) and _valid_name(filename)):
            return False
        return self.store.exists(self._key(workflow_name, filename))

    def list_tasks(self, workflow_name: str, pattern: str) -> list[str]:
        """The names of the stored results of the workflow that match the glob ``pattern``
        (``glob.glob``'s rules: ``*``, ``?``, ``[...]``; '/' separates levels; names starting with
        '.' only match a pattern starting with '.'), sorted."""
        prefix = f"{workflow_name}/"
        names = [key[len(prefix) :] for key in self.store.list(prefix)]
        return [n for n in names if n.split("/", 1)[0] != _OLD_LAYOUT and _glob_matches(n, pattern)]

    def read_task(self, workflow_name: str, task_name: str) -> Any:
        """The stored result of task ``task_name``.

        Raises:
            FileNotFoundError: no result of that task is stored.
            the serializers' own exceptions (e.g. FileNotFoundError for a missing side file);
            DeserializationError: the stored value cannot be decoded.
        """
        if not (_valid_name(workflow_name) and _valid_name(task_name)):
            raise FileNotFoundError(f"Path {self._where(workflow_name, task_name)} is not found")
        try:
            return self.store.load(self._key(workflow_name, task_name))
        except KeyNotFoundError:
            raise FileNotFoundError(f"Path {self._where(workflow_name, task_name)} is not found") from None
        except Exception as exc:  # a FreightError, or the serializer's own through it
            _raise_original(exc)
            raise

    def remove_task(self, workflow_name: str, task_name: str | None = None, pattern: str | None = None) -> None:
        """Removes the result of task ``task_name``, or of every task matching the glob
        ``pattern`` (which takes precedence; none matching is no error), with its side objects.

        Raises:
            FileNotFoundError: no result of task ``task_name`` is stored.
            the serializer's own exception if its ``remove`` fails (nothing of that task removed).
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
        try:
            self.store.delete_prefix(f"{workflow_name}/")
        except StorageError as exc:
            failed = exc.__cause__.error if isinstance(exc.__cause__, _Failed) else exc.__cause__
            if failed is None:
                raise
            raise StorageError(
                f"{self._where(workflow_name, '')}: a persistent serializer failed to remove a side object "
                f"({type(failed).__name__}: {failed}); the workflow's stored results are removed"
            ) from failed
        finally:
            self._remove_folder(workflow_name)

    # -- the kinds' parts ----------------------------------------------------------------------

    def _protocols(self, side: SideArea) -> dict[str, Any]:
        """The ``protocols`` of a FunctionFuse serializer writing into ``side``."""
        return {FILE_PROTOCOL: side}

    def _check_protocol_dependencies(self) -> None:
        pass

    def _remove_folder(self, workflow_name: str) -> None:
        """Removes what is left of the workflow's folder (file storages)."""

    # -- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _key(workflow_name: str, task_name: str) -> str:
        return f"{workflow_name}/{task_name}"

    def _where(self, workflow_name: str, task_name: str) -> str:
        url = self.store.url
        return f"{url}{'' if url.endswith('/') else '/'}{workflow_name}/{task_name}"

    def _remove_task(self, workflow_name: str, task_name: str) -> None:
        key = self._key(workflow_name, task_name)
        if not (_valid_name(workflow_name) and _valid_name(task_name)) or not self.store.exists(key):
            raise FileNotFoundError(f"Path {self._where(workflow_name, task_name)} is not found")
        try:
            self.store.delete(key)
        except KeyNotFoundError:
            raise FileNotFoundError(f"Path {self._where(workflow_name, task_name)} is not found") from None
        except Exception as exc:  # a FreightError, or the serializer's own through it
            _raise_original(exc)
            raise

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__} {self.store.url}>"


class FileStorage(FunctionFuseStorage):
    """FunctionFuse's ``"file"`` storage: results in the folder ``path`` (``<path>/<workflow>/<task>``)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        super().__init__(self.path)

    def _folder(self, workflow_name: str) -> Any:
        return self.store._native.local_path(workflow_name)

    def new_workflow(self, workflow_name: str) -> None:
        os.makedirs(self._folder(workflow_name), exist_ok=True)

    def _remove_folder(self, workflow_name: str) -> None:
        import shutil

        shutil.rmtree(self._folder(workflow_name), ignore_errors=True)


class MemoryStorage(FunctionFuseStorage):
    """A storage in this process's memory (``{"kind": "memory"}``; not one of FunctionFuse's):
    results and side files are values of a ``memory://`` store."""

    def __init__(self) -> None:
        super().__init__("memory://")


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
        self._bucket = bare.partition("/")[0]
        self._s3: Any = None
        super().__init__(self.path, **_s3_open_options(s3fs_options))

    def _check_protocol_dependencies(self) -> None:
        _import_s3fs()

    def get_s3(self) -> Any:
        """The s3fs.S3FileSystem of ``s3fs_options`` (the persistent serializers' client)."""
        if self._s3 is None:
            self._s3 = _import_s3fs().S3FileSystem(**self.s3fs_pars)
        return self._s3

    def _protocols(self, side: SideArea) -> dict[str, Any]:
        # The side area as s3fs names it: "bucket/<its object path>" (freight-store's key encoding).
        return {S3_PROTOCOL: {"client": self.get_s3(), "folder": f"{self._bucket}/{side.object_path()}"}}
