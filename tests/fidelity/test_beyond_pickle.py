"""Where pickle is wrong and freight is not: exceptions whose ``__init__`` takes other arguments
than ``args``, masked arrays keeping their hard mask, big-endian datetime64 keeping its byte
order."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import freight


class KeywordOnlyError(Exception):
    def __init__(self, message, *, code):
        super().__init__(message)
        self.code = code


class TwoArgumentError(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a}/{b}")
        self.a, self.b = a, b


@pytest.mark.parametrize("exc", [KeywordOnlyError("boom", code=3), TwoArgumentError(1, 2)])
def test_exceptions_pickle_cannot_rebuild(exc):
    # Plain pickle raises TypeError here (cls(*args) misses the other arguments), unless a
    # library in the process patched exception pickling (tblib does): freight needs neither.
    back = freight.loads(freight.dumps(exc))
    assert type(back) is type(exc) and back.args == exc.args and back.__dict__ == exc.__dict__


def test_ordinary_exceptions_still_go_through_their_constructor():
    values = [ValueError("x"), KeyError("k"), StopIteration(5), SyntaxError("bad", ("f.py", 3, 4, "x=", 3, 5))]
    back = freight.loads(freight.dumps(values))
    assert [type(v) for v in back] == [type(v) for v in values]
    assert back[2].value == 5 and back[3].lineno == 3 and back[3].filename == "f.py"
    err = OSError(2, "No such file", "x.txt")
    assert freight.loads(freight.dumps(err)).filename == "x.txt"


def test_masked_arrays_keep_their_hard_mask_and_fill_value_without_pickle():
    m = np.ma.masked_array([1.5, 2.0, 3.0], mask=[0, 1, 0], fill_value=-1.0)
    m.harden_mask()
    assert pickle.loads(pickle.dumps(m)).hardmask is False  # pickle loses it
    blob = freight.dumps(m)
    assert not freight.inspect(blob)["needs_pickle"]
    back = freight.loads(blob, allow_pickle=False)
    assert type(back) is np.ma.MaskedArray and back.hardmask
    np.testing.assert_array_equal(back.mask, [False, True, False])
    assert back.fill_value == -1.0 and back[0] == 1.5
    soft = np.ma.masked_array(np.arange(6).reshape(2, 3), mask=np.eye(2, 3, dtype=bool))
    back = freight.loads(freight.dumps(soft))
    assert not back.hardmask and back.shape == (2, 3) and back.mask.tolist() == np.eye(2, 3, dtype=bool).tolist()


def test_object_masked_arrays_are_pickled_in_place():
    m = np.ma.masked_array(np.array([{"a": 1}, 2], dtype=object), mask=[1, 0])
    blob = freight.dumps(m)
    assert freight.inspect(blob)["needs_pickle"]
    assert freight.loads(blob).mask.tolist() == [True, False]
    with pytest.raises(freight.UnsafePayloadError):
        freight.loads(blob, allow_pickle=False)


def test_a_forged_mask_is_refused():
    forger = freight.Freight()

    class Box:
        pass

    class Writer:
        safe = True
        tag = "numpy.ma.MaskedArray"
        types = (Box,)

        def serialize(self, box):
            return {"data": np.arange(3), "mask": np.zeros(5, dtype=bool), "fill": None, "hard": False}, []

        def deserialize(self, meta, frames):
            raise AssertionError

    forger.register(Writer(), replace=True)
    with pytest.raises(freight.DeserializationError, match="mask"):
        freight.loads(forger.dumps(Box()), allow_pickle=False)


def test_big_endian_datetimes_keep_their_byte_order():
    a = np.array(["2024-01-01", "1970-01-02"], dtype=">M8[D]")
    back = freight.loads(freight.dumps(a))
    assert back.dtype == a.dtype and back.dtype.byteorder == ">" and (back == a).all()
