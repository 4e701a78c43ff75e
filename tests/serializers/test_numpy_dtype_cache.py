"""The decoder caches dtypes by the bytes of their wire node (issue 34): a structured dtype comes
back exactly (names, formats, offsets, itemsize, alignment, titles) on every load, not only the
first; dtypes whose nodes differ never share an entry; a dtype renamed in place by user code is
not handed out again; and what the decoder refuses stays refused."""

from __future__ import annotations

import numpy as np
import pytest

import freight
from freight._freight import _envelope

DTYPES = {
    "packed": np.dtype([("id", "<i8"), ("x", "<f4"), ("flag", "?"), ("code", "S7")]),
    "aligned": np.dtype({"names": ["a", "b", "c"], "formats": ["u1", "<f8", "<i2"]}, align=True),
    "offsets": np.dtype({"names": ["a", "b"], "formats": ["<i2", "<i4"], "offsets": [8, 0], "itemsize": 24}),
    "titles": np.dtype({"names": ["a", "b"], "formats": ["<i4", "<f8"], "titles": ["Alpha", None]}),
    "nested": np.dtype([("pt", [("x", "<f4"), ("y", "<f4")]), ("n", "<i2", (3,)), ("name", "<U4")]),
    "big-endian": np.dtype([("a", ">i4"), ("b", ">f8")]),
}


def _same_dtype(a: np.dtype, b: np.dtype) -> bool:
    return (
        a == b
        and a.names == b.names
        and a.fields == b.fields
        and a.itemsize == b.itemsize
        and a.isalignedstruct == b.isalignedstruct
    )


@pytest.mark.parametrize("name", sorted(DTYPES))
@pytest.mark.parametrize("frames", [False, True])
def test_structured_dtypes_come_back_exactly_on_every_load(name, frames):
    arr = np.zeros(5, dtype=DTYPES[name])
    payload = freight.dumps_frames(arr) if frames else freight.dumps(arr)
    loads = (lambda p: freight.loads_frames(p, zero_copy=True)) if frames else freight.loads
    for _ in range(3):  # the first load fills the cache, the others read it
        back = loads(payload)
        assert _same_dtype(back.dtype, arr.dtype)
        assert back.tobytes() == arr.tobytes()


def test_dtypes_that_compare_equal_but_differ_in_layout_keep_their_own_layout():
    packed = np.dtype({"names": ["a", "b"], "formats": ["u1", "<i4"]})
    aligned = np.dtype({"names": ["a", "b"], "formats": ["u1", "<i4"]}, align=True)
    padded = np.dtype({"names": ["a", "b"], "formats": ["u1", "<i4"], "offsets": [0, 4], "itemsize": 8})
    for _ in range(2):
        for dtype in (packed, aligned, padded, packed):
            back = freight.loads(freight.dumps(np.zeros(3, dtype=dtype)))
            assert _same_dtype(back.dtype, dtype)


def test_a_dtype_renamed_in_place_is_not_handed_out_again():
    arr = np.zeros(4, dtype=DTYPES["packed"])
    payload = freight.dumps(arr)
    first = freight.loads(payload)
    first.dtype.names = ("A", "B", "C", "D")  # numpy renames a structured dtype in place
    assert first.dtype.names == ("A", "B", "C", "D")
    second = freight.loads(payload)
    assert second.dtype.names == ("id", "x", "flag", "code")
    assert _same_dtype(second.dtype, arr.dtype)


def test_arrays_sharing_a_structured_dtype_in_one_payload():
    dtype = DTYPES["titles"]
    value = {"a": np.zeros(2, dtype=dtype), "b": [np.ones(3, dtype=dtype)], "c": np.zeros(1, dtype=dtype)}
    for _ in range(2):
        back = freight.loads(freight.dumps(value))
        for got in (back["a"], back["b"][0], back["c"]):
            assert _same_dtype(got.dtype, dtype)


def _uv(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _str(text: str) -> bytes:
    data = text.encode()
    return b"\x07" + _uv(len(data)) + data


def test_an_object_dtype_is_refused_on_every_load():
    # {"names": ["o"], "formats": ["|O"], "offsets": [0], "itemsize": 8, "aligned": False}
    wire = (
        b"\x12"
        + _uv(5)
        + _str("names")
        + b"\x10\x01"
        + _str("o")
        + _str("formats")
        + b"\x10\x01"
        + _str("|O")
        + _str("offsets")
        + b"\x10\x01\x03\x00"
        + _str("itemsize")
        + b"\x03\x10"
        + _str("aligned")
        + b"\x01"
    )
    tree = b"\x30" + wire + bytes([2]) + _uv(1) + _uv(1) + _uv(0)
    for _ in range(2):
        with pytest.raises(freight.DeserializationError, match="object dtype"):
            freight.loads(_envelope(tree, frames=[bytes(8)]))
