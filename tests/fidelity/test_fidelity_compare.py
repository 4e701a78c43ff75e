"""The comparison every fidelity test uses (``support.fidelity``) notices each kind of difference
it claims to check: a comparison that passed anything would make every fidelity test pass."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
import xarray as xr

from support.fidelity import assert_same, pickle_roundtrip

# np.matrix, the ndarray subclass pickle must keep under a mask, warns when created.
pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")


def _differs(expected: Any, got: Any, original: Any = None) -> bool:
    try:
        assert_same(expected, got, original=original)
    except AssertionError:
        return True
    return False


def test_arrays_differing_in_any_part_of_the_dtype_are_told_apart():
    a = np.zeros(3, dtype="<i4")
    assert not _differs(a, a.copy())
    assert _differs(a, a.astype(">i4"))
    assert _differs(a, a.view("V4"))
    assert _differs(a, a.astype(np.dtype("<i4", metadata={"enum": 1})))
    aligned = np.dtype([("a", "i4"), ("b", "i1")], align=True)
    unaligned = np.dtype({"names": ["a", "b"], "formats": ["i4", "i1"], "offsets": [0, 4], "itemsize": 8})
    assert aligned == unaligned and _differs(np.zeros(2, aligned), np.zeros(2, unaligned))
    assert _differs(np.ndarray(3, "S0"), np.zeros(3, "S1"))


def test_array_values_flags_and_layout_are_told_apart():
    a = np.array([math.nan, 0.0])
    assert not _differs(a, a.copy())
    assert _differs(a, np.array([-math.nan, 0.0]))
    assert _differs(a, np.array([math.nan, -0.0]))
    ro = a.copy()
    ro.flags.writeable = False
    assert _differs(a, ro) and not _differs(a, ro, original=ro)
    big = np.arange(3, dtype=">i2")[::-1]
    assert pickle_roundtrip(big).dtype == "<i2" and not _differs(
        pickle_roundtrip(big), np.array([2, 1, 0], ">i2"), original=big
    )
    assert _differs(pickle_roundtrip(big), np.array([2, 1, 0], ">i2"))
    assert _differs(pickle_roundtrip(big), np.array([2, 1, 1], ">i2"), original=big)
    assert _differs(pickle_roundtrip(big), np.array([2, 1, 0], "<u2"), original=big)
    f = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    assert _differs(f, np.ascontiguousarray(f))
    assert _differs(np.matrix([[1]]), np.array([[1]]))
    assert _differs(np.array([{"a": 1}], dtype=object), np.array([{"a": 2}], dtype=object))
    assert _differs([1, "a"], [1, "b"]) and _differs((1,), [1]) and _differs(1, 1.0)


def test_masked_array_parts_are_told_apart():
    m = np.ma.array([1, 2, 3], mask=[0, 1, 0], fill_value=7)
    assert not _differs(m, m.copy())
    assert _differs(m, np.ma.array([1, 2, 3], mask=[0, 0, 0], fill_value=7))
    assert _differs(m, np.ma.array([1, 2, 3], mask=[0, 1, 0], fill_value=8))
    assert _differs(m, np.ma.array([1, 2, 4], mask=[0, 1, 0], fill_value=7))
    shared = m.copy()
    shared._sharedmask = not m._sharedmask
    assert _differs(m, shared)
    hard = m.copy()
    hard.harden_mask()
    assert _differs(m, m.copy(), original=hard)
    assert _differs(np.ma.array(np.matrix([[1]])), np.ma.array(np.array([[1]])))
    s = np.ma.array(np.zeros(1, [("a", "i4"), ("b", "f8")]), mask=[(1, 0)])
    assert _differs(s, np.ma.array(np.zeros(1, [("a", "i4"), ("b", "f8")]), mask=[(0, 1)]))


def test_arrow_types_values_and_extension_classes_are_told_apart():
    a = pa.array([1.0, math.nan, None])
    assert not _differs(a, pa.array([1.0, math.nan, None]))
    assert _differs(a, pa.array([1.0, 0.0, None]))
    assert _differs(a, pa.array([1.0, math.nan, None], pa.float32()))
    assert _differs(pa.table({"a": [1]}), pa.table({"a": [1]}).replace_schema_metadata({"k": "v"}))
    ext = pa.ExtensionArray.from_storage(pa.uuid(), pa.array([b"0" * 16], pa.binary(16)))
    assert _differs(ext, ext.storage)
    assert _differs(pa.chunked_array([ext]), pa.chunked_array([ext.storage]))


def test_sparse_and_xarray_parts_are_told_apart():
    m = sp.csr_matrix(np.eye(3))
    assert not _differs(m, m.copy())
    assert _differs(m, sp.csr_array(np.eye(3)))
    assert _differs(m, sp.csr_matrix(np.eye(3, dtype=np.float32)))
    assert _differs(m, sp.csr_matrix(2 * np.eye(3)))
    wide = m.copy()
    wide.indices = wide.indices.astype(np.int64)
    wide.indptr = wide.indptr.astype(np.int64)
    assert _differs(m, wide)
    ds = xr.Dataset({"a": ("x", [1, 2])})
    assert not _differs(ds, ds.copy())
    assert _differs(ds, ds.assign_attrs(k=1))
