"""Persistent serializers: values kept beside the envelope in their own format (dask arrays and
xarray Datasets as zarr, DataFrames as parquet), through the same store, on every backend."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import freight
from freight.exceptions import (
    DeserializationError,
    KeyNotFoundError,
    SerializationError,
    StorageError,
    UnknownTagError,
)
from freight.storage.persistent import DaskZarr, PandasParquet, PolarsParquet, XarrayZarr
from freight.storage.side_objects import SIDE, SideArea


@pytest.fixture
def pstore(store):
    store.register_persistent(DaskZarr())
    store.register_persistent(XarrayZarr())
    store.register_persistent(PandasParquet())
    store.register_persistent(PolarsParquet())
    return store


def _side_names(store, key):
    return [o.key for o in store.list_objects(f"{key}{SIDE}", side_objects=True)]


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
    assert sum(f["length"] for f in pstore.info("run/x")["frames"]) < 10_000


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
    pstore._native.delete_prefix(f"gone{SIDE}")  # lost behind the store's back (Store.delete_prefix refuses)
    with pytest.raises(StorageError, match="side object"):
        pstore.load("gone")


def test_other_stores_and_plain_loads_refuse_clearly(pstore, tmp_path):
    pstore.save("v", da.arange(6, chunks=3))
    raw = bytes(memoryview(pstore.get_bytes("v")))
    # freight.loads has no such serializer: the payload names the tag it needs.
    with pytest.raises(UnknownTagError, match="freight.persistent.dask-zarr"):
        freight.loads(raw)
    # The store's own Freight knows it, but only a Store.load can reach the side objects.
    with pytest.raises(DeserializationError, match="Store.load"):
        pstore.freight.loads(raw)
    with pytest.raises(SerializationError, match="Store.save"):
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


# -- the mechanism: serializers bound to their store, references recorded, removal -----------------


class Box:
    def __init__(self, text: str):
        self.text = text


class BoxFiles:
    """A persistent serializer that writes files through its side area (real files in a local
    folder store), and keeps a log of what it was asked to do."""

    name = "box"
    types = (Box,)

    def __init__(self, fail_on: str | None = None, remove_error: type[Exception] | None = None):
        self.log: list[tuple[str, object]] = []
        self.fail_on, self.remove_error = fail_on, remove_error

    def save(self, obj, side: SideArea):
        self.log.append(("save", side.prefix))
        if obj.text == self.fail_on:
            raise ValueError(f"cannot keep {obj.text}")
        with side.open("box.txt", "w") as f:
            f.write(obj.text)
        return {"file": "box.txt"}

    def load(self, ref, side: SideArea):
        self.log.append(("load", ref))
        with side.open(ref["file"], "r") as f:
            return Box(f.read())

    def remove(self, ref, side: SideArea):
        self.log.append(("remove", ref))
        if self.remove_error is not None:
            raise self.remove_error("cannot remove")
        side.remove(ref["file"])


def test_side_areas_are_files_of_a_local_store_and_hold_their_reference(store_location):
    store = store_location.open()
    boxes = BoxFiles()
    store.register_persistent(boxes)
    store.save("run/b", [Box("one"), Box("two")])
    # Each value's files in its own folder, and beside it the record of its reference.
    names = _side_names(store, "run/b")
    save_id = names[0][len(f"run/b{SIDE}") :].split("/", 1)[0]
    side = f"run/b{SIDE}{save_id}/"
    assert names == [f"{side}box-0.ref", f"{side}box-0/box.txt", f"{side}box-1.ref", f"{side}box-1/box.txt"]
    assert [b.text for b in store.load("run/b")] == ["one", "two"]
    files = store_location.files()
    if files is not None:  # a local store: the serializer wrote the files themselves
        assert sum(name.endswith("box.txt") for name in files) == 2
    store.delete("run/b")
    assert [entry for entry in boxes.log if entry[0] == "remove"] == [("remove", {"file": "box.txt"})] * 2
    assert store.list_objects("", side_objects=True) == []


def test_a_failed_save_leaves_no_side_objects(store):
    boxes = BoxFiles(fail_on="bad")
    store.register_persistent(boxes)
    with pytest.raises(ValueError, match="cannot keep bad"):  # the serializer's own error, as from dumps
        store.save("k", [Box("good"), Box("bad")])
    assert store.list_objects("", side_objects=True) == []
    assert ("remove", {"file": "box.txt"}) in boxes.log  # the one written before the failure


def test_removal_failures(store):
    boxes = BoxFiles(remove_error=PermissionError)
    store.register_persistent(boxes)
    store.save("a/x", Box("1"))
    with pytest.raises(StorageError, match="failed to remove a side object") as info:
        store.delete("a/x")  # nothing deleted: the value is still there, to retry
    assert isinstance(info.value.__cause__, PermissionError)
    assert store.load("a/x").text == "1"
    with pytest.warns(RuntimeWarning, match="failed to remove"):
        store.save("a/x", Box("2"))  # the new value is saved; the old one's remove failed
    assert store.load("a/x").text == "2"
    store.save("a/y", Box("3"))
    with pytest.raises(StorageError, match="failed to remove a side object"):
        store.delete_prefix("a/")  # everything deleted anyway
    assert store.list_objects("", side_objects=True) == []


def test_a_store_reaches_its_serializers_explicitly(tmp_path):
    """Two stores, the same serializer class: each value's side objects go through the store
    that saves it, whichever thread saves (no ambient state between stores or threads)."""
    import concurrent.futures

    one, two = freight.storage.open(tmp_path / "one"), freight.storage.open("memory://")
    for s in (one, two):
        s.register_persistent(BoxFiles())

    def save(i: int) -> None:
        (one if i % 2 else two).save(f"k{i}", Box(str(i)))

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(save, range(16)))
    assert one.list() == sorted(f"k{i}" for i in range(16) if i % 2)
    assert two.list() == sorted(f"k{i}" for i in range(16) if not i % 2)
    for i in range(16):
        assert (one if i % 2 else two).load(f"k{i}").text == str(i)
    # The reference points into its own value's side area only.
    with pytest.raises(UnknownTagError):
        freight.loads(one.get_bytes("k1"))


def test_values_saved_before_references_were_recorded_still_load(pstore):
    pstore.save("old", da.arange(6, chunks=3))
    (ref,) = [o.key for o in pstore.list_objects(f"old{SIDE}", side_objects=True) if o.key.endswith(".ref")]
    pstore._native.delete(ref)  # as an earlier freight wrote it (the zarr array without its .ref)
    np.testing.assert_array_equal(pstore.load("old").compute(), np.arange(6))
