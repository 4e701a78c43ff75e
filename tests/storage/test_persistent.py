"""Persistent serializers: values kept beside the envelope in their own format (dask arrays and
xarray Datasets as zarr, DataFrames as parquet), through the same store, on every backend."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import freight
from freight.exceptions import DeserializationError, KeyNotFoundError, StorageError, UnknownTagError
from freight.storage.persistent import SIDE, DaskZarr, PandasParquet, PolarsParquet, XarrayZarr


@pytest.fixture
def pstore(store):
    store.register_persistent(DaskZarr())
    store.register_persistent(XarrayZarr())
    store.register_persistent(PandasParquet())
    store.register_persistent(PolarsParquet())
    return store


def _side_names(store, key):
    return [name for name, _, _ in store._native.list(f"{key}{SIDE}")]


def test_dask_arrays_go_to_zarr_and_come_back_lazily(pstore):
    x = da.random.random((300, 200), chunks=(100, 50))
    pstore.save("run/x", {"x": x, "meta": {"n": 1}})
    names = _side_names(pstore, "run/x")
    # One zarr chunk object per dask chunk, plus the array's metadata.
    assert sum("/c/" in n for n in names) == 3 * 4
    assert any(n.endswith("zarr.json") for n in names)
    back = pstore.load("run/x")
    assert isinstance(back["x"], da.Array)  # lazy: nothing read until computed
    assert back["x"].chunks == x.chunks
    np.testing.assert_array_equal(back["x"].compute(), x.compute())
    assert back["meta"] == {"n": 1}
    # The envelope itself stays small: the data is in the side objects.
    assert pstore.info("run/x")["data_length"] < 10_000


def test_side_objects_are_hidden_replaced_and_removed(pstore):
    x = da.ones((100,), chunks=25)
    pstore.save("k", x)
    first = set(_side_names(pstore, "k"))
    assert pstore.list() == ["k"] and list(pstore) == ["k"] and len(pstore) == 1
    pstore.save("k", x * 2)
    second = set(_side_names(pstore, "k"))
    assert first.isdisjoint(second)  # a new save writes a new area, then drops the old one
    np.testing.assert_array_equal(pstore.load("k").compute(), np.full(100, 2.0))
    pstore.delete("k")
    assert _side_names(pstore, "k") == []
    assert pstore.list() == []


def test_xarray_and_parquet(pstore):
    ds = xr.Dataset({"v": (("t", "y"), np.arange(12.0).reshape(4, 3))}, coords={"t": np.arange(4)})
    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    pstore.save("ds", ds)
    pstore.save("df", df)
    xr.testing.assert_equal(pstore.load("ds").load(), ds)
    pd.testing.assert_frame_equal(pstore.load("df"), df)
    assert any(n.endswith("data.parquet") for n in _side_names(pstore, "df"))


def test_a_missing_side_object_is_a_clear_error(pstore):
    pstore.save("gone", da.zeros((10,), chunks=5))
    for name in _side_names(pstore, "gone"):
        pstore._native.delete(name)
    with pytest.raises(StorageError, match="side object"):
        pstore.load("gone")


def test_other_stores_and_plain_loads_refuse_clearly(pstore, tmp_path):
    pstore.save("v", da.arange(6, chunks=3))
    raw = bytes(memoryview(pstore._native.get("v")))
    # freight.loads has no such serializer: the payload names the tag it needs.
    with pytest.raises(UnknownTagError, match="freight.persistent.dask-zarr"):
        freight.loads(raw)
    # The store's own Freight knows it, but only a Store.load can reach the side objects.
    with pytest.raises(DeserializationError, match="Store.load"):
        pstore.freight.loads(raw)
    with pytest.raises(StorageError, match="Store.save"):
        pstore.freight.dumps(da.arange(3, chunks=3))


def test_side_keys_are_reserved(pstore):
    with pytest.raises(StorageError, match="reserved"):
        pstore.save(f"a{SIDE}b", 1)
    with pytest.raises(KeyNotFoundError):
        pstore.delete("never-saved")


def test_a_store_without_persistent_serializers_keeps_dask_arrays_in_the_envelope(store):
    x = da.arange(10, chunks=5)
    store.save("plain", x)
    assert _side_names(store, "plain") == []
    np.testing.assert_array_equal(store.load("plain").compute(), np.arange(10))


def test_polars_frames_as_parquet(pstore):
    import polars as pl

    df = pl.DataFrame({"a": [1, 2, 3], "b": ["x", None, "z"]})
    pstore.save("pl", {"frame": df})
    assert pstore.load("pl")["frame"].equals(df)
    assert any(n.endswith("data.parquet") for n in _side_names(pstore, "pl"))
