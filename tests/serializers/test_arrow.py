"""pyarrow through freight's built-in serializers: arrays of many types (sliced, nested, with
nulls), chunked arrays, record batches, tables and schemas with metadata; zero copy both ways;
no pickle; lazy loading and the missing-library error."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal

import pyarrow as pa
import pytest

import freight
from support.library_checks import check_lazy_loading, loaded_without_pickle

ARRAYS = {
    "int64": pa.array([1, 2, None, 4]),
    "uint8": pa.array([1, 255], pa.uint8()),
    "float32": pa.array([1.5, None], pa.float32()),
    "float16": pa.array([1.0, 2.0], pa.float32()).cast(pa.float16()),
    "bool": pa.array([True, None, False]),
    "string": pa.array(["a", None, "ccc"]),
    "large_string": pa.array(["x", "yy"], pa.large_string()),
    "binary": pa.array([b"ab", None]),
    "fixed_binary": pa.array([b"ab", b"cd"], pa.binary(2)),
    "date32": pa.array([dt.date(2020, 1, 1), None]),
    "timestamp_tz": pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("ns", tz="Europe/Paris")),
    "duration": pa.array([1, 2], pa.duration("ms")),
    "decimal": pa.array([decimal.Decimal("1.10"), None]),
    "list": pa.array([[1, 2], [3], None, []]),
    "large_list": pa.array([[1], [2, 3]], pa.large_list(pa.int64())),
    "fixed_size_list": pa.array([[1, 2], [3, 4]], pa.list_(pa.int64(), 2)),
    "struct": pa.array([{"x": 1, "y": "a"}, None, {"x": 3, "y": None}]),
    "nested": pa.array([{"l": [1, 2], "s": {"z": "q"}}, {"l": None, "s": None}]),
    "map": pa.array([{"a": 1}, None], pa.map_(pa.string(), pa.int64())),
    "dictionary": pa.array(["a", "b", "a", None]).dictionary_encode(),
    "null": pa.array([None, None]),
    "empty": pa.array([], pa.int32()),
    "union": pa.UnionArray.from_sparse(pa.array([0, 1], type=pa.int8()), [pa.array([1, 2]), pa.array(["a", "b"])]),
}


@pytest.mark.parametrize("name", list(ARRAYS))
@pytest.mark.parametrize("sliced", [False, True])
def test_arrays_round_trip_without_pickle(name, sliced):
    arr = ARRAYS[name]
    if sliced and len(arr) > 1:
        arr = arr[1:]
    back, from_frames = loaded_without_pickle(arr)
    assert back.type == arr.type
    assert back.equals(arr)
    assert from_frames.equals(arr)


def test_chunked_arrays_batches_tables_and_schemas():
    table = pa.table({"a": [1, 2, 3], "b": ["x", None, "z"], "c": [[1], [], None]})
    table = table.replace_schema_metadata({"origin": "test"})
    table = pa.concat_tables([table, table])  # two chunks per column
    for obj in (table, table.to_batches()[0], table.column("b"), pa.chunked_array([], pa.int64())):
        back = freight.loads(freight.dumps(obj), allow_pickle=False)
        assert type(back) is type(obj)
        assert back.equals(obj)
    back = freight.loads(freight.dumps(table))
    assert back.schema.metadata == {b"origin": b"test"}
    assert [c.num_chunks for c in back.columns] == [c.num_chunks for c in table.columns]
    schema = freight.loads(freight.dumps(table.schema))
    assert schema.equals(table.schema, check_metadata=True)


def test_buffers_are_frames_without_copies():
    arr = pa.array(range(1_000_000))
    frames = freight.dumps_frames(arr)
    assert pa.py_buffer(frames[-1]).address == arr.buffers()[1].address  # dumps_frames: no copy
    blob = freight.dumps(arr)
    back = freight.loads(blob, zero_copy=True)
    data = back.buffers()[1]
    start = pa.py_buffer(blob).address
    assert start <= data.address < start + len(blob)  # loads(zero_copy=True): a view of the input
    assert back.equals(arr)


@dataclasses.dataclass
class Holder:
    table: object
    same: object


def test_arrow_inside_pickled_objects_keeps_identity_and_frames():
    table = pa.table({"a": list(range(1000))})
    back = freight.loads(freight.dumps(Holder(table, table)))
    assert back.table.equals(table)
    assert back.same is back.table
    assert "pyarrow.Table" in freight.inspect(freight.dumps(Holder(table, table)))["tags"]


def test_compressed_arrow_payloads_round_trip():
    table = pa.table({"a": list(range(200_000)), "b": ["v"] * 200_000})
    back = freight.loads(freight.dumps(table, compression="zstd"))
    assert back.equals(table)


def test_lazy_loading_and_the_missing_library_error(tmp_path):
    assert check_lazy_loading(tmp_path, pa.table({"a": [1, 2]}), "pyarrow", "arrow", "x.num_rows") == "2"
