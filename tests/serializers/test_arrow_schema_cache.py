"""The pyarrow serializers import a schema once per process (``_IMPORTED_SCHEMAS``) and then
import arrays against it (``arrow_loads(..., "arrays")``): a load through the kept schema gives
what the first load gave, for every object kind, with metadata, nulls, several batches and zero
copy; extension types are not kept (registrations change between loads)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import freight
from freight._freight import CArrays, arrow_dumps, arrow_loads
from freight.serializers import arrow as far

SCHEMA = pa.schema([("i", pa.int64()), ("s", pa.string()), ("f", pa.float64())], metadata={b"k": b"v"})
TABLE = pa.Table.from_batches(
    [
        pa.record_batch(
            [pa.array([1, None, 3]), pa.array(["a", None, "é"]), pa.array([0.5, 1.5, None])], schema=SCHEMA
        ),
        pa.record_batch([pa.array([4]), pa.array(["x" * 40]), pa.array([2.5])], schema=SCHEMA),
    ]
)
OBJECTS = {
    "table": TABLE,
    "batch": TABLE.to_batches()[0],
    "array": pa.array(["a", None, "bc"]),
    "chunked": pa.chunked_array([[1, 2], [None, 4]], pa.int32()),
    "empty table": TABLE.slice(0, 0),
}


@pytest.fixture(autouse=True)
def no_kept_schemas():
    far._IMPORTED_SCHEMAS.clear()
    yield
    far._IMPORTED_SCHEMAS.clear()


@pytest.mark.parametrize("zero_copy", [False, True])
@pytest.mark.parametrize("name", OBJECTS)
def test_a_schema_met_again_gives_what_the_first_load_gave(name, zero_copy):
    obj = OBJECTS[name]
    frames = freight.dumps_frames(obj)
    first = freight.loads_frames(frames, zero_copy=zero_copy)
    kept = len(far._IMPORTED_SCHEMAS)
    again = freight.loads_frames(frames, zero_copy=zero_copy)
    assert kept == 1 and len(far._IMPORTED_SCHEMAS) == 1  # the second load used the kept schema
    for back in (first, again):
        assert type(back) is type(obj) and back.equals(obj)
        assert getattr(back, "schema", None) == getattr(obj, "schema", None)
        if hasattr(obj, "schema"):
            assert back.schema.metadata == obj.schema.metadata
    if isinstance(obj, pa.Table):
        assert [b.num_rows for b in again.to_batches()] == [b.num_rows for b in obj.to_batches()]


def test_an_extension_type_is_not_kept():
    obj = pa.array([b"0123456789abcdef"], pa.uuid())
    frames = freight.dumps_frames(obj)
    assert freight.loads_frames(frames).equals(obj)
    assert far._IMPORTED_SCHEMAS == {}


def test_c_arrays_not_imported_are_released_with_their_holder():
    frames = freight.dumps_frames(TABLE)
    arrays = arrow_loads(*arrow_dumps(TABLE), "arrays")  # the tuple form: the same build as an ArrowMeta's
    assert isinstance(arrays, CArrays) and len(arrays) == 2
    first = pa.RecordBatch._import_from_c(arrays.addresses()[0], TABLE.schema)
    del arrays  # the second array was never imported: released here, not leaked or freed twice
    assert first.equals(TABLE.to_batches()[0])
    assert freight.loads_frames(frames).equals(TABLE)
