"""``Store``: named values in one place (a local folder, memory or S3), over freight-store's
``NativeStore``; values are ``dumps`` payloads written atomically and streamed, and the
byte-level API (``head``, ``get_bytes``, ``put_bytes``, ``list_objects``) reaches the stored
objects as they are (what the command line and ``copy_values`` use)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any, NamedTuple

from freight import _api, _files, _options
from freight.exceptions import DeserializationError, OptionError, StorageError, checks_options
from freight.registry import Registry
from freight.storage import persistent
from freight.storage.persistent import Adapter, Transfer, new_save_id
from freight.storage.progress import THRESHOLD, progress
from freight.storage.side_objects import SIDE, is_side_key, owners_reached, side_owner, side_save_id

if TYPE_CHECKING:
    from freight._api import Freight

__all__ = ["Store", "StoredObject"]


def _q(text: str) -> str:
    """A URL or key in a message, quoted as the native store's errors quote them."""
    import json  # only for messages: not needed to import freight

    return json.dumps(text, ensure_ascii=False)


class StoredObject(NamedTuple):
    """What the backend knows of a stored object, without reading it."""

    key: str
    size: int  # bytes
    modified: float  # seconds since the epoch
    etag: str | None  # the backend's version tag of the bytes (S3's ETag), when it has one


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
        if freight is not None and not isinstance(freight, _api.Freight):
            raise OptionError(
                f"freight= takes a freight.Freight (or None for the default codec); got {type(freight).__name__} "
                f"{freight!r}: pass freight.Freight(...) with the options the store's values need"
            )
        if compression is not None:
            # Checked by the codec itself now, with its words, rather than by the first save.
            _api.DEFAULT.dumps(None, compression=compression)
        self._native = native
        self.freight: Freight = _api.DEFAULT if freight is None else freight
        self.compression = compression
        # name -> the adapter of a persistent serializer registered with this store.
        self._adapters: dict[str, Adapter] = {}
        # The save or load running on each thread (the adapters ask for it).
        self._local = threading.local()

    # -- persistent serializers ---------------------------------------------------------------

    def register_persistent(self, serializer: Any) -> None:
        """Keeps values of ``serializer.types`` (and their subclasses) beside the envelope in
        their own format, through this store (see :mod:`freight.storage.persistent`): e.g.
        ``store.register_persistent(persistent.DaskZarr())`` writes dask arrays as zarr arrays,
        chunk by chunk, and loads them back lazily. Values already saved are not rewritten. A
        serializer registered under the name of an earlier one replaces it."""
        name = getattr(serializer, "name", None)
        if not isinstance(name, str) or not name or "/" in name:
            raise StorageError(f"persistent serializer {serializer!r} needs a name: a non-empty str without '/'")
        adapter = Adapter(serializer, self)  # checks the serializer first: a StorageError changes nothing
        if not self._adapters:
            # This store's own registry layer over its Freight's, with the same options.
            self.freight = self.freight.replace(registry=Registry(parent=self.freight.registry))
        self.freight.register(adapter, tag=adapter.tag, types=adapter.types, safe=adapter.safe, replace=True)
        self._adapters[name] = adapter

    def _transfer(self) -> Transfer | None:
        """The save or load of this store running on this thread (None outside one)."""
        return getattr(self._local, "transfer", None)

    def _run(self, transfer: Transfer | None, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)`` with ``transfer`` as this thread's save or load (nothing to
        set without persistent serializers: nothing asks)."""
        if transfer is None:
            return call(*args, **kwargs)
        outer = self._transfer()
        self._local.transfer = transfer
        try:
            return call(*args, **kwargs)
        finally:
            self._local.transfer = outer

    # -- where ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Where the store is (``file:///abs/path``, ``memory://``, ``s3://bucket/prefix``)."""
        return self._native.url

    @property
    def backend(self) -> str:
        """``"file"``, ``"memory"`` or ``"s3"``."""
        return self._native.backend

    # -- values -----------------------------------------------------------------------------

    def _sign_key(self, key: Any) -> bytes | None:
        """The key that signs a save: ``sign_key`` by the codec's rule for ``key=`` (bytes, or a
        non-empty list of them, the first of which signs; anything else an OptionError, never
        ``bytes(123)``'s zero bytes or an empty list that would save unsigned), else the first
        key of the store's Freight, else None."""
        keys = _options.checked_keys(self.freight.options.key if key is None else key)
        return keys[0] if keys else None

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
        if is_side_key(key):
            raise StorageError(f"invalid key {key!r}: names holding {SIDE!r} are reserved for side objects")
        signing = self._sign_key(sign_key)
        if_absent = _options.flag("if_absent", if_absent, False)
        compression = self.compression if compression is None else compression
        if not self._adapters:
            self._save(key, obj, None, if_absent, compression, signing)
            return
        self._native.object_path(key)  # an invalid key is refused before any side object is written
        # One save or delete of this key at a time in this process: each removes the side
        # objects of the other saves, which must not be the ones another's envelope refers to.
        with persistent.key_lock(self.url, key):
            transfer = Transfer(key, new_save_id())
            self._save(key, obj, transfer, if_absent, compression, signing)
            self._drop_stale(key, keep=transfer.save_id)

    def _save(
        self, key: str, obj: Any, transfer: Transfer | None, if_absent: bool, compression: Any, signing: bytes | None
    ) -> None:
        try:
            # Encoded, compressed, checksummed and signed once; streamed from the objects' memory.
            payload = self._run(
                transfer, self.freight._dumps_parts, obj, checksum=True, compression=compression, key=signing
            )
            with _Bar(f"save {key}") as bar:
                self._native.put_parts(
                    key, payload, if_absent=if_absent, progress=bar if payload.nbytes >= THRESHOLD else None
                )
        except BaseException:
            if transfer is not None and transfer.areas:  # side objects of no value: removed
                self._drop_failed_save(key, transfer.save_id)
            raise
        existing = getattr(self._native, "existing", None)
        if existing is not None:  # a new folder exists now: use the native store itself
            self._native = existing() or self._native

    def _drop_failed_save(self, key: str, save_id: str) -> None:
        """Removes the side objects a failed save wrote; if that fails too, a warning says so and
        the save's own error is the one raised (it says what went wrong)."""
        prefix = f"{key}{SIDE}{save_id}/"
        try:
            self._drop_saves([prefix], errors=[])
        except Exception as exc:
            warnings.warn(
                f"{self.url}: the side objects of a failed save stay under {_q(prefix)} "
                f"({type(exc).__name__}: {exc}); Store.delete_prefix({prefix!r}) removes them",
                RuntimeWarning,
                stacklevel=4,
            )

    def load(self, key: str, /, *, mmap: bool = False, **options: Any) -> Any:
        """The value stored under ``key``.

        Args:
            mmap: on a local folder store, map the file instead of reading it: arrays come back
                as read-only views of the mapping, which lives as long as they do. Checksummed
                frames (``save`` writes them) are read once to verify them first (a damaged file
                raises :class:`freight.IntegrityError`); ``verify=False`` skips that, in
                constant time. Compressed frames cannot be viewed: they are decompressed
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
        if _options.flag("mmap", mmap, False):  # "no" must not map
            data = self._native.map(key)
            options.setdefault("zero_copy", True)
            compressed = _files.compressed_frames(data)
            if compressed:
                fix = 'save it with compression="none" (or open the store with compression=None)'
                warnings.warn(_files.mapped_compressed_warning(f"{self.url}: {_q(key)}", compressed, fix), stacklevel=2)
        else:
            with _Bar(f"load {key}") as bar:
                data = self._native.get(key, progress=bar)
        try:
            return self._run(Transfer(key) if self._adapters else None, self.freight.loads, data, **options)
        except TypeError as exc:
            error = _api.codec_option_error(exc, "Store.load", "loads", extra=["mmap"])
            if error is None:
                raise
            raise error from None

    def lazy(self, key: str, /, **options: Any) -> Any:
        """The value under ``key``, opened without reading it: a :class:`freight.LazyValue`.

        Reads the header alone (one ranged read of 64 KiB on S3; a local file is mapped).
        ``lv[name]`` then reads one entry of a stored dict, list or tuple, ``lv[name][a:b]`` only
        the blocks that hold those rows of an array, ``lv.load()`` everything; each read asks for
        the version whose header was read (a value replaced meanwhile raises
        :class:`freight.StorageError`, never mixes two versions). Frames are verified as they
        are read; with a key, the header's signature is checked before anything else, and every
        block read is authenticated. A persistent value (a dask array kept as zarr) comes back
        as its serializer loads it: lazy already.

        Args:
            **options: for :meth:`freight.Freight.loads` (``allow_pickle``, ``verify``, ``key``,
                ``allowed_tags``, ``max_size``, ``zero_copy``, ``strict_versions``).

        Raises:
            KeyNotFoundError: nothing is stored under ``key``.
            DeserializationError: the stored bytes are not a payload (``IntegrityError`` for a
                bad signature; a payload signed before format 1.2 can only be loaded whole).
        """
        from freight._lazy import open_stored

        transfer = Transfer(key) if self._adapters else None
        return open_stored(
            self._native, key, self.freight, options, lambda call, *a, **k: self._run(transfer, call, *a, **k)
        )

    def exists(self, key: str, /) -> bool:
        return self._native.exists(key)

    def delete(self, key: str, /) -> None:
        """Removes the value under ``key`` and its side objects (``KeyNotFoundError`` if there is
        no value). The persistent serializers' ``remove`` runs first: if one fails, its error is
        raised and nothing is deleted."""
        if is_side_key(key):
            self._refuse_cutting_into_values([side_owner(key)], key)
        with persistent.key_lock(self.url, key):  # not while a save of the key is running here
            saves = self._saves(key)
            if saves:
                self._native.head(key)  # KeyNotFoundError before anything is removed
                try:
                    persistent.remove_refs(self, saves)
                except Exception as exc:
                    raise persistent.side_error([exc], f"{self.url}: {_q(key)}") from exc
            self._native.delete(key)
            for prefix in saves:
                self._native.delete_prefix(prefix)

    def list(self, prefix: str = "") -> list[str]:
        """The keys of the values that start with ``prefix`` (a plain string prefix), sorted."""
        return [name for name, *_ in self._native.list(prefix) if not is_side_key(name)]

    def delete_prefix(self, prefix: str) -> int:
        """Removes every value whose key starts with ``prefix``, with its side objects; returns
        how many objects were deleted. Everything is deleted even if a persistent serializer's
        ``remove`` fails; then a StorageError says so (its cause is the serializer's error)."""
        if not prefix:
            raise StorageError("delete_prefix needs a non-empty prefix; to empty a store, pass each top-level name")
        self._refuse_cutting_into_values(owners_reached(prefix), prefix)
        errors: list[BaseException] = []
        if self._adapters:
            side = {f"{side_owner(k)}{SIDE}{side_save_id(k)}/" for k, *_ in self._native.list(prefix) if is_side_key(k)}
            persistent.remove_refs(self, sorted(side), errors)
        n = self._native.delete_prefix(prefix)
        if errors:
            raise persistent.side_error(errors, f"{self.url}: {_q(prefix)}") from errors[0]
        return n

    def _refuse_cutting_into_values(self, owners: list[str], prefix: str) -> None:
        """A StorageError if one of ``owners`` is a value: deleting ``prefix`` would remove side
        objects of it without it, and it would no longer load (the side objects of a value that
        is gone, a save that crashed, may go)."""
        for owner in owners:
            side = f"{owner}{SIDE}"
            within = prefix if prefix.startswith(side) else side  # the longer of the two
            if self._native.exists(owner) and any(k.startswith(prefix) for k, *_ in self._native.list(within)):
                raise StorageError(
                    f"{self.url}: {_q(prefix)} reaches the side objects of the value {_q(owner)}, which "
                    f"would no longer load without them: delete the value itself ({_q(owner)}), which "
                    "removes them with it, or name the values to delete"
                )

    def info(self, key: str, /) -> dict[str, Any]:
        """What is stored under ``key``, from its header only (a ranged read): the description
        :func:`freight.inspect` gives of a payload (``format_version``, ``flags``, ``tags``,
        ``needs_pickle``, ``signed``, ``producer``, ``header_length``, ``total_length``,
        ``frames``, ``tree``; each frame's ``offset`` and ``checksum_ok`` are None: the frames
        are not read), with ``key``, ``size``, ``modified`` (seconds since the epoch) and
        ``etag``.

        Raises:
            KeyNotFoundError: nothing is stored under ``key``.
            DeserializationError: the object is not a freight payload (an empty one included).
        """
        try:
            return self._native.info(key)
        except StorageError:
            # The backends refuse the ranged read of an empty object: that is no backend fault.
            if self._native.head(key)[0] == 0:
                raise DeserializationError(
                    f"{self.url}: {_q(key)} is not a freight payload: it is empty (0 bytes)"
                ) from None
            raise

    # -- side objects of earlier saves ------------------------------------------------------

    def _saves(self, key: str) -> list[str]:
        """The prefixes of the side objects of every save of ``key``."""
        return persistent.stale_saves(self, key)

    def _drop_saves(self, prefixes: list[str], errors: list[BaseException]) -> None:
        persistent.remove_refs(self, prefixes, errors)
        for prefix in prefixes:
            self._native.delete_prefix(prefix)

    def _drop_stale(self, key: str, keep: str) -> None:
        """Removes the side objects of the saves of ``key`` older than ``keep``; a serializer's ``remove`` that
        fails is a warning (the new value is saved)."""
        errors: list[BaseException] = []
        self._drop_saves(persistent.stale_saves(self, key, keep), errors)
        if errors:
            warnings.warn(
                f"{persistent.side_error(errors, f'{self.url}: {_q(key)}')} of the value it replaced",
                RuntimeWarning,
                stacklevel=3,
            )

    # -- the stored objects as they are -----------------------------------------------------

    def head(self, key: str, /) -> StoredObject:
        """Size, modification time and etag of the object under ``key`` (a value or a side
        object), without reading it; ``KeyNotFoundError`` if there is none."""
        size, modified, etag = self._native.head(key)
        return StoredObject(key, size, modified, etag)

    def list_objects(self, prefix: str = "", *, side_objects: bool = False) -> list[StoredObject]:
        """Every stored object whose key starts with ``prefix``, sorted by key, with its size:
        the values, and with ``side_objects=True`` their side objects too."""
        return [
            StoredObject(*entry) for entry in self._native.list(prefix) if side_objects or not is_side_key(entry[0])
        ]

    def get_bytes(self, key: str, /) -> Any:
        """The stored bytes under ``key`` as they are (never decoded): a read-only buffer
        (``memoryview(store.get_bytes(key))``), memory-mapped when it is a large local file."""
        return self._native.get(key)

    def put_bytes(self, key: str, data: Any, /, *, if_absent: bool = False) -> None:
        """Stores bytes under ``key`` as they are (a buffer, or a list of buffers written one
        after the other), atomically; e.g. a payload copied from another store."""
        parts = list(data) if isinstance(data, (list, tuple)) else [data]
        self._native.put_bytes(key, parts, if_absent=if_absent)

    # -- MutableMapping ---------------------------------------------------------------------

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
