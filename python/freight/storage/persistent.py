"""Persistent serializers: values a store keeps in native formats beside the envelope (a dask
array as a zarr array, chunk by chunk; a DataFrame as parquet), with a small reference in the
envelope. Registered per store (``Store.register_persistent``), chosen by type with MRO dispatch
like any freight serializer, on every backend (side objects go through the same store).

A persistent serializer is an object with ``name`` (a short identifier), ``types`` (the classes
it handles) and::

    save(obj, side: SideArea) -> ref     # writes side objects; ref: a natively encodable value
    load(ref, side: SideArea) -> obj     # may be lazy (a dask array over the zarr array)

Side objects of the value under ``key`` live under ``<key>.freight-side/<save id>/``: a new save
writes a new save id, then replaces the envelope, then removes the older side objects, so a
reader of the old envelope never sees them change. ``Store.list`` hides them; ``Store.delete``
removes them with the value.
"""

from __future__ import annotations

import contextvars
import itertools
import os
from typing import Any

from freight.exceptions import DeserializationError, KeyNotFoundError, StorageError

__all__ = ["SideArea", "SIDE", "DaskZarr", "XarrayZarr", "PandasParquet", "PolarsParquet"]

SIDE = ".freight-side/"

# (native store, key, save id) of the save or load in progress, for the adapters' encode/decode.
_CURRENT: contextvars.ContextVar[tuple[Any, str, str] | None] = contextvars.ContextVar("freight_side", default=None)


def is_side_key(key: str) -> bool:
    return SIDE in key


class SideArea:
    """The side objects of one persistent value: keys under one prefix of the store."""

    def __init__(self, native: Any, prefix: str):
        self.native = native
        self.prefix = prefix if prefix.endswith("/") else prefix + "/"

    def put(self, name: str, data: Any) -> None:
        self.native.put_bytes(self.prefix + name, [data])

    def get(self, name: str) -> memoryview:
        try:
            return memoryview(self.native.get(self.prefix + name))
        except KeyNotFoundError as exc:
            raise self.missing(name) from exc

    def missing(self, name: str = "") -> StorageError:
        return StorageError(
            f"{self.native.url}: the side object {self.prefix + name!r} of a stored value is missing "
            "(deleted or never completely written); save the value again"
        )

    def zarr_store(self, *, read_only: bool = False) -> Any:
        from freight.storage.zarr_store import FreightZarrStore

        return FreightZarrStore(self.native, self.prefix, read_only=read_only)

    def exists(self) -> bool:
        return bool(self.native.list(self.prefix))


class Adapter:
    """A persistent serializer as a registry entry of the store's own layer: encode writes the
    side objects and returns the reference as metadata; decode reads them back."""

    def __init__(self, serializer: Any):
        self.serializer = serializer
        self.tag = f"freight.persistent.{serializer.name}"
        self.types = tuple(serializer.types)
        self._counter = itertools.count()

    def serialize(self, obj: Any) -> tuple[Any, list[Any]]:
        current = _CURRENT.get()
        if current is None:
            raise StorageError(
                f"persistent serializer {self.serializer.name!r} writes through a store: save the value with "
                "Store.save, not freight.dumps"
            )
        native, key, save_id = current
        prefix = f"{key}{SIDE}{save_id}/{self.serializer.name}-{next(self._counter)}/"
        ref = self.serializer.save(obj, SideArea(native, prefix))
        return {"side": prefix, "ref": ref}, []

    def deserialize(self, meta: Any, frames: list[Any]) -> Any:
        current = _CURRENT.get()
        if current is None:
            raise DeserializationError(
                f"the payload holds a value of persistent serializer {self.serializer.name!r}, kept beside it "
                "in a store: load it with Store.load"
            )
        native, key, _ = current
        if not isinstance(meta, dict) or not isinstance(meta.get("side"), str):
            raise DeserializationError(f"corrupt persistent reference {meta!r}")
        side = meta["side"]
        if not side.startswith(f"{key}{SIDE}"):
            raise DeserializationError(f"a persistent reference points outside its value's side area: {side!r}")
        area = SideArea(native, side)
        if not area.exists():
            raise area.missing()
        return self.serializer.load(meta.get("ref"), area)


def new_save_id() -> str:
    return os.urandom(8).hex()


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
