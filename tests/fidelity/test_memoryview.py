"""memoryviews come back as memoryviews with their format, shape and read-only flag (cloudpickle
flattened them to bytes; pickle refuses them), and one over Python objects is refused: its
items are process memory addresses."""

from __future__ import annotations

import numpy as np
import pytest

import freight

CASES = {
    "bytes": memoryview(b"abc"),
    "bytearray": memoryview(bytearray(b"xyz")),
    "2-D float64": memoryview(np.arange(6.0).reshape(2, 3)),
    "strided": memoryview(np.arange(10)[::2]),
    "0-d": memoryview(np.array(3.5)),
    "big-endian": memoryview(np.zeros(3, ">i4")),
    "struct": memoryview(np.zeros(2, [("a", "i4"), ("b", "f8")])),
    "read-only": memoryview(np.arange(4.0)).toreadonly(),
    "empty": memoryview(b""),
}


@pytest.mark.parametrize("m", CASES.values(), ids=CASES.keys())
def test_memoryviews_keep_format_shape_and_flags(m):
    got = freight.loads(freight.dumps(m))
    assert type(got) is memoryview
    assert (got.format, got.shape, got.readonly, got.itemsize) == (m.format, m.shape, m.readonly, m.itemsize)
    assert got.tobytes() == m.tobytes()
    assert not freight.inspect(freight.dumps(m))["needs_pickle"]


def test_a_memoryview_nested_in_a_pickled_object_keeps_its_shape():
    class Holder:  # local class: goes through cloudpickle, which would flatten the view
        pass

    h = Holder()
    h.view = memoryview(np.arange(6, dtype=np.int32).reshape(3, 2))
    got = freight.loads(freight.dumps(h))
    assert (got.view.format, got.view.shape) == ("i", (3, 2))
    assert got.view.tolist() == h.view.tolist()


def test_a_memoryview_of_objects_is_refused():
    m = memoryview(np.array(["a", 1], dtype=object))
    with pytest.raises(freight.SerializationError, match="pointers to Python objects"):
        freight.dumps(m)
    with pytest.raises(freight.SerializationError, match="pointers to Python objects"):
        freight.dumps({"inside": [m]})
