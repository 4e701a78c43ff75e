"""xarray through freight's built-in serializers (no pickle, data as frames), and dask
collections through the pickle bridge (their graphs pickled, the concrete numpy and pandas
chunks inside encoded by freight as frames)."""

from __future__ import annotations

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import freight
from support.library_checks import check_lazy_loading, loaded_without_pickle


def data_array() -> xr.DataArray:
    arr = xr.DataArray(
        np.arange(12.0).reshape(3, 4),
        dims=("x", "t"),
        coords={"x": [10, 20, 30], "t": pd.date_range("2020", periods=4), "label": ("x", ["a", "b", "c"])},
        name="temperature",
        attrs={"units": "K", "scale": 1.5},
    )
    arr.encoding = {"dtype": "float32"}
    return arr


def test_data_arrays_and_datasets_round_trip_identically_without_pickle():
    arr = data_array()
    ds = xr.Dataset({"temperature": arr, "count": ("x", np.array([1, 2, 3]))}, attrs={"title": "test"})
    for obj in (arr, ds):
        for back in loaded_without_pickle(obj):
            assert type(back) is type(obj)
            assert back.identical(obj)
    assert freight.loads(freight.dumps(arr)).encoding == {"dtype": "float32"}


def test_variable_data_travels_as_frames():
    arr = xr.DataArray(np.zeros((500, 400)), dims=("a", "b"))
    frames = freight.dumps_frames(arr)
    assert max(len(f) for f in frames[1:]) == arr.nbytes


def test_attrs_freight_cannot_encode_are_pickled_in_place():
    arr = data_array()
    arr.attrs["odd"] = complex  # a class: no native encoding
    blob = freight.dumps(arr)
    assert freight.inspect(blob)["needs_pickle"]
    assert freight.loads(blob).attrs["odd"] is complex


def test_dask_arrays_keep_their_graph_and_send_chunks_as_frames():
    source = np.arange(1_000_000, dtype=np.float64)
    lazy = da.from_array(source, chunks=250_000) * 2
    blob = freight.dumps(lazy)
    info = freight.inspect(blob)
    assert info["needs_pickle"]  # the graph itself is pickled
    assert sum(f["length"] for f in info["frames"]) >= source.nbytes  # the chunk data is in frames
    back = freight.loads(blob)
    assert isinstance(back, da.Array)
    np.testing.assert_array_equal(back.compute(scheduler="synchronous"), source * 2)


def test_dask_dataframes_keep_their_graph():
    pdf = pd.DataFrame({"a": np.arange(100), "b": np.arange(100) * 0.5})
    ddf = dd.from_pandas(pdf, npartitions=4)
    back = freight.loads(freight.dumps(ddf))
    assert isinstance(back, dd.DataFrame)
    with dask.config.set(scheduler="synchronous"):
        pd.testing.assert_frame_equal(back.compute(), pdf)


@pytest.mark.parametrize("obj", [data_array(), xr.Dataset({"v": ("x", [1, 2])})], ids=["DataArray", "Dataset"])
def test_xarray_in_containers(obj):
    back = freight.loads(freight.dumps({"k": [obj, obj]}), allow_pickle=False)
    assert back["k"][0].identical(obj)
    assert back["k"][0] is back["k"][1]


def test_lazy_loading_and_the_missing_library_error(tmp_path):
    shown = check_lazy_loading(tmp_path, {"a": data_array()}, "xarray", "xarray", 'x["a"].attrs["units"]')
    assert shown == "K"
