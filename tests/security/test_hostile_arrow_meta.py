"""The decoder reads Arrow Ext metadata straight from the tree (``decode/arrow_meta.rs``, issue 34)
for zero-copy loads at Arrow's speed; it must refuse exactly what the tuple path refused. Forged
string offsets over read-only frames (a zero-copy load views them in place) are refused; a node
whose numbers are not sizes (negative, not ints) falls back to the tuple path and is refused
there; memo markers and references the walker writes inside and around the metadata (shared
empty tuples, schema bytes) decode to the same objects as before."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

import freight
from support.arrow_forging import dump, payload

pl = pytest.importorskip("polars")


@pytest.mark.parametrize("forge", ["decreasing", "past the end", "negative"])
def test_forged_string_offsets_in_zero_copy_frames_are_refused(forge):
    frames = [bytes(f) for f in freight.dumps_frames(pa.table({"s": ["ab", "cd", "ef", "gh"]}))]
    # read-only frames: a zero-copy load views them in place, checked all the same
    index = next(i for i, f in enumerate(frames) if i and f[:20] == struct.pack("<5i", 0, 2, 4, 6, 8))
    offsets = [0, 2, 4, 6, 8]
    if forge == "decreasing":
        offsets[2] = 1
    elif forge == "past the end":
        offsets[4] = 1 << 20
    else:
        offsets[1] = -4
    frames[index] = struct.pack("<5i", *offsets) + frames[index][20:]
    with pytest.raises(freight.DeserializationError):
        freight.loads_frames(frames, zero_copy=True)


@pytest.mark.parametrize("forge", ["offset past the buffer", "length past the buffer", "no such buffer"])
def test_forged_polars_string_views_in_zero_copy_frames_are_refused(forge):
    words = ["a string longer than twelve bytes", "another long string value"]
    frames = [bytes(f) for f in freight.dumps_frames(pl.DataFrame({"s": words}))]
    view = struct.pack("<i", len(words[0])) + words[0][:4].encode()
    index = next(i for i, f in enumerate(frames) if i and f[:8] == view)
    length, buffer, offset = len(words[0]), 0, 0
    if forge == "offset past the buffer":
        offset = 1 << 20
    elif forge == "length past the buffer":
        length = 1 << 20
    else:
        buffer = 7
    forged = struct.pack("<i", length) + words[0][:4].encode() + struct.pack("<ii", buffer, offset)
    frames[index] = forged + frames[index][16:]
    with pytest.raises(freight.DeserializationError):
        freight.loads_frames(frames, zero_copy=True)


@pytest.mark.parametrize("field", [0, 1, 2])
@pytest.mark.parametrize("bad", [-1, "x", 2.5])
def test_nodes_whose_numbers_are_not_sizes_are_refused(field, bad):
    schema, nodes, frames = dump(pa.array([1, 2, 3], pa.int64()))
    nodes[0][field] = bad
    with pytest.raises(freight.FreightError):
        freight.loads(payload("pyarrow.Array", schema, nodes, frames), allow_pickle=False)


def test_shared_empty_tuples_and_schemas_decode_as_before():
    table = pa.table({"i": [1, 2], "s": ["a", None]})
    empty = ()
    value = {"a": table, "b": table.slice(1), "c": empty, "d": [empty, pa.chunked_array([[1], [2, 3]])]}
    for blob in (freight.dumps(value), freight.dumps_frames(value)):
        back = freight.loads_frames(blob, zero_copy=True) if isinstance(blob, list) else freight.loads(blob)
        assert back["a"].equals(table) and back["b"].equals(table.slice(1))
        assert back["c"] == () and back["d"][0] == ()
        assert back["d"][1].to_pylist() == [1, 2, 3]


def test_a_record_batch_of_no_rows_and_a_series_still_load():
    batch = pa.record_batch({"x": pa.array([], pa.int32())})
    back = freight.loads(freight.dumps(batch))
    assert back.num_rows == 0 and back.schema == batch.schema
    series = pl.Series("v", [1.5, None, 3.0])
    assert freight.loads_frames(freight.dumps_frames(series), zero_copy=True).to_list() == [1.5, None, 3.0]
