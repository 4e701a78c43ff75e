"""Hostile metadata for freight's TensorFlow serializer (declared ``safe = True``): forged ragged
splits, sparse indices and tensor bytes must raise DeserializationError at load time, before
TensorFlow's kernels see them."""

from __future__ import annotations

import numpy as np
import pytest

import freight
from support.forging import forge, run_isolated


def test_tensorflow_ragged_payload_without_levels_is_refused_not_a_dense_tensor():

    meta = {"values": {"dtype": "int32", "device": "", "data": np.arange(6, dtype=np.int32)}, "levels": []}
    # Before the fix: a dense tf.Tensor, from a payload that says RaggedTensor.
    with pytest.raises(freight.DeserializationError, match="at least one ragged dimension"):
        freight.loads(forge("tensorflow.RaggedTensor", meta), allow_pickle=False)


def test_tensorflow_bool_tensor_of_non_canonical_bytes_is_normalised_and_as_raw_bits_refused():
    import tensorflow as tf

    raw = np.array([0, 2, 255], np.uint8)
    meta = {"dtype": "bool", "device": "", "data": raw}  # read as raw.view(bool)
    t = freight.loads(forge("tensorflow.Tensor", meta), allow_pickle=False)
    # Before the fix it prints [False, True, True] yet t == True is all False and logical_not is all True.
    assert t.numpy().tolist() == [False, True, True]
    assert tf.logical_not(t).numpy().tolist() == [True, False, False]
    assert (t == True).numpy().tolist() == [False, True, True]  # noqa: E712
    with pytest.raises(freight.DeserializationError, match="does not travel as raw bits"):
        freight.loads(forge("tensorflow.Tensor", dict(meta, bits=True)), allow_pickle=False)


# -- payload-controlled splits and indices handed to TensorFlow --------------------------------
# Each case was crafted by reading the serializer's load path (not only by random mutation) and
# run under glibc's heap checks and AddressSanitizer (see fuzz/loads_mutations.py --asan); a child
# loads every case and prints REFUSED when loading refused them all (support.forging.print_refusals).

TENSORFLOW_CASES = """
import tensorflow as tf


def values(a, dtype="int32"):
    return {"dtype": dtype, "device": "", "data": np.asarray(a, dtype=dtype)}


def ragged(*levels):
    levels = [{"splits": np.asarray(s, dtype=np.int64) if isinstance(s, list) else s, "uniform": u}
              for s, u in levels]
    return "tensorflow.RaggedTensor", {"values": values(np.arange(6)), "levels": levels}


def sparse(indices, shape, vals=None):
    indices = np.asarray(indices, dtype=np.int64)
    return "tensorflow.SparseTensor", {"indices": indices, "shape": shape,
                                       "values": vals or values(np.arange(len(indices)))}


CASES = [(name, tag, meta, ()) for name, (tag, meta) in [
    ("splits-past-the-values", ragged(([0, 2, 60], None))),
    ("splits-short-of-the-values", ragged(([0, 2, 4], None))),
    ("splits-decreasing", ragged(([0, 5, 2, 6], None))),
    ("splits-not-starting-at-0", ragged(([1, 2, 6], None))),
    ("splits-negative", ragged(([0, -2, 6], None))),
    ("splits-float", ragged((np.array([0.0, 2.0, 6.0]), None))),
    ("splits-empty", ragged(([], None))),
    ("splits-2d", ragged((np.array([[0, 2, 6]]), None))),
    ("uniform-row-length-not-tiling", ragged(([0, 2, 4, 6], 5))),
    ("uniform-row-length-negative", ragged(([0, 2, 4, 6], -2))),
    ("uniform-row-length-beyond-int64", ragged(([0, 2, 4, 6], 2**70))),
    ("outer-splits-past-the-inner-rows", ragged(([0, 1, 9], None), ([0, 2, 6], None))),
    ("levels-of-mixed-dtypes", ragged((np.array([0, 1, 2], np.int32), None), ([0, 2, 6], None))),
    ("sparse-index-past-the-shape", sparse([[0, 1], [2, 30]], (4, 4))),
    ("sparse-negative-index", sparse([[0, -1], [2, 3]], (4, 4))),
    ("sparse-negative-shape", sparse(np.zeros((0, 2)), (-4, 4))),
    ("sparse-shape-beyond-int64", sparse(np.zeros((0, 2)), (2**70, 4))),
    ("sparse-index-rank-not-the-shape", sparse([[0, 1, 1]], (4, 4))),
    ("sparse-values-2d", sparse([[0, 1], [2, 3]], (4, 4), values(np.zeros((2, 2))))),
]]
"""


def test_tensorflow_ragged_splits_and_sparse_indices_are_refused_before_kernels_see_them():
    # from_row_splits(validate=True) and freight's own bounds check of SparseTensor indices.
    # Unsorted or repeated sparse indices load (TensorFlow allows unordered SparseTensors; its
    # kernels check the order where they need it and raise InvalidArgumentError).
    run_isolated(TENSORFLOW_CASES, "print_refusals(CASES)\n")
