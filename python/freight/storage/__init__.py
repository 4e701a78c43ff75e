"""Where payloads are kept: a store of named values on a local folder (the default), in memory,
or in S3, on Rust's ``object_store`` (crates/freight-store), every call with the GIL released.

>>> import freight.storage as fs
>>> store = fs.open("file://./results")          # or a plain path; "memory://"; "s3://bucket/prefix"
>>> store.save("run-3/prices", prices)          # compression="auto" by default
>>> prices = store.load("run-3/prices")         # mmap=True on local files: arrays view the file
>>> store.info("run-3/prices")["size"], store.list("run-3/"), "run-3/prices" in store

Values are written atomically (a reader sees the old value or the whole new one) and streamed
from the objects' own memory (large values are never assembled in memory as a whole). Each
stored value is an ordinary ``dumps`` payload: ``freight.load(path)`` and ``python -m freight
inspect`` read the files of a local store directly (a key's characters that are unsafe in file
names, such as ``<``, ``>``, ``#``, ``%`` or a ``..`` segment, are percent-encoded there:
``_t.<locals>.s_0`` is the file ``_t.%3Clocals%3E.s_0``; ``python -m freight inspect URL KEY``
takes the key as it is).

Opening creates nothing: a local store's folder is created by its first save, and reading a
store whose folder does not exist finds no values.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from freight import _files, _freight
from freight.exceptions import KeyExistsError, KeyNotFoundError, StorageError, checks_options
from freight.storage import persistent
from freight.storage.progress import THRESHOLD, progress

if TYPE_CHECKING:  # for annotations only; the code imports freight._api where it uses it
    from freight._api import Freight

__all__ = ["open", "Store", "StorageError", "KeyNotFoundError", "KeyExistsError"]

_open = open  # the builtin, before this module's open() hides it


@checks_options("freight.storage.open")
def open(  # noqa: A001 - the storage counterpart of the builtin, as fsspec and zarr name it
    url: str | os.PathLike[str],
    *,
    freight: Freight | None = None,
    compression: Any = "auto",
    endpoint_url: str | None = None,
    region: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    allow_http: bool | None = None,
    max_retries: int | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
) -> Store:
    """Opens a store.

    Args:
        url: ``file://PATH`` or a plain path (a local folder, created by the first save),
            ``memory://`` (a new, empty store in this process), or ``s3://BUCKET/PREFIX``.
            Any other ``scheme:`` is refused, so a typo (``s3:/bucket``) never becomes a folder;
            write a folder whose name holds a colon as ``./name:x`` or ``file://name:x``.
        freight: the :class:`freight.Freight` that encodes and decodes values (its registry,
            ``allow_pickle``, ``key``, ...); the module-level default when None.
        compression: the default of :meth:`Store.save` (``"auto"``: lz4 where samples shrink).
        endpoint_url, region, access_key_id, secret_access_key, session_token, allow_http:
            S3 settings; each falls back to the standard AWS environment variable
            (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ...,
            ``AWS_ALLOW_HTTP=true`` for an ``http://`` endpoint).
        max_retries, timeout, connect_timeout: S3 request retries (with backoff) and timeouts
            in seconds (defaults 5, 60 and 5).

    Raises:
        StorageError: the URL is malformed or its scheme unknown, the folder could never be
            created (a file is in the way), or an ``http://`` endpoint is given without
            ``allow_http=True`` (or ``AWS_ALLOW_HTTP=true``).
    """
    options: dict[str, Any] = dict(
        endpoint_url=endpoint_url,
        region=region,
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
        session_token=session_token,
        allow_http=allow_http,
        max_retries=max_retries,
        timeout=timeout,
        connect_timeout=connect_timeout,
    )
    if isinstance(url, os.PathLike):  # a path by construction: no scheme to check
        url = os.fspath(url)
        scheme, path = "file", url
    else:
        url = str(url)
        scheme, path = _scheme(url)
    if scheme == "file" and "://" in url and not url.startswith("file://"):
        url = "file://" + os.path.abspath(url)  # a Path such as ./a://b: the native side would see a URL
    if scheme == "s3":
        _check_http(url, endpoint_url, allow_http)
    native: Any
    if scheme == "file" and path and not os.path.isdir(path):
        _check_creatable(url, path)
        native = _NewFolder(url, path, options)
    else:
        native = _freight.NativeStore(url, **options)
    return Store(native, freight=freight, compression=compression)


_SCHEMES = ("file", "memory", "s3")
_KNOWN = "freight knows file://PATH (or a plain path), memory:// and s3://BUCKET/PREFIX"
# A scheme as URLs write it; two characters at least, so that C:\ stays a Windows path.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):(.*)", re.DOTALL)


def _q(text: str) -> str:
    """A URL or key in a message, quoted as the native store's errors quote them."""
    import json  # only for messages: not needed to import freight

    return json.dumps(text, ensure_ascii=False)


def _scheme(url: str) -> tuple[str, str]:
    """("file", path), ("memory", rest) or ("s3", rest); StorageError for anything else that
    looks like a URL (an unknown scheme, or a known one with its slashes missing)."""
    for scheme in _SCHEMES:
        if url.startswith(f"{scheme}://"):
            return scheme, url[len(scheme) + 3 :]
    match = _SCHEME.match(url)
    if match is None:
        return "file", url
    scheme, rest = match.groups()
    known = scheme.lower()
    if rest.startswith("//"):  # a URL: of an unknown scheme, or a known one miswritten (S3://)
        if known in _SCHEMES:
            raise StorageError(f"cannot open store {_q(url)}: did you mean {_q(known + ':' + rest)}? ({_KNOWN})")
        import difflib  # only on this error path

        close = difflib.get_close_matches(known, _SCHEMES, n=1)
        hint = f"did you mean {close[0]}://? " if close else ""
        raise StorageError(f"cannot open store {_q(url)}: unknown scheme {scheme!r}; {hint}{_KNOWN}")
    if known in _SCHEMES:  # slashes missing: s3:/bucket, s3:bucket, file:/abs/path
        fix = f"{known}://" + (rest if known == "file" and rest.startswith("/") else rest.lstrip("/"))
        raise StorageError(f"cannot open store {_q(url)}: malformed URL; did you mean {_q(fix)}? ({_KNOWN})")
    raise StorageError(
        f"cannot open store {_q(url)}: {scheme + ':'!r} reads as a URL scheme, and {_KNOWN}; for a folder "
        f"whose name holds a colon, write {_q('./' + url)} or {_q('file://' + url)}"
    )


def _check_http(url: str, endpoint_url: str | None, allow_http: bool | None) -> None:
    """Refuses, when the store is opened, a plain-http endpoint that every request would refuse
    (object_store's "builder error"), naming the setting that allows it. An explicit
    ``allow_http=False`` is left alone: its requests fail naming AWS_ALLOW_HTTP."""
    if allow_http is not None or os.environ.get("AWS_ALLOW_HTTP", "").lower() in ("true", "1"):
        return
    if endpoint_url is not None:
        endpoint, source = endpoint_url, "endpoint_url"
        fix = "pass allow_http=True to freight.storage.open (or use an https:// endpoint)"
    else:
        source = "AWS_ENDPOINT" if os.environ.get("AWS_ENDPOINT") else "AWS_ENDPOINT_URL"
        endpoint = os.environ.get(source, "")
        fix = "set AWS_ALLOW_HTTP=true, or pass allow_http=True to freight.storage.open"
    if endpoint.lower().startswith("http://"):
        raise StorageError(f"cannot open store {_q(url)}: {source} {endpoint} is plain http, refused by default; {fix}")


def _check_creatable(url: str, path: str) -> None:
    """Refuses a folder that no save could create: a file is in the way (``path`` itself, or
    the nearest of its parents that exists)."""
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            return
        existing = parent
    if not os.path.isdir(existing):
        raise StorageError(
            f"cannot open store {_q(url)}: cannot create the folder {path!r}: {existing} is a file, not a folder"
        )


class _NewFolder:
    """The native side of a local store whose folder did not exist when it was opened: reads
    find no values and create nothing; the first write creates the folder (by opening the
    native store, which does that). If the folder appears meanwhile (another process saved),
    reads open it."""

    backend = "file"

    def __init__(self, url: str, path: str, options: dict[str, Any]):
        self._url = url
        self.path = path
        self._options = options
        self._native: Any = None

    @property
    def url(self) -> str:
        if self._native is not None:
            return self._native.url
        return "file://" + os.path.realpath(self.path)  # as the native store names its folder

    def existing(self) -> Any:
        """The native store, if the folder exists now (else None)."""
        if self._native is None and os.path.isdir(self.path):
            self._native = _freight.NativeStore(self._url, **self._options)
        return self._native

    def _created(self) -> Any:
        if self._native is None:
            self._native = _freight.NativeStore(self._url, **self._options)  # creates the folder
        return self._native

    def _missing(self, key: str) -> KeyNotFoundError:
        return KeyNotFoundError(
            f"{self.url}: no value is stored under {_q(key)}: the folder {self.path} does not exist "
            "(a store's folder is created by its first save; check the path)"
        )

    def put_parts(self, key: str, *args: Any, **kwargs: Any) -> None:
        self._created().put_parts(key, *args, **kwargs)

    def put_bytes(self, key: str, *args: Any, **kwargs: Any) -> None:
        self._created().put_bytes(key, *args, **kwargs)

    def _read(self, method: str, key: str, *args: Any, **kwargs: Any) -> Any:
        native = self.existing()
        if native is None:
            raise self._missing(key)
        return getattr(native, method)(key, *args, **kwargs)

    def get(self, key: str, progress: Any = None) -> Any:
        return self._read("get", key, progress=progress)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self._read("get_range", key, start, end)

    def map(self, key: str) -> Any:
        return self._read("map", key)

    def head(self, key: str) -> tuple[int, float, str | None]:
        return self._read("head", key)

    def info(self, key: str) -> Any:
        return self._read("info", key)

    def delete(self, key: str) -> None:
        self._read("delete", key)

    def exists(self, key: str) -> bool:
        native = self.existing()
        return native is not None and native.exists(key)

    def list(self, prefix: str = "") -> list[tuple[str, int, float, str | None]]:
        native = self.existing()
        return [] if native is None else native.list(prefix)

    def delete_prefix(self, prefix: str) -> int:
        native = self.existing()
        return 0 if native is None else native.delete_prefix(prefix)

    def __repr__(self) -> str:
        return f"<freight NativeStore {self.url} (no folder yet)>"


def missing_folder(store: Store) -> str | None:
    """The folder of a local ``store`` that does not exist (nothing was ever saved there), or
    None. The command line refuses to read such a store: the path is likely a typo."""
    native = store._native
    if isinstance(native, _NewFolder) and native.existing() is None:
        return native.path
    return None


class _Bar:
    """A progress bar (freight[progress]) opened on the first report of a transfer, shown only
    for large ones on a terminal (see freight.storage.progress)."""

    def __init__(self, description: str):
        self.description = description
        self._context: Any = None
        self._bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._context is None:
            self._context = progress(total, self.description)
            self._bar = self._context.__enter__()
        if self._bar.active:
            self._bar.update(done)

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._context is not None:
            self._context.__exit__(*exc)


class Store(MutableMapping[str, Any]):
    """Named values in one place. Also a ``MutableMapping``: ``store[key] = obj``,
    ``store[key]``, ``key in store``, ``del store[key]``, ``iter(store)``, ``len(store)``.

    Keys are ``/``-separated names (``"run-3/_test.<locals>.sum_0000"``): any characters, no
    empty segments; ``list`` gives back exactly the names that were saved.
    """

    def __init__(self, native: Any, *, freight: Freight | None = None, compression: Any = "auto"):
        self._native = native
        if freight is None:
            from freight._api import _DEFAULT as freight
        self.freight: Freight = freight
        self.compression = compression
        self._persistent: list[Any] = []

    def register_persistent(self, serializer: Any) -> None:
        """Keeps values of ``serializer.types`` (and their subclasses) beside the envelope in
        their own format, through this store (see :mod:`freight.storage.persistent`): e.g.
        ``store.register_persistent(persistent.DaskZarr())`` writes dask arrays as zarr arrays,
        chunk by chunk, and loads them back lazily. Values already saved are not rewritten."""
        from freight.registry import Registry

        if not self._persistent:
            # This store's own registry layer over its Freight's, with the same options.
            self.freight = self.freight.replace(registry=Registry(parent=self.freight.registry))
        adapter = persistent.Adapter(serializer)
        self.freight.register(adapter, tag=adapter.tag, types=adapter.types, safe=True, replace=True)
        self._persistent.append(serializer)

    @property
    def url(self) -> str:
        """Where the store is (``file:///abs/path``, ``memory://``, ``s3://bucket/prefix``)."""
        return self._native.url

    @property
    def backend(self) -> str:
        """``"file"``, ``"memory"`` or ``"s3"``."""
        return self._native.backend

    def _sign_key(self, key: Any) -> bytes | None:
        if key is None:
            key = self.freight.options.key
        if key is None:
            return None
        if isinstance(key, (list, tuple)):
            key = key[0] if key else None
        return bytes(key) if key is not None else None

    @checks_options("Store.save")
    def save(
        self, key: str, obj: Any, /, *, if_absent: bool = False, compression: Any = None, sign_key: Any = None
    ) -> None:
        """Stores ``obj`` under ``key``, atomically, replacing what was there.

        Args:
            if_absent: refuse to replace an existing value (``KeyExistsError``); conditional on
                the backend (If-None-Match on S3, a no-replace link locally), so two writers
                cannot both succeed.
            compression: overrides the store's default (``"auto"``); ``"none"`` stores raw frames.
            sign_key: sign with this key (default: the store's ``Freight`` key, if any).

        Raises:
            SerializationError: ``obj`` cannot be encoded.
            KeyExistsError: ``if_absent`` and a value is stored there.
            StorageError: the backend failed (the message says what to check).
        """
        if persistent.is_side_key(key):
            raise StorageError(f"invalid key {key!r}: names holding {persistent.SIDE!r} are reserved for side objects")
        signing = self._sign_key(sign_key)
        save_id = persistent.new_save_id()
        token = persistent._CURRENT.set((self._native, key, save_id))
        try:
            # Encoded, compressed, checksummed and signed once; streamed from the objects' memory.
            payload = self.freight._dumps_parts(
                obj,
                checksum=True,
                compression=self.compression if compression is None else compression,
                key=signing,
            )
        finally:
            persistent._CURRENT.reset(token)
        with _Bar(f"save {key}") as bar:
            self._native.put_parts(
                key, payload, if_absent=if_absent, progress=bar if payload.nbytes >= THRESHOLD else None
            )
        if isinstance(self._native, _NewFolder):  # the folder exists now: use the native store itself
            self._native = self._native.existing() or self._native
        if self._persistent:
            self._drop_side_objects(key, keep=save_id)

    def _drop_side_objects(self, key: str, keep: str | None = None) -> None:
        """Removes the side objects of earlier saves of ``key`` (all of them with ``keep=None``)."""
        side = f"{key}{persistent.SIDE}"
        stale = {name[len(side) :].split("/", 1)[0] for name, *_ in self._native.list(side)} - {keep}
        for save_id in stale:
            self._native.delete_prefix(f"{side}{save_id}/")

    def load(self, key: str, /, *, mmap: bool = False, **options: Any) -> Any:
        """The value stored under ``key``.

        Args:
            mmap: on a local folder store, map the file instead of reading it: arrays come back
                as read-only views of the mapping (constant time whatever the size), which lives
                as long as they do. Compressed frames cannot be viewed: they are decompressed
                into new memory, with a :class:`freight.FreightWarning` (values meant to be
                mapped are saved with ``compression="none"``).
            **options: for :meth:`freight.Freight.loads` (``allow_pickle``, ``verify``, ``key``,
                ``zero_copy``, ``max_size``).

        Raises:
            KeyNotFoundError: nothing is stored under ``key`` (also a ``KeyError``).
            DeserializationError: the stored bytes are not a valid payload (or a subclass:
                IntegrityError, UnsafePayloadError, ...).
            StorageError: the backend failed; ``mmap=True`` on a store that is not local.
        """
        if mmap:
            data = self._native.map(key)
            options.setdefault("zero_copy", True)
            compressed = _files.compressed_frames(data)
            if compressed:
                fix = 'save it with compression="none" (or open the store with compression=None)'
                warnings.warn(_files.mapped_compressed_warning(f"{self.url}: {_q(key)}", compressed, fix), stacklevel=2)
        else:
            with _Bar(f"load {key}") as bar:
                data = self._native.get(key, progress=bar)
        token = persistent._CURRENT.set((self._native, key, ""))
        try:
            return self.freight.loads(data, **options)
        except TypeError as exc:
            from freight._api import codec_option_error

            error = codec_option_error(exc, "Store.load", "loads", extra=["mmap"])
            if error is None:
                raise
            raise error from None
        finally:
            persistent._CURRENT.reset(token)

    def exists(self, key: str, /) -> bool:
        return self._native.exists(key)

    def delete(self, key: str, /) -> None:
        """Removes the value under ``key`` and its side objects (``KeyNotFoundError`` if there is
        no value)."""
        self._native.delete(key)
        self._drop_side_objects(key)

    def list(self, prefix: str = "") -> list[str]:
        """The keys that start with ``prefix`` (a plain string prefix), sorted."""
        return [name for name, *_ in self._native.list(prefix) if not persistent.is_side_key(name)]

    def delete_prefix(self, prefix: str) -> int:
        """Removes every value whose key starts with ``prefix``; returns how many."""
        if not prefix:
            raise StorageError("delete_prefix needs a non-empty prefix; to empty a store, pass each top-level name")
        return self._native.delete_prefix(prefix)

    def info(self, key: str, /) -> dict[str, Any]:
        """What is stored under ``key``, from its header only (a ranged read): ``size``,
        ``modified`` (seconds since the epoch), ``tags``, ``needs_pickle``, ``signed``,
        ``producer`` (library versions), ``frames``, ``data_length``, ``format_version``."""
        return self._native.info(key)

    # MutableMapping
    def __getitem__(self, key: str) -> Any:
        return self.load(key)

    def __setitem__(self, key: str, obj: Any) -> None:
        self.save(key, obj)

    def __delitem__(self, key: str) -> None:
        self.delete(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or not key:
            return False
        return self.exists(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.list())

    def __len__(self) -> int:
        return len(self.list())

    def __repr__(self) -> str:
        return f"<freight.storage.Store {self.url}>"
