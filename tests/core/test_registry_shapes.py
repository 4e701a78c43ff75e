"""The serializer registry, the three shapes a serializer can take: the full protocol (meta and
frames), Scaler's (bytes), ProxyStore's (a predicate); registration by class or instance, and
each serializer running once per object whatever path the payload takes. Dispatch order, tags,
safety and layers: test_registry_dispatch.py."""

from __future__ import annotations

import datetime as dt
import enum
import pickle
import struct
from io import BytesIO
from typing import Any

import numpy as np
import pytest
from cloudpickle import cloudpickle

import freight
from support.vectors import Vector, VectorSerializer, Wrapper, shares_memory

pd = pytest.importorskip("pandas")

try:  # Scaler's base class, as the seed document uses it; a plain class when Scaler is absent.
    from scaler import Serializer
except ImportError:  # pragma: no cover
    Serializer = object

# --------------------------------------------------------------------------------------------
# The seed's Scaler serializer, verbatim
# --------------------------------------------------------------------------------------------


class ObjType(enum.Enum):
    General = b"G"
    Integer = b"I"
    DataFrame = b"D"


class CustomSerializer(Serializer):
    @staticmethod
    def serialize(obj: Any) -> bytes:
        if isinstance(obj, pd.DataFrame):
            buffer = BytesIO()
            obj.to_parquet(buffer)
            return ObjType.DataFrame.value + buffer.getvalue()

        if isinstance(obj, int):
            return ObjType.Integer.value + struct.pack("I", obj)

        return ObjType.General.value + cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def deserialize(payload: bytes) -> Any:
        obj_type = ObjType(payload[0:1])
        payload = payload[1:]

        if obj_type == ObjType.DataFrame:
            buffer = BytesIO(payload)
            return pd.read_parquet(buffer)

        if obj_type == ObjType.Integer:
            return struct.unpack("I", payload)[0]

        return cloudpickle.loads(payload)


# --------------------------------------------------------------------------------------------
# Types and serializers used below
# --------------------------------------------------------------------------------------------


class Celsius:
    def __init__(self, degrees):
        self.degrees = degrees

    def __eq__(self, other):
        return type(other) is Celsius and other.degrees == self.degrees


class ProxyStoreStyleSerializer:
    """ProxyStore's shape: a serializable(obj) predicate and bytes in, bytes out."""

    def __init__(self):
        self.calls = 0

    def serializable(self, obj) -> bool:
        return isinstance(obj, Celsius)

    def serialize(self, obj) -> bytes:
        self.calls += 1
        return struct.pack("<d", obj.degrees)

    def deserialize(self, data: bytes):
        return Celsius(struct.unpack("<d", data)[0])


class SupportedPredicateSerializer:
    """A full-protocol serializer chosen by a supported(obj) predicate."""

    tag = "tests.registry.supported"
    safe = True

    def __init__(self):
        self.calls = 0

    def supported(self, obj) -> bool:
        return isinstance(obj, Celsius) and obj.degrees < 0

    def serialize(self, obj):
        self.calls += 1
        return {"below-zero": obj.degrees}, []

    def deserialize(self, meta, frames):
        return Celsius(meta["below-zero"])


class Blob:
    def __init__(self, data: bytes):
        self.data = data


class RecordingScalerShape:
    """Scaler's shape; records what deserialize receives."""

    def __init__(self):
        self.payload_types: list[type] = []

    def serialize(self, obj) -> bytes:
        return obj.data

    def deserialize(self, payload):
        self.payload_types.append(type(payload))
        return Blob(bytes(payload))


# --------------------------------------------------------------------------------------------
# The three shapes
# --------------------------------------------------------------------------------------------


def test_full_protocol_serializer():
    codec = freight.Freight()
    ser = VectorSerializer()
    codec.register(ser)
    v = Vector([1.0, 2.5, -3.0])
    got = codec.loads(codec.dumps(v))
    assert got == v
    assert ser.encoded == 1 and ser.decoded == 1
    assert ser.metas == [{"n": 3, "kind": "vector"}]
    assert ser.frame_types and all(t is memoryview for t in ser.frame_types)
    got = codec.loads_frames(codec.dumps_frames({"v": v, "other": [1, 2]}))
    assert got == {"v": v, "other": [1, 2]}


def test_serializer_frames_are_zero_copy_in_dumps_frames():
    codec = freight.Freight()
    ser = VectorSerializer()
    codec.register(ser)
    frames = codec.dumps_frames(Vector(range(10_000)))
    assert any(shares_memory(f, ser.last_buffer) for f in frames[1:])
    assert codec.loads_frames(frames) == Vector(range(10_000))


def test_registration_by_class():
    codec = freight.Freight()
    codec.register(VectorSerializer)
    v = Vector([4.0])
    assert codec.loads(codec.dumps(v)) == v
    with pytest.raises(freight.UnknownTagError):
        freight.Freight().loads(codec.dumps(v))


def test_same_registered_object_twice_is_one_object():
    codec = freight.Freight()
    codec.register(VectorSerializer())
    v = Vector([1.0])
    got = codec.loads(codec.dumps([v, {"again": v}, Wrapper("w", v)]))
    assert got[0] is got[1]["again"] is got[2].inner


def test_seed_scaler_serializer_registers_as_is():
    codec = freight.Freight()
    codec.register(CustomSerializer(), types=(pd.DataFrame, int), tag="seed.scaler.custom")
    df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"], "c": [0.5, None, 2.0]})
    pd.testing.assert_frame_equal(codec.loads(codec.dumps(df)), df)
    got = codec.loads(codec.dumps(42))
    assert got == 42 and type(got) is int
    # Both went through the serializer: a codec without it cannot read them.
    for value in (df, 42):
        with pytest.raises(freight.UnknownTagError, match="seed.scaler.custom"):
            freight.Freight().loads(codec.dumps(value))
    # A general object: ints inside it go through the serializer, the rest as usual.
    general = {"name": "g", "items": [1.5, "two", (3,), None], "when": dt.date(2020, 1, 1), "flag": True}
    got = codec.loads(codec.dumps(general))
    assert got == general and type(got["items"][2][0]) is int and got["flag"] is True
    # bool is an int subclass, but exact built-in types win over MRO matches.
    assert codec.loads(codec.dumps(True)) is True
    assert freight.loads(codec.dumps([True, False, 1.0])) == [True, False, 1.0]
    # A registered type inside an object that goes through pickle still uses the serializer.
    wrapped = Wrapper("frame", df, also=7)
    got = codec.loads(codec.dumps(wrapped))
    assert type(got) is Wrapper and got.also == 7
    pd.testing.assert_frame_equal(got.inner, df)
    with pytest.raises(freight.UnknownTagError):
        freight.Freight().loads(codec.dumps(Wrapper("frame", df)))


def test_seed_scaler_serializer_with_a_large_dataframe():
    codec = freight.Freight()
    codec.register(CustomSerializer(), types=(pd.DataFrame, int), tag="seed.scaler.custom")
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.standard_normal(200_000), "y": rng.integers(0, 10**9, 200_000)})
    pd.testing.assert_frame_equal(codec.loads(codec.dumps(df)), df)
    pd.testing.assert_frame_equal(codec.loads_frames(codec.dumps_frames(df)), df)


def test_scaler_shape_deserialize_receives_bytes():
    codec = freight.Freight()
    ser = RecordingScalerShape()
    codec.register(ser, types=(Blob,), tag="tests.registry.blob")
    for size in (10, 300_000):
        data = bytes(range(256)) * (size // 256 + 1)
        got = codec.loads(codec.dumps(Blob(data)))
        assert got.data == data
        got = codec.loads_frames(codec.dumps_frames([Blob(data)]))
        assert got[0].data == data
    assert ser.payload_types and all(t is bytes for t in ser.payload_types)


def test_scaler_shape_error_in_user_code_propagates():
    codec = freight.Freight()
    codec.register(CustomSerializer(), types=(int,), tag="seed.scaler.ints")
    with pytest.raises(Exception) as info:
        codec.dumps(2**40)  # struct.pack("I") cannot hold it
    exc = info.value
    chain = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    assert any(isinstance(e, struct.error) for e in chain), [type(e).__name__ for e in chain]


def test_proxystore_style_predicate_serializer():
    codec = freight.Freight()
    ser = ProxyStoreStyleSerializer()
    codec.register(ser, tag="tests.registry.celsius")
    got = codec.loads(codec.dumps({"t": Celsius(21.5)}))
    assert got == {"t": Celsius(21.5)}
    assert ser.calls == 1
    with pytest.raises(freight.UnknownTagError, match="tests.registry.celsius"):
        freight.Freight().loads(codec.dumps(Celsius(1.0)))
    assert ser.calls == 2
    # Objects the predicate declines go the usual way.
    other = Wrapper("plain", 1.5)
    assert codec.loads(codec.dumps(other)) == other
    assert freight.Freight().loads(codec.dumps(other)) == other
    assert ser.calls == 2


@pytest.mark.parametrize(
    "build",
    [
        lambda v: v,
        lambda v: [v, Wrapper("plain pickle", 1)],
        lambda v: [v, lambda: 1],
        lambda v: [v, Wrapper("pickle fails, cloudpickle retries", lambda: 1)],
        lambda v: Wrapper("inside", v, also=lambda: 2),
    ],
    ids=["native", "pickle", "cloudpickle", "pickle-then-cloudpickle", "inside-cloudpickled-object"],
)
def test_serializer_runs_once_per_object_whatever_path_the_payload_takes(build):
    codec = freight.Freight()
    ser = VectorSerializer()
    codec.register(ser)
    v = Vector([1.0, 2.0])
    blob = codec.dumps(build(v))
    assert ser.encoded == 1
    codec.loads(blob)
    assert ser.decoded == 1


def test_supported_predicate_serializer():
    codec = freight.Freight()
    ser = SupportedPredicateSerializer()
    codec.register(ser)
    got = codec.loads(codec.dumps([Celsius(-5.0), Celsius(5.0)]))
    assert got == [Celsius(-5.0), Celsius(5.0)]
    # Once per object, even though the declined Celsius(5.0) sends the payload through pickle.
    assert ser.calls == 1
    # Only objects its predicate accepts reach it.
    calls = ser.calls
    blob = codec.dumps(Celsius(5.0))
    assert ser.calls == calls
    assert freight.Freight().loads(blob) == Celsius(5.0)
    blob = codec.dumps(Celsius(-5.0))
    assert ser.calls == calls + 1
    with pytest.raises(freight.UnknownTagError):
        freight.Freight().loads(blob)
