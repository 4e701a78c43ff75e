"""TensorFlow eager values: ``tf.Tensor``, ``tf.Variable`` (dtype, shape, trainable, name,
synchronization, aggregation), ``tf.RaggedTensor`` (any ragged rank, uniform row lengths kept)
and ``tf.SparseTensor``, all through their numpy views: numeric data is a numpy array in the
metadata, which freight sends as a frame (no pickle, safe to load). dtypes numpy has no native
form for (bfloat16, the float8 types, int4, uint4 from ml_dtypes) travel as their raw bits;
string tensors as lists of bytes.

A tensor on a GPU is brought to the host and put back on its device when it loads in a process
that has that device; otherwise TensorFlow places it as it places any new tensor (on the CPU),
which is TensorFlow's own soft placement. Imported the first time a TensorFlow value is
serialized or a ``tensorflow.*`` payload is loaded
(``freight.registry`` registers its ``SERIALIZERS``).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import tensorflow as tf

from freight.exceptions import DeserializationError, SerializationError
from freight.serializers import LibrarySerializer

# Unsigned integers of each size, to carry the bits of dtypes numpy has no native form for.
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
# DType names TensorFlow can turn into a numpy array; the wire names only these.
_REFUSED = {"resource", "variant"}

# The concrete classes of eager tensors and variables (not public names in TensorFlow).
_EagerTensor = type(tf.constant(0))
_ResourceVariable = type(tf.Variable(0))


def _array_meta(t: tf.Tensor) -> dict[str, Any]:
    """A tensor's value as metadata: its dtype name, device and a numpy array (or bytes)."""
    dtype = t.dtype
    if dtype.name in _REFUSED:
        raise SerializationError(
            f"a TensorFlow tensor of dtype {dtype.name} holds a handle, not data; serialize the "
            "value it refers to instead"
        )
    a = _host_view(t)
    if a is None:
        # A 0-d tensor's numpy() is a numpy scalar (or bytes): made a 0-d array.
        a = np.asarray(t.numpy(), dtype=object if dtype == tf.string else None)
    meta: dict[str, Any] = {"dtype": dtype.name, "device": t.device}
    if dtype == tf.string:
        meta.update(shape=tuple(a.shape), strings=a.ravel().tolist())
    elif a.dtype.kind == "V":  # ml_dtypes (bfloat16, float8, int4): their bits
        meta.update(data=a.view(_BITS[a.dtype.itemsize]), bits=True)
    else:
        meta["data"] = a
    return meta


class _DLPack:
    """Hands numpy a DLPack capsule of a tensor in host memory (numpy asks for an object with
    ``__dlpack__``, TensorFlow gives the capsule itself)."""

    def __init__(self, capsule: Any):
        self.capsule = capsule

    def __dlpack__(self, stream: Any = None, **_: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU: only host tensors come here


# dtypes numpy reads through DLPack (bfloat16 and the ml_dtypes types go through numpy()).
_DLPACK_KINDS = frozenset("biufc")


def _host_view(t: tf.Tensor) -> np.ndarray | None:
    """A read-only numpy view of a host tensor's memory, without the copy ``numpy()`` makes
    (a full pass over the tensor's bytes); None where that does not apply (other devices, other
    dtypes)."""
    if (
        "/device:CPU:" not in t.device
        or t.dtype == tf.string
        or np.dtype(t.dtype.as_numpy_dtype).kind not in _DLPACK_KINDS
    ):
        return None
    try:
        view = np.from_dlpack(_DLPack(tf.experimental.dlpack.to_dlpack(t)))
    except (AttributeError, BufferError, TypeError, ValueError, RuntimeError, tf.errors.OpError):
        return None
    view.flags.writeable = False  # TensorFlow's memory: freight only reads it
    return view


def _placed(device: str) -> contextlib.AbstractContextManager[Any]:
    """The device scope a value goes back to: its own when this process has it."""
    if "/device:CPU:" in device or not device:
        return contextlib.nullcontext()
    kind_index = device.rsplit("/device:", 1)[-1]
    if any(d.name.endswith(kind_index) for d in tf.config.list_logical_devices()):
        return tf.device(device)
    return contextlib.nullcontext()  # soft placement: TensorFlow's default device


def _array_from(meta: dict[str, Any]) -> tf.Tensor:
    dtype = tf.dtypes.as_dtype(meta["dtype"])
    if dtype.name in _REFUSED:
        raise DeserializationError(f"the payload holds a TensorFlow tensor of dtype {dtype.name}")
    if dtype == tf.string:
        value: Any = np.array(meta["strings"], dtype=object).reshape(meta["shape"])
    else:
        value = meta["data"]
        if not isinstance(value, np.ndarray):
            raise DeserializationError(f"tensor data must be an array, not {type(value).__name__}")
        target = np.dtype(dtype.as_numpy_dtype)
        if meta.get("bits"):
            if target.kind != "V" or target.fields or value.dtype != _BITS.get(target.itemsize):
                raise DeserializationError(f"a {dtype.name} tensor does not travel as raw bits")
            value = value.view(target)
        elif dtype == tf.bool:
            # Only bytes 0 and 1 are booleans: TensorFlow takes any other byte as it is, and such
            # a tensor prints True but compares unequal to True.
            value = value.view(np.uint8) != 0 if value.dtype.itemsize == 1 else value.astype(bool)
    with _placed(meta["device"]):
        return tf.convert_to_tensor(value, dtype=dtype)


class _TensorFlowSerializer(LibrarySerializer):
    errors = LibrarySerializer.errors + (tf.errors.OpError,)


class TensorSerializer(_TensorFlowSerializer):
    tag = "tensorflow.Tensor"
    types = (_EagerTensor,)

    def serialize(self, t: tf.Tensor) -> tuple[Any, list[Any]]:
        return _array_meta(t), []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        return _array_from(meta)


class VariableSerializer(_TensorFlowSerializer):
    tag = "tensorflow.Variable"
    types = (_ResourceVariable,)

    def serialize(self, v: tf.Variable) -> tuple[Any, list[Any]]:
        name = v.name[:-2] if v.name.endswith(":0") else v.name  # TensorFlow appends ":0" again
        return {
            "value": _array_meta(v.read_value()) | {"device": v.device},
            "name": name,
            "trainable": bool(v.trainable),
            "synchronization": int(v.synchronization.value),
            "aggregation": int(v.aggregation.value),
        }, []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        value = _array_from(meta["value"])
        with _placed(meta["value"]["device"]):
            return tf.Variable(
                value,
                name=meta["name"],
                trainable=bool(meta["trainable"]),
                synchronization=tf.VariableSynchronization(meta["synchronization"]),
                aggregation=tf.VariableAggregation(meta["aggregation"]),
            )


class RaggedTensorSerializer(_TensorFlowSerializer):
    """Each ragged dimension, outermost first, as its row splits and, for a uniform dimension,
    its row length; the flat values as a tensor. Rebuilt with validation, so splits that do not
    describe the values raise instead of building a tensor TensorFlow would misread."""

    tag = "tensorflow.RaggedTensor"
    types = (tf.RaggedTensor,)

    def serialize(self, r: tf.RaggedTensor) -> tuple[Any, list[Any]]:
        levels = []
        for partition in r._nested_row_partitions:
            uniform = partition.uniform_row_length()
            levels.append(
                {
                    "splits": partition.row_splits().numpy(),
                    "uniform": None if uniform is None else int(uniform),
                }
            )
        return {"values": _array_meta(r.flat_values), "levels": levels}, []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        if not meta["levels"]:
            raise DeserializationError("a RaggedTensor has at least one ragged dimension")
        out: Any = _array_from(meta["values"])
        for level in reversed(meta["levels"]):
            splits = tf.convert_to_tensor(np.asarray(level["splits"]))
            if level["uniform"] is None:
                out = tf.RaggedTensor.from_row_splits(out, splits, validate=True)
            else:
                nrows = int(splits.shape[0]) - 1
                out = tf.RaggedTensor.from_uniform_row_length(
                    out, tf.constant(level["uniform"], dtype=splits.dtype), nrows=nrows, validate=True
                )
        return out


class SparseTensorSerializer(_TensorFlowSerializer):
    """indices, values and dense shape. Indices are checked against the shape on load:
    TensorFlow's constructor does not check them, and out-of-range indices would reach its
    kernels."""

    tag = "tensorflow.SparseTensor"
    types = (tf.SparseTensor,)

    def serialize(self, s: tf.SparseTensor) -> tuple[Any, list[Any]]:
        return {
            "indices": s.indices.numpy(),
            "values": _array_meta(s.values),
            "shape": tuple(int(d) for d in s.dense_shape.numpy()),
        }, []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        indices = np.asarray(meta["indices"])
        shape = tuple(int(d) for d in meta["shape"])
        values = _array_from(meta["values"])
        if indices.dtype != np.int64 or indices.ndim != 2 or indices.shape[1] != len(shape):
            raise DeserializationError(f"sparse tensor indices must be int64 of shape (n, {len(shape)})")
        if indices.shape[0] != values.shape[0] or values.shape.rank != 1:
            raise DeserializationError("a sparse tensor needs one value per index")
        if indices.size and ((indices < 0).any() or (indices >= np.array(shape, dtype=np.int64)).any()):
            raise DeserializationError(f"sparse tensor indices fall outside its shape {shape}")
        return tf.SparseTensor(indices, values, shape)


# What freight.registry registers into its BUILTINS layer when it loads this module.
SERIALIZERS = (TensorSerializer(), VariableSerializer(), RaggedTensorSerializer(), SparseTensorSerializer())
