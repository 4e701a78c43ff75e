"""TensorFlow through freight's built-in serializers: eager tensors of every dtype (incl.
bfloat16, float8, int4, quantized and string), variables with their attributes, ragged and
sparse tensors, hostile metadata, nesting, lazy loading and the missing library."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

import freight
from freight.serializers import tensorflow as ftf
from support.library_checks import check_lazy_loading, loaded_without_pickle

NAMES = [
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "bool",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "qint8", "quint8", "qint16", "quint16", "qint32",
    "float8_e4m3fn", "float8_e5m2", "int4", "uint4", "string",
]  # fmt: skip
DTYPES = [tf.dtypes.as_dtype(name) for name in NAMES if hasattr(tf.dtypes, name) or name in ("int4", "uint4")]


def sample(dtype: tf.DType, shape: tuple[int, ...]) -> tf.Tensor:
    n = int(np.prod(shape))
    if dtype == tf.string:
        return tf.constant(np.array([bytes([97 + i % 26]) * (i % 4) for i in range(n)], dtype=object).reshape(shape))
    numpy_dtype = np.dtype(dtype.as_numpy_dtype)
    if numpy_dtype.fields:  # quantized types: numpy sees their integer
        values = np.arange(n, dtype=numpy_dtype.fields[dtype.name][0]).reshape(shape)
    elif dtype == tf.bool:
        values = (np.arange(n) % 3 == 0).reshape(shape)
    else:
        values = (np.arange(n) % 7).astype(numpy_dtype).reshape(shape)
    return tf.constant(values, dtype=dtype)


def same(a: tf.Tensor, b: tf.Tensor) -> bool:
    """Same type, dtype, shape and bytes (bit patterns compared for types numpy lacks)."""
    if type(a) is not type(b) or a.dtype != b.dtype or a.shape != b.shape:
        return False
    kind = object if a.dtype == tf.string else None
    x, y = np.asarray(a.numpy(), dtype=kind), np.asarray(b.numpy(), dtype=kind)
    if x.dtype.kind == "V":
        x, y = x.reshape(-1).view(np.uint8), y.reshape(-1).view(np.uint8)
    return x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3, 4)], ids=str)
def test_every_dtype_and_shape_round_trips_without_pickle(dtype, shape):
    t = sample(dtype, shape)
    for back in loaded_without_pickle(t):
        assert same(back, t)
        assert back.device.endswith("CPU:0")


def test_numeric_data_travels_as_a_frame():
    t = tf.range(100_000, dtype=tf.float32)
    info = freight.inspect(freight.dumps(t))
    assert info["tags"] == ["tensorflow.Tensor"]
    assert [f["length"] for f in info["frames"]] == [400_000]
    assert same(freight.loads(freight.dumps(t, compression="lz4"), allow_pickle=False), t)


def test_host_tensors_are_read_without_a_copy():
    t = tf.range(1_000_000, dtype=tf.float32)
    frames = freight.dumps_frames(t)
    address = np.frombuffer(frames[-1], dtype=np.uint8).__array_interface__["data"][0]
    assert address == ftf._host_view(t).__array_interface__["data"][0]  # the tensor's own memory
    assert same(freight.loads_frames(frames, allow_pickle=False), t)


def test_handles_are_refused_with_advice():
    v = tf.Variable(1.0)
    with pytest.raises(freight.SerializationError, match="serialize the value"):
        freight.dumps(v.handle)


@pytest.mark.parametrize("trainable", [True, False])
def test_variables_keep_dtype_shape_trainable_and_name(trainable):
    v = tf.Variable(
        tf.constant([[1.5, 2.0], [3.0, 4.0]], dtype=tf.bfloat16),
        name="layer/kernel",
        trainable=trainable,
        aggregation=tf.VariableAggregation.MEAN,
    )
    back = freight.loads(freight.dumps(v), allow_pickle=False)
    assert isinstance(back, tf.Variable)
    assert (back.dtype, back.shape, back.trainable, back.name) == (v.dtype, v.shape, trainable, "layer/kernel:0")
    assert back.aggregation == tf.VariableAggregation.MEAN
    assert back.synchronization == v.synchronization
    assert same(back.read_value(), v.read_value())
    back.assign_add(tf.ones_like(back))  # a real variable, not a frozen copy
    assert float(back[0, 0]) == 2.5 and float(v[0, 0]) == 1.5


def test_string_variables():
    v = tf.Variable([b"a", b"", b"\x00\xff"], trainable=False)
    back = freight.loads(freight.dumps(v), allow_pickle=False)
    assert back.numpy().tolist() == [b"a", b"", b"\x00\xff"]


RAGGED = {
    "rank1": lambda: tf.ragged.constant([[1, 2], [3], []]),
    "rank2": lambda: tf.ragged.constant([[[1.0, 2.0], [3.0]], [], [[4.0]]]),
    "int32 splits": lambda: tf.RaggedTensor.from_row_splits(tf.constant([1, 2, 3]), tf.constant([0, 1, 3], tf.int32)),
    "inner dense dims": lambda: tf.RaggedTensor.from_row_splits(tf.reshape(tf.range(12.0), [4, 3]), [0, 1, 4]),
    "uniform row length": lambda: tf.RaggedTensor.from_uniform_row_length(
        tf.ragged.constant([[1], [2, 3], [], [4]]), 2
    ),
    "strings": lambda: tf.ragged.constant([[b"x", b"yy"], [b"z"]]),
    "empty": lambda: tf.ragged.constant([], dtype=tf.int64, ragged_rank=1),
}


@pytest.mark.parametrize("make", RAGGED.values(), ids=RAGGED.keys())
def test_ragged_tensors(make):
    r = make()
    back = freight.loads(freight.dumps(r), allow_pickle=False)
    assert isinstance(back, tf.RaggedTensor)
    assert back.shape.as_list() == r.shape.as_list()
    assert back.ragged_rank == r.ragged_rank and back.row_splits.dtype == r.row_splits.dtype
    assert back.to_list() == r.to_list()
    for mine, theirs in zip(back.nested_row_splits, r.nested_row_splits):
        assert np.array_equal(mine.numpy(), theirs.numpy())


def test_ragged_splits_that_do_not_fit_the_values_are_refused():
    meta, _ = ftf.RaggedTensorSerializer().serialize(tf.ragged.constant([[1, 2], [3]]))
    meta["levels"][0]["splits"] = np.array([0, 2, 9], dtype=np.int64)
    with pytest.raises(freight.DeserializationError, match="RaggedTensor"):
        ftf.RaggedTensorSerializer().deserialize(meta, [])


@pytest.mark.parametrize(
    "make",
    [
        lambda: tf.sparse.SparseTensor([[0, 1], [2, 3]], [1.0, 2.0], [3, 4]),
        lambda: tf.sparse.SparseTensor(tf.zeros([0, 3], tf.int64), tf.zeros([0], tf.int32), [2, 2, 2]),
        lambda: tf.sparse.SparseTensor([[1], [4]], [b"a", b"b"], [5]),
    ],
    ids=["float", "empty 3-d", "strings"],
)
def test_sparse_tensors(make):
    s = make()
    back = freight.loads(freight.dumps(s), allow_pickle=False)
    assert isinstance(back, tf.SparseTensor)
    assert np.array_equal(back.indices.numpy(), s.indices.numpy())
    assert back.values.numpy().tolist() == s.values.numpy().tolist() and back.values.dtype == s.values.dtype
    assert back.dense_shape.numpy().tolist() == s.dense_shape.numpy().tolist()


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda m: m.update(indices=np.array([[0, 1], [2, 4]], dtype=np.int64)), "outside its shape"),
        (lambda m: m.update(indices=np.array([[0, -1], [2, 3]], dtype=np.int64)), "outside its shape"),
        (lambda m: m.update(indices=np.array([[0, 1]], dtype=np.int64)), "one value per index"),
        (lambda m: m.update(indices=np.array([0, 1], dtype=np.int64)), "int64 of shape"),
        (lambda m: m.update(indices=np.array([[0, 1], [2, 3]], dtype=np.float64)), "int64 of shape"),
    ],
)
def test_sparse_indices_are_checked_on_load(change, message):
    meta, _ = ftf.SparseTensorSerializer().serialize(tf.sparse.SparseTensor([[0, 1], [2, 3]], [1.0, 2.0], [3, 4]))
    change(meta)
    with pytest.raises(freight.DeserializationError, match=message):
        ftf.SparseTensorSerializer().deserialize(meta, [])


def test_malformed_tensor_metadata_is_a_deserialization_error():
    meta, _ = ftf.TensorSerializer().serialize(tf.constant([1.0], dtype=tf.bfloat16))
    for bad in (dict(meta, dtype="no-such-type"), dict(meta, data=np.zeros(1, np.int8)), dict(meta, dtype="resource")):
        with pytest.raises(freight.DeserializationError):
            ftf.TensorSerializer().deserialize(bad, [])


def test_a_payload_from_a_gpu_loads_on_this_machine_by_soft_placement():
    meta, _ = ftf.TensorSerializer().serialize(tf.constant([1.0, 2.0]))
    meta["device"] = "/job:localhost/replica:0/task:0/device:GPU:7"
    back = ftf.TensorSerializer().deserialize(meta, [])
    assert back.numpy().tolist() == [1.0, 2.0] and back.device.endswith(("CPU:0", "GPU:0"))


@dataclasses.dataclass
class Batch:
    features: tf.Tensor
    labels: tf.RaggedTensor
    weights: tf.Variable


def test_nested_in_dicts_and_dataclasses():
    features = tf.reshape(tf.range(6.0), [2, 3])
    batch = Batch(features, tf.ragged.constant([[1], [2, 3]]), tf.Variable([0.5, 0.25], name="w"))
    payload = {"batch": batch, "again": features, "list": [features, {"sparse": tf.sparse.eye(3)}]}
    blob = freight.dumps(payload)
    tags = set(freight.inspect(blob)["tags"])
    assert {"tensorflow.Tensor", "tensorflow.RaggedTensor", "tensorflow.Variable", "tensorflow.SparseTensor"} <= tags
    back = freight.loads(blob)
    assert type(back["batch"]) is Batch
    assert back["again"] is back["batch"].features is back["list"][0]  # one tensor, shared
    assert same(back["again"], features)
    assert back["batch"].labels.to_list() == [[1], [2, 3]]
    assert back["batch"].weights.numpy().tolist() == [0.5, 0.25]
    assert tf.sparse.to_dense(back["list"][1]["sparse"]).numpy().tolist() == np.eye(3).tolist()
    # Without the dataclass, nothing needs pickle.
    plain = freight.loads(freight.dumps({"x": features, "w": batch.weights}), allow_pickle=False)
    assert same(plain["x"], features)


def test_lazy_loading_and_the_missing_library_error(tmp_path):
    shown = check_lazy_loading(tmp_path, {"t": tf.ones([3])}, "tensorflow", "tensorflow", 'float(x["t"].numpy().sum())')
    assert shown.splitlines()[-1] == "3.0"
