"""Persistent serializers: values a store keeps in native formats beside the envelope (a dask
array as a zarr array, chunk by chunk; a DataFrame as parquet), with a small reference in the
envelope. Registered per store (``Store.register_persistent``), chosen by type with MRO dispatch
like any freight serializer, on every backend (side objects go through the same store).

A persistent serializer is an object with ``name`` (a short identifier), ``types`` (the classes
it handles) and::

    save(obj, side: SideArea) -> ref     # writes side objects; ref: a natively encodable value
                                         # (or NotImplemented: keep obj in the payload, pickled;
                                         # only for a serializer that says safe = False)
    load(ref, side: SideArea) -> obj     # may be lazy (a dask array over the zarr array)
    remove(ref, side: SideArea) -> None  # optional: called before its side objects are deleted
                                         # (for what it keeps elsewhere); a missing file is no error

and optionally ``tag`` (default ``freight.persistent.<name>``), ``safe`` (default True: loading
runs only the serializer's code on its reference) and ``subclasses`` (default True).

Side objects of the value under ``key`` live under ``<key>.freight-side/<save id>/`` (see
:mod:`freight.storage.side_objects`): a new save writes a new save id, then replaces the envelope, then
removes the older side objects, so a reader of the old envelope never sees them change.
``Store.list`` hides them; ``Store.delete`` removes them with the value; a save that fails
removes those it wrote.

The store is bound to its serializers: :meth:`Store.register_persistent` registers an
:class:`Adapter` holding the store in the store's own registry layer, and the store tells the
adapter which save or load it is running (:class:`Transfer`, kept by the store per thread:
encoding and decoding call serializers on the caller's thread).
"""

from __future__ import annotations

import itertools
import os
import pickle
import threading
import time
from typing import TYPE_CHECKING, Any

from freight import _api
from freight.exceptions import DeserializationError, KeyNotFoundError, SerializationError, StorageError
from freight.storage.side_objects import SIDE, SideArea

if TYPE_CHECKING:
    from freight.storage.store import Store

__all__ = ["Adapter", "Transfer", "DaskZarr", "XarrayZarr", "PandasParquet", "PolarsParquet"]

# The suffix of the record of a persistent value's reference, beside its folder.
REF = ".ref"


class Transfer:
    """One save or load of ``key`` in progress: where its persistent values' side objects go
    (a new save id for a save), and the areas written so far (removed if the save fails)."""

    def __init__(self, key: str, save_id: str = ""):
        self.key = key
        self.save_id = save_id
        self.areas: list[str] = []
        self._count = itertools.count()

    def new_area(self, native: Any, name: str) -> SideArea:
        prefix = f"{self.key}{SIDE}{self.save_id}/{name}-{next(self._count)}/"
        self.areas.append(prefix)
        return SideArea(native, prefix)


def new_save_id() -> str:
    """A save id that sorts after those of earlier saves: the clock's nanoseconds (16 hex digits)
    then 4 random bytes. A save removes only the side objects of older saves (``stale_saves``):
    a newer save of the same key still writing its side objects is left alone."""
    return f"{time.time_ns():016x}{os.urandom(4).hex()}"


def _save_order(save_id: str) -> tuple[bool, str]:
    # Save ids written before they were ordered (16 random hex digits) count as older.
    return (len(save_id) == 24, save_id)


# One lock per (store URL, key) saved or deleted right now, shared by every Store of the process:
# two saves of one key must not interleave (one would remove the side objects the other's
# envelope refers to). Entries live while someone holds or waits for them.
_KEY_LOCKS: dict[tuple[str, str], list[Any]] = {}
_KEY_LOCKS_GUARD = threading.Lock()


def _after_fork_in_child() -> None:
    # A forked child has only the thread that forked: the locks other threads of the parent held
    # (or the guard, taken for an instant by a thread entering or leaving a key's lock) would
    # never be released here, and the child's first save of such a key would wait forever.
    global _KEY_LOCKS, _KEY_LOCKS_GUARD
    _KEY_LOCKS = {}
    _KEY_LOCKS_GUARD = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class key_lock:  # noqa: N801 - used as a function: ``with key_lock(url, key):``
    """Holds the lock of ``key`` in the store at ``url`` (re-entrant: a serializer may save or
    delete the same key on its own thread). A class, not contextlib's: ``import freight.storage``
    imports nothing beyond its own modules."""

    def __init__(self, url: str, key: str):
        self._name = (url, key)

    def __enter__(self) -> None:
        with _KEY_LOCKS_GUARD:
            self._entry = _KEY_LOCKS.setdefault(self._name, [threading.RLock(), 0])
            self._entry[1] += 1
        self._entry[0].acquire()

    def __exit__(self, *exc: object) -> None:
        self._entry[0].release()
        with _KEY_LOCKS_GUARD:
            self._entry[1] -= 1
            # After a fork inside the ``with`` (a serializer that forks), the child's table is a
            # new one, without this entry.
            if self._entry[1] == 0 and _KEY_LOCKS.get(self._name) is self._entry:
                del _KEY_LOCKS[self._name]


def ref_key(area: SideArea) -> str:
    return area.prefix.rstrip("/") + REF


class Adapter:
    """A persistent serializer as a registry entry of its store's own layer: encode writes the
    side objects of the save in progress and returns the reference as metadata; decode reads
    them back."""

    def __init__(self, serializer: Any, store: Store):
        self.serializer = serializer
        self.store = store
        self.name = str(serializer.name)
        self.tag = getattr(serializer, "tag", None) or f"freight.persistent.{self.name}"
        self.types = _types_of(serializer, self.name)
        missing = [method for method in ("save", "load") if not callable(getattr(serializer, method, None))]
        if missing:
            raise StorageError(
                f"persistent serializer {self.name!r} has no {' or '.join(missing)} method: it needs "
                "save(obj, side) -> ref and load(ref, side) -> obj (see freight.storage.persistent)"
            )
        self.safe = bool(getattr(serializer, "safe", True))
        self.subclasses = bool(getattr(serializer, "subclasses", True))
        self._remove = getattr(serializer, "remove", None)

    def serialize(self, obj: Any) -> tuple[Any, list[Any]]:
        transfer = self.store._transfer()
        if transfer is None or not transfer.save_id:
            raise SerializationError(
                f"objects of {type(obj).__qualname__} go to the persistent serializer {self.name!r}, which "
                f"writes through its store ({self.store.url}): save them with Store.save, not dumps"
            )
        native = self.store._native
        area = transfer.new_area(native, self.name)
        ref = self.serializer.save(obj, area)
        if ref is NotImplemented:  # keep it in the payload
            if self.safe:
                raise SerializationError(
                    f"persistent serializer {self.name!r} returned NotImplemented, which keeps the object in the "
                    "payload pickled: only a serializer that says safe = False may do that"
                )
            return {"inline": True}, [pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)]
        native.put_bytes(ref_key(area), [_api.dumps(ref)])
        return {"side": area.prefix, "ref": ref}, []

    def deserialize(self, meta: Any, frames: list[Any]) -> Any:
        if isinstance(meta, dict) and meta.get("inline") is True and not self.safe and len(frames) == 1:
            return pickle.loads(frames[0])
        transfer = self.store._transfer()
        if transfer is None:
            raise DeserializationError(
                f"the payload holds a value of persistent serializer {self.name!r}, kept beside it in a store: "
                "load it with Store.load"
            )
        if not isinstance(meta, dict) or not isinstance(meta.get("side"), str):
            raise DeserializationError(f"corrupt persistent reference {meta!r}")
        side, own = meta["side"], f"{transfer.key}{SIDE}"
        # ".." is checked after the value's own key, which may hold one ("x/../y" is a valid key).
        if not side.startswith(own) or ".." in side[len(own) :].split("/"):
            raise DeserializationError(f"a persistent reference points outside its value's side area: {side!r}")
        native = self.store._native
        area = SideArea(native, side)
        # (Values saved before references were recorded have only their objects.)
        if not native.exists(ref_key(area)) and not native.list(area.prefix):
            raise area.missing()
        return self.serializer.load(meta.get("ref"), area)

    def remove(self, area: SideArea) -> None:
        """Calls the serializer's ``remove`` for the value kept in ``area`` (if it has one)."""
        if self._remove is None:
            return
        try:
            # As its envelope loads: pickle only for a serializer that says it is unsafe.
            ref = _api.loads(self.store._native.get(ref_key(area)), allow_pickle=not self.safe)
        except KeyNotFoundError:
            return  # never completely written: nothing to remove but the objects themselves
        try:
            self._remove(ref, area)
        except (FileNotFoundError, KeyNotFoundError):
            pass  # already gone


def _types_of(serializer: Any, name: str) -> tuple[type, ...]:
    """The classes ``serializer`` keeps, checked: a StorageError says what is wrong (its library
    missing included: the built-in serializers name their library's classes on demand)."""
    try:
        types = tuple(serializer.types)
    except ImportError as exc:
        raise StorageError(f"persistent serializer {name!r} needs a library that is not installed ({exc})") from exc
    except (AttributeError, TypeError):
        types = ()
    if not types or not all(isinstance(t, type) for t in types):
        raise StorageError(
            f"persistent serializer {name!r} needs types: a non-empty tuple of the classes it keeps "
            f"(got {getattr(serializer, 'types', None)!r})"
        )
    return types


def remove_refs(store: Store, prefixes: list[str], errors: list[BaseException] | None = None) -> None:
    """Calls the serializers' ``remove`` for the persistent values kept under ``prefixes``
    (side areas of serializers not registered with ``store`` are skipped: deleting their
    objects is all there is to do). A failure raises, or is collected in ``errors``."""
    if not store._adapters:
        return
    native = store._native
    for prefix in prefixes:
        # The records sit right under the save's prefix, beside the areas (not inside one).
        records = [key for key, *_ in native.list(prefix) if key.endswith(REF) and "/" not in key[len(prefix) :]]
        for key in sorted(records):
            name = key[key.rindex("/") + 1 : -len(REF)].rsplit("-", 1)[0]
            adapter = store._adapters.get(name)
            if adapter is None:
                continue
            try:
                adapter.remove(SideArea(native, key[: -len(REF)] + "/"))
            except Exception as exc:
                if errors is None:
                    raise
                errors.append(exc)


def stale_saves(store: Store, key: str, keep: str | None = None) -> list[str]:
    """The prefixes of the side objects of every save of ``key``, or with ``keep``, of the saves
    older than ``keep`` (a newer one may be in progress in another process)."""
    side = f"{key}{SIDE}"
    saves = {name[len(side) :].split("/", 1)[0] for name, *_ in store._native.list(side)}
    if keep is not None:
        saves = {save_id for save_id in saves if _save_order(save_id) < _save_order(keep)}
    return [f"{side}{save_id}/" for save_id in sorted(saves)]


def side_error(errors: list[BaseException], what: str) -> StorageError:
    first = errors[0]
    return StorageError(
        f"{what}: a persistent serializer failed to remove a side object ({type(first).__name__}: {first})"
    )


# -- persistent serializers ---------------------------------------------------------------------


class DaskZarr:
    """dask arrays as zarr arrays, written chunk by chunk in parallel by dask, read back lazily."""

    name = "dask-zarr"

    @property
    def types(self) -> tuple[type, ...]:
        import dask.array as da

        return (da.Array,)

    def save(self, obj: Any, side: SideArea) -> Any:
        import dask.array as da

        da.to_zarr(obj, side.zarr_store(), overwrite=True, zarr_format=3)
        return {"shape": list(obj.shape), "dtype": str(obj.dtype)}

    def load(self, ref: Any, side: SideArea) -> Any:
        import dask.array as da
        import zarr

        return da.from_zarr(zarr.open_array(side.zarr_store(read_only=True), mode="r"))


class XarrayZarr:
    """xarray Datasets as zarr groups (xarray's own layout), opened back lazily."""

    name = "xarray-zarr"

    @property
    def types(self) -> tuple[type, ...]:
        import xarray as xr

        return (xr.Dataset,)

    def save(self, obj: Any, side: SideArea) -> Any:
        obj.to_zarr(side.zarr_store(), mode="w", zarr_format=3, consolidated=False)
        return None

    def load(self, ref: Any, side: SideArea) -> Any:
        import xarray as xr

        return xr.open_zarr(side.zarr_store(read_only=True), consolidated=False, zarr_format=3)


class PandasParquet:
    """pandas DataFrames as parquet files (for tools that read parquet)."""

    name = "pandas-parquet"

    @property
    def types(self) -> tuple[type, ...]:
        import pandas as pd

        return (pd.DataFrame,)

    def save(self, obj: Any, side: SideArea) -> Any:
        import io

        buf = io.BytesIO()
        obj.to_parquet(buf)
        side.put("data.parquet", buf.getbuffer())
        return None

    def load(self, ref: Any, side: SideArea) -> Any:
        import io

        import pandas as pd

        return pd.read_parquet(io.BytesIO(side.get("data.parquet")))


class PolarsParquet:
    """polars DataFrames as parquet files."""

    name = "polars-parquet"

    @property
    def types(self) -> tuple[type, ...]:
        import polars as pl

        return (pl.DataFrame,)

    def save(self, obj: Any, side: SideArea) -> Any:
        import io

        buf = io.BytesIO()
        obj.write_parquet(buf)
        side.put("data.parquet", buf.getbuffer())
        return None

    def load(self, ref: Any, side: SideArea) -> Any:
        import io

        import polars as pl

        return pl.read_parquet(io.BytesIO(side.get("data.parquet")))
