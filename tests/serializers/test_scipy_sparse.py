"""scipy.sparse through freight's built-in serializer: every format, matrix and array API,
exact round trips, no pickle, lazy loading, and the missing-library error."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

import freight
from support.library_checks import check_lazy_loading

FORMATS = ["csr", "csc", "coo", "bsr", "dia", "lil"]
KINDS = [getattr(sp, f"{fmt}_{api}") for fmt in FORMATS for api in ("matrix", "array")]


def sample(dtype=np.float64, shape=(60, 40), density=0.1):
    base = sp.random(*shape, density=density, format="csr", random_state=1, dtype=np.float64)
    return base.astype(dtype)


def assert_same(got, want):
    assert type(got) is type(want)
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.toarray(), want.toarray())


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.complex128, np.bool_])
def test_every_format_round_trips_without_pickle(kind, dtype):
    original = kind(sample(dtype))
    blob = freight.dumps(original)
    info = freight.inspect(blob)
    assert info["tags"] == ["scipy.sparse"]
    assert not info["needs_pickle"]
    assert_same(freight.loads(blob, allow_pickle=False), original)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_empty_and_one_element_matrices(kind):
    for m in (sp.csr_matrix((0, 0)), sp.csr_matrix((3, 5)), sp.csr_matrix(np.array([[7.0]]))):
        original = kind(m)
        assert_same(freight.loads(freight.dumps(original)), original)


def test_index_dtypes_and_sortedness_are_kept():
    m = sample()
    m64 = sp.csr_matrix((m.data, m.indices.astype(np.int64), m.indptr.astype(np.int64)), shape=m.shape)
    back = freight.loads(freight.dumps(m64))
    assert back.indices.dtype == m64.indices.dtype and back.indptr.dtype == m64.indptr.dtype
    assert back.has_sorted_indices == m64.has_sorted_indices


def test_data_and_indices_travel_as_frames():
    m = sample(shape=(2000, 2000), density=0.05)
    frames = freight.dumps_frames(m)
    sizes = sorted(len(f) for f in frames[1:])
    assert len(frames) == 4  # header + data, indices, indptr
    assert sizes[-1] == m.data.nbytes
    assert_same(freight.loads_frames(frames), m)


@dataclasses.dataclass
class Holder:
    matrix: object
    same: object


def test_sparse_inside_pickled_objects_is_still_encoded_by_freight():
    m = sample()
    back = freight.loads(freight.dumps(Holder(m, m)))
    assert_same(back.matrix, m)
    assert back.same is back.matrix
    info = freight.inspect(freight.dumps(Holder(m, m)))
    assert "scipy.sparse" in info["tags"]


class MyMatrix(sp.csr_matrix):
    pass


def test_subclasses_keep_their_type_through_pickle():
    m = MyMatrix(sample())
    back = freight.loads(freight.dumps(m))
    assert type(back) is MyMatrix
    np.testing.assert_array_equal(back.toarray(), m.toarray())


def test_lazy_loading_and_the_missing_library_error(tmp_path):
    shown = check_lazy_loading(tmp_path, sample(), "scipy", "scipy", "type(x).__name__")
    assert shown == "csr_matrix"
