import numpy as np
import pytest

import freight


@pytest.mark.parametrize("signed", [False, True])
def test_smoke(store_location, signed):
    key = b"k" * 32
    store = store_location.open(freight=freight.Freight(key=key) if signed else None)
    val = {"a": np.arange(2_000_000, dtype="f8"), "b": np.ones((1000, 3), "i4"), "s": "x"}
    store.save("v", val)
    lv = store.lazy("v")
    assert lv.keys() == ["a", "b", "s"]
    assert np.array_equal(lv["a"][1000:2000], val["a"][1000:2000])
    assert lv.bytes_read < 400_000
    assert np.array_equal(lv["b"].load(), val["b"])
    assert lv["s"] == "x"
