"""Columns of a stored table read lazily (``LazyValue.columns``): from a local folder store they
are views of the mapped file when their frames are stored raw (no copy of the column's buffers),
and on every backend they stay valid after the LazyValue is gone and the stored value is
replaced or deleted (the mapping, or the buffer the ranged reads filled, lives as long as a
column refers to it)."""

from __future__ import annotations

import gc

import numpy as np
import pyarrow as pa
import pytest

import freight.storage as fs
from support.lazy_store import lazy_store


def _table(rows: int = 200_000) -> pa.Table:
    rng = np.random.default_rng(5)
    return pa.table({f"c{i}": rng.random(rows) for i in range(4)})


def _span(buffer) -> tuple[int, int]:
    base = np.frombuffer(buffer, dtype=np.uint8).ctypes.data
    return base, base + len(memoryview(buffer).cast("B"))


def test_a_local_column_is_a_view_of_the_mapped_file(tmp_path):
    store = fs.open(str(tmp_path / "store"), compression="none")
    table = _table()
    store.save("t", table)
    lv = store.lazy("t")
    got = lv.columns(["c2"])
    assert got.column("c2").equals(table.column("c2"))
    low, high = _span(lv._reader.source.buffer())
    values = got.column("c2").chunks[0].buffers()[1]
    assert low <= values.address and values.address + values.size <= high
    # Only the header and that column's frame were used, not the other three columns.
    assert lv.bytes_read < table.column("c2").nbytes + (64 << 10)


def test_a_compressed_local_column_is_decompressed_into_its_own_memory(tmp_path):
    store = fs.open(str(tmp_path / "store"), compression="zstd")
    table = pa.table({"z": np.zeros(200_000), "r": np.arange(200_000.0)})
    store.save("t", table)
    lv = store.lazy("t")
    got = lv.columns(["z"])
    assert got.column("z").equals(table.column("z"))
    low, high = _span(lv._reader.source.buffer())
    address = got.column("z").chunks[0].buffers()[1].address
    assert not low <= address < high


@pytest.mark.parametrize("after", ["replaced", "deleted"])
def test_columns_outlive_their_lazy_value_and_the_stored_version(store_location, after):
    store = lazy_store(store_location)
    table = _table()
    store.save("t", table)
    got = store.lazy("t").columns(["c1", "c3"])  # the LazyValue is dropped at once
    gc.collect()
    if after == "replaced":
        store.save("t", pa.table({"c1": np.zeros(3), "c3": np.ones(3)}))
    else:
        store.delete("t")
    gc.collect()
    assert got.equals(table.select(["c1", "c3"]))
    assert got.column("c1").to_numpy()[-1] == table.column("c1").to_numpy()[-1]
