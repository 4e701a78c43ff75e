"""Arrow as a walker node (issue 24, item 5): the walker writes the Ext node of an Arrow exporter
(pyarrow, polars, the Arrow-backed columns of a pandas frame) straight from what it exports.

The payload must be byte for byte what the serializers' own form (``_freight.arrow_dumps``'s
tuples, walked) gives, so that nothing about the wire changes; what the walker leaves to the
serializer (extension types, data arrow-rs does not export, polars Object columns, a check that
says no) must still reach ``serialize``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import freight
from freight._freight import arrow_dumps, arrow_loads
from freight.serializers import arrow as far
from freight.serializers import polars as fpl


def _table() -> pa.Table:
    n = 200
    return pa.table(
        {
            "i": pa.array([None if i % 7 == 0 else i for i in range(n)], pa.int64()),
            "f": np.linspace(0, 1, n),
            "s": [f"value {i}" for i in range(n)],
            "d": pa.array([("a", "b", "c")[i % 3] for i in range(n)]).dictionary_encode(),
            "l": [[i, i + 1] if i % 5 else None for i in range(n)],
            "st": [{"x": i, "y": str(i)} for i in range(n)],
            "empty": pa.array([[]] * n, pa.list_(pa.int8())),  # children and buffers: ()
        }
    )


def _cases() -> dict[str, object]:
    table = _table()
    chunked = pa.chunked_array([table.column("d").chunk(0).slice(0, 50), table.column("d").chunk(0).slice(50)])
    return {
        "pa.Table": table,
        "pa.Table (two batches)": pa.concat_tables([table, table.slice(10, 20)]),
        "pa.Array": table.column("st").chunk(0),
        "pa.Array (sliced)": table.column("s").chunk(0).slice(3, 40),
        "pa.ChunkedArray (shared dictionary)": chunked,
        "pa.RecordBatch": table.to_batches()[0],
        "pa.RecordBatch (no rows)": table.to_batches()[0].slice(0, 0),
        "pl.DataFrame": pl.from_arrow(table.drop_columns(["d"])),
        "pl.Series (string views)": pl.Series("s", [f"a string longer than twelve bytes {i}" for i in range(100)]),
        "pd.DataFrame (Arrow columns)": pd.DataFrame(
            {
                "n": np.arange(100),
                "a": pd.array(range(100), dtype=pd.ArrowDtype(pa.int64())),
                "s": pd.array([f"s{i}" for i in range(100)], dtype=pd.StringDtype("pyarrow")),
                "t": pd.array([f"t{i}" for i in range(100)], dtype=pd.ArrowDtype(pa.string())),
            }
        ),
    }


CASES = _cases()


def _python_form_codec() -> freight.Freight:
    """A codec whose Arrow serializers leave the node to Python (``arrow_node`` off): the
    metadata ``arrow_dumps`` returns, walked as any serializer's."""
    codec = freight.Freight()
    for base in (
        far.ArraySerializer,
        far.ChunkedArraySerializer,
        far.RecordBatchSerializer,
        far.TableSerializer,
        fpl.DataFrameSerializer,
        fpl.SeriesSerializer,
    ):
        codec.register(type("InPython", (base,), {"arrow_node": False})())
    return codec


def _equal(got, want) -> None:
    if isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want)
    elif isinstance(want, (pl.DataFrame, pl.Series)):
        assert got.equals(want)
    else:
        assert type(got) is type(want)
        assert got.equals(want)


@pytest.mark.parametrize("name", list(CASES))
def test_the_walkers_node_is_the_serializers_form_byte_for_byte(name):
    obj = CASES[name]
    in_python = _python_form_codec()
    assert freight.dumps(obj) == in_python.dumps(obj)
    assert [bytes(f) for f in freight.dumps_frames(obj)] == [bytes(f) for f in in_python.dumps_frames(obj)]
    _equal(freight.loads(freight.dumps(obj)), obj)


def test_the_node_inside_other_values_keeps_sharing_and_order():
    table = CASES["pa.Table"]
    value = {"t": table, "again": table, "after": [np.arange(3), "x"], "batch": CASES["pa.RecordBatch"]}
    data = freight.dumps(value)
    assert data == _python_form_codec().dumps(value)
    back = freight.loads(data)
    assert back["t"] is back["again"]  # one object, as the walker memoizes any shared one
    assert back["t"].equals(table) and back["batch"].equals(CASES["pa.RecordBatch"])
    assert back["after"][1] == "x" and back["after"][0].tolist() == [0, 1, 2]


class _Counting(far.TableSerializer):
    """The built-in Table serializer, counting its ``serialize`` calls."""

    def __init__(self):
        self.calls = 0

    def serialize(self, obj):
        self.calls += 1
        return super().serialize(obj)


def _counting_codec() -> tuple[freight.Freight, _Counting]:
    codec, serializer = freight.Freight(), _Counting()
    codec.register(serializer)
    return codec, serializer


def test_the_walker_writes_the_node_without_calling_serialize():
    codec, serializer = _counting_codec()
    data = codec.dumps(CASES["pa.Table"])
    assert serializer.calls == 0
    assert codec.loads(data).equals(CASES["pa.Table"])


def test_extension_types_are_left_to_serialize():
    # An extension type may be a Python one that must be pickled: the serializer looks at it.
    uuid = pa.ExtensionArray.from_storage(pa.uuid(), pa.array([b"0123456789abcdef"] * 3, pa.binary(16)))
    table = pa.table({"u": uuid, "n": [1, 2, 3]})
    codec, serializer = _counting_codec()
    data = codec.dumps(table)
    assert serializer.calls == 1
    assert codec.loads(data).equals(table)


class _PythonPoint(pa.ExtensionType):
    def __init__(self):
        super().__init__(pa.struct([("x", pa.float64())]), "freight.test.arrow_walker_point")

    def __arrow_ext_serialize__(self):
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls()


def test_an_unregistered_python_extension_type_is_still_pickled_in_place():
    storage = pa.array([{"x": 1.0}, {"x": 2.0}], pa.struct([("x", pa.float64())]))
    table = pa.table({"p": pa.ExtensionArray.from_storage(_PythonPoint(), storage)})
    data = freight.dumps(table)
    assert freight.inspect(data)["needs_pickle"]  # the Pickled form, not the storage type
    back = freight.loads(data)
    assert isinstance(back.column("p").type, _PythonPoint)
    assert back.equals(table)


def test_a_stream_that_fails_is_a_serialization_error_naming_the_producers_error():
    def batches():
        yield pa.record_batch({"a": [1]})
        raise RuntimeError("the producer broke")

    reader = pa.RecordBatchReader.from_batches(pa.schema({"a": pa.int64()}), batches())
    with pytest.raises(freight.SerializationError, match="the Arrow stream failed.*the producer broke"):
        arrow_dumps(reader)


def test_polars_object_columns_are_refused_not_written_as_addresses():
    # polars exports an Object column as fixed_size_binary[8] of object addresses: the walker
    # must ask the serializer's check first, which sends it to serialize and its refusal.
    frame = pl.DataFrame({"o": [object(), object()]}, schema={"o": pl.Object})
    with pytest.raises(freight.SerializationError, match="dtype Object"):
        freight.dumps(frame)
    with pytest.raises(freight.SerializationError, match="dtype Object"):
        freight.dumps(frame.to_series())
    with pytest.raises(freight.SerializationError, match="dtype Object"):
        freight.dumps({"inside": [frame]})


class _Exporter:
    """An object of a user's type that speaks the Arrow PyCapsule interface (or pretends to)."""

    def __init__(self, capsule_of):
        self.capsule_of = capsule_of

    def __arrow_c_stream__(self, requested_schema=None):
        return self.capsule_of()


class _ExporterSerializer:
    tag = "test.arrow_walker.Exporter"
    types = (_Exporter,)
    arrow_node = True

    def __init__(self):
        self.calls = 0

    def serialize(self, obj):
        self.calls += 1
        return "by serialize", []

    def deserialize(self, meta, frames):
        if meta == "by serialize":
            return meta
        return pa.RecordBatchReader._import_from_c_capsule(arrow_loads(meta, frames, "stream")).read_all()


@pytest.mark.parametrize(
    ("capsule_of", "by_node"),
    [
        (lambda: pa.table({"a": [1, 2]}).__arrow_c_stream__(), True),
        (lambda: pa.array([1]).__arrow_c_array__()[0], False),  # a capsule of the wrong name
        (lambda: "not a capsule", False),
        (lambda: 1 / 0, False),  # the exporter raises
    ],
    ids=["valid", "wrong capsule", "not a capsule", "raises"],
)
def test_a_users_serializer_may_ask_for_the_node_and_gets_serialize_when_the_export_fails(capsule_of, by_node):
    codec, serializer = freight.Freight(), _ExporterSerializer()
    codec.register(serializer)
    back = codec.loads(codec.dumps(_Exporter(capsule_of)))
    if by_node:
        assert serializer.calls == 0
        assert back.equals(pa.table({"a": [1, 2]}))
    else:
        assert serializer.calls == 1
        assert back == "by serialize"


def test_a_check_that_says_no_sends_the_object_to_serialize():
    serializer = _ExporterSerializer()
    seen = []
    serializer.arrow_node = lambda obj: seen.append(obj) or False
    codec = freight.Freight()
    codec.register(serializer)
    value = _Exporter(lambda: pa.table({"a": [1]}).__arrow_c_stream__())
    assert codec.loads(codec.dumps(value)) == "by serialize"
    assert seen == [value] and serializer.calls == 1


def test_arrow_errors_are_freight_errors():
    with pytest.raises(freight.SerializationError, match="exports neither"):
        arrow_dumps(object())
    (schema, batches), frames = arrow_dumps(pa.array([1, 2, 3]))
    with pytest.raises(freight.DeserializationError, match="not \\(schema, batches\\)"):
        arrow_loads(schema, frames, "array")
    with pytest.raises(freight.DeserializationError, match="schema bytes are malformed"):
        arrow_loads((b"junk", batches), frames, "array")
    with pytest.raises(freight.DeserializationError, match="refers to frame 9"):
        arrow_loads((schema, [(3, 0, None, (0, 9), ())]), frames, "array")
    with pytest.raises(freight.DeserializationError, match="unknown Arrow form"):
        arrow_loads((schema, batches), frames, "table")
