"""Values inside a serializer's metadata that freight cannot encode natively are pickled in
place (a "pickle island"): the payload then needs pickle, and only then."""

from __future__ import annotations

import numpy as np
import pytest

import freight


class Box:
    def __init__(self, value):
        self.value = value


class Plain:
    """Not registered anywhere: no native encoding."""

    def __init__(self, n):
        self.n = n


class BoxSerializer:
    tag = "test.box"
    types = (Box,)

    def serialize(self, box):
        return {"value": box.value}, []

    def deserialize(self, meta, frames):
        return Box(meta["value"])


@pytest.fixture
def codec():
    f = freight.Freight()
    f.register(BoxSerializer())
    return f


def test_native_metadata_needs_no_pickle(codec):
    blob = codec.dumps(Box(np.arange(5)))
    assert not freight.inspect(blob)["needs_pickle"]
    np.testing.assert_array_equal(codec.loads(blob, allow_pickle=False).value, np.arange(5))


@pytest.mark.parametrize(
    "value",
    [np.array([1, "a", None], dtype=object), Plain(3), {"k": np.array([], dtype=object)}],
    ids=["object array", "nested unregistered object", "empty object array in a dict"],
)
def test_values_without_native_encoding_become_pickle_islands(codec, value):
    blob = codec.dumps(Box(value))
    info = freight.inspect(blob)
    assert info["needs_pickle"]
    assert info["tree"]["node_tags"]["Pickle"] >= 1
    assert info["producer"]["python"]
    with pytest.raises(freight.UnsafePayloadError):
        codec.loads(blob, allow_pickle=False)
    back = codec.loads(blob).value
    assert type(back) is type(value)


def test_large_islands_travel_as_frames(codec):
    value = np.array([f"{i:0100d}" for i in range(2000)], dtype=object)
    blob = codec.dumps(Box(value))
    assert freight.inspect(blob)["frames"]
    assert list(codec.loads(blob).value) == list(value)
