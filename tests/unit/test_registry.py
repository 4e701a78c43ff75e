"""The serializer registry: the three serializer shapes, dispatch order, layering, safety."""

from __future__ import annotations

import dataclasses
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


class Vector:
    def __init__(self, values):
        self.values = list(values)

    def __eq__(self, other):
        return type(other) is Vector and other.values == self.values

    def __repr__(self):
        return f"Vector({self.values})"


class VectorSerializer:
    """The full protocol: (meta, frames) out, deserialize(meta, frames) back."""

    tag = "tests.registry.vector"
    types = (Vector,)
    safe = True

    def __init__(self):
        self.encoded = 0
        self.decoded = 0
        self.frame_types: list[type] = []
        self.metas: list = []
        self.last_buffer = None

    def serialize(self, obj):
        self.encoded += 1
        data = np.asarray(obj.values, dtype=np.float64)
        self.last_buffer = data
        return {"n": len(obj.values), "kind": "vector"}, [data]

    def deserialize(self, meta, frames):
        self.decoded += 1
        self.metas.append(meta)
        self.frame_types.extend(type(f) for f in frames)
        values = np.frombuffer(frames[0], dtype=np.float64)
        assert values.size == meta["n"]
        return Vector(values.tolist())


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


class CountingIntSerializer:
    tag = "tests.registry.int"
    types = (int,)

    def __init__(self):
        self.calls = 0

    def serialize(self, obj):
        self.calls += 1
        return str(obj), []

    def deserialize(self, meta, frames):
        return int(meta)


class Base:
    pass


class Derived(Base):
    pass


class Unrelated:
    pass


_CLASSES = {"Base": Base, "Derived": Derived}


class NamedSerializer:
    """Writes the class name; counts calls so that tests can see which serializer ran."""

    def __init__(self, tag, types):
        self.tag = tag
        self.types = types
        self.calls = 0

    def serialize(self, obj):
        self.calls += 1
        return type(obj).__name__, []

    def deserialize(self, meta, frames):
        return _CLASSES[meta]()


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


@dataclasses.dataclass
class Wrapper:
    name: str
    inner: Any
    also: Any = None


def _shares(frame, arr) -> bool:
    try:
        view = np.frombuffer(frame, dtype=np.uint8)
    except (ValueError, TypeError, BufferError):
        view = np.asarray(memoryview(frame))
    return view.size > 0 and np.shares_memory(view, arr)


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
    assert any(_shares(f, ser.last_buffer) for f in frames[1:])
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


# --------------------------------------------------------------------------------------------
# Dispatch order
# --------------------------------------------------------------------------------------------


def test_user_serializer_takes_precedence_over_builtin_int():
    codec = freight.Freight()
    ser = CountingIntSerializer()
    codec.register(ser)
    got = codec.loads(codec.dumps([1, 2, True, False, 3.5]))
    assert got == [1, 2, True, False, 3.5]
    assert [type(x) for x in got] == [int, int, bool, bool, float]
    assert ser.calls == 2
    # The module-level functions are untouched.
    assert freight.loads(freight.dumps([1, 2])) == [1, 2]
    assert ser.calls == 2


def test_user_serializer_takes_precedence_over_builtin_ndarray():
    codec = freight.Freight()
    ser = NamedSerializer("tests.registry.ndarray", (np.ndarray,))
    ser.deserialize = lambda meta, frames: np.zeros(2)  # type: ignore[method-assign]
    codec.register(ser)
    got = codec.loads(codec.dumps({"a": np.arange(5)}))
    assert ser.calls == 1
    assert np.array_equal(got["a"], np.zeros(2))


def test_mro_dispatch_and_exact_type_wins():
    codec = freight.Freight()
    base_ser = NamedSerializer("tests.registry.base", (Base,))
    codec.register(base_ser)
    got = codec.loads(codec.dumps([Base(), Derived()]))
    assert [type(x) for x in got] == [Base, Derived]
    assert base_ser.calls == 2  # Derived found through its MRO
    derived_ser = NamedSerializer("tests.registry.derived", (Derived,))
    codec.register(derived_ser)
    got = codec.loads(codec.dumps([Base(), Derived()]))
    assert [type(x) for x in got] == [Base, Derived]
    assert base_ser.calls == 3 and derived_ser.calls == 1
    # Unrelated types are not caught.
    assert type(codec.loads(codec.dumps(Unrelated()))) is Unrelated
    assert base_ser.calls == 3 and derived_ser.calls == 1


# --------------------------------------------------------------------------------------------
# Tags: duplicates, replace, unregister, unknown
# --------------------------------------------------------------------------------------------


def test_duplicate_tag_is_an_error_unless_replace():
    codec = freight.Freight()
    first = NamedSerializer("tests.registry.dup", (Base,))
    second = NamedSerializer("tests.registry.dup", (Base,))
    codec.register(first)
    with pytest.raises(freight.SerializationError) as info:
        codec.register(second)
    assert "tests.registry.dup" in str(info.value)
    assert "replace" in str(info.value)
    codec.dumps(Base())
    assert (first.calls, second.calls) == (1, 0)
    codec.register(second, replace=True)
    assert type(codec.loads(codec.dumps(Base()))) is Base
    assert (first.calls, second.calls) == (1, 1)


def test_replace_drops_the_old_serializers_types():
    codec = freight.Freight()
    codec.register(NamedSerializer("tests.registry.swap", (Base,)))
    replacement = NamedSerializer("tests.registry.swap", (Derived,))
    codec.register(replacement, replace=True)
    got = codec.loads(codec.dumps(Base()))  # no longer registered: goes through pickle
    assert type(got) is Base
    assert freight.Freight().loads(codec.dumps(Base())).__class__ is Base
    codec.dumps(Derived())
    assert replacement.calls == 1


def test_unregister():
    codec = freight.Freight()
    ser = VectorSerializer()
    codec.register(ser)
    codec.dumps(Vector([1.0]))
    assert ser.encoded == 1
    codec.unregister(VectorSerializer.tag)
    blob = codec.dumps(Vector([1.0]))
    assert ser.encoded == 1
    assert freight.Freight().loads(blob) == Vector([1.0])
    with pytest.raises(freight.FreightError):
        codec.unregister(VectorSerializer.tag)
    codec.register(VectorSerializer())  # the tag is free again


def test_unknown_tag_on_load_names_the_tag():
    writer = freight.Freight()
    writer.register(VectorSerializer())
    blob = writer.dumps({"v": [Vector([1.0])]})
    for reader in (freight.Freight().loads, freight.loads):
        with pytest.raises(freight.UnknownTagError) as info:
            reader(blob)
        assert VectorSerializer.tag in str(info.value)
        assert isinstance(info.value, freight.DeserializationError)
    frames = writer.dumps_frames(Vector([2.0]))
    with pytest.raises(freight.UnknownTagError):
        freight.loads_frames(frames)


def test_registered_type_inside_a_dataclass_uses_the_serializer():
    codec = freight.Freight()
    ser = VectorSerializer()
    codec.register(ser)
    v = Vector([1.0, 2.0])
    obj = Wrapper("holder", v, also={"again": v})
    got = codec.loads(codec.dumps(obj))
    assert ser.encoded >= 1 and ser.decoded >= 1
    assert type(got) is Wrapper and got.inner == v
    assert got.inner is got.also["again"]
    with pytest.raises(freight.UnknownTagError):
        freight.Freight().loads(codec.dumps(obj))
    frames = codec.dumps_frames(Wrapper("big", Vector(range(10_000))))
    assert len(frames) > 1 and any(_shares(f, ser.last_buffer) for f in frames[1:])


# --------------------------------------------------------------------------------------------
# Safety
# --------------------------------------------------------------------------------------------


def test_unsafe_serializer_is_refused_with_allow_pickle_false():
    codec = freight.Freight()
    codec.register(VectorSerializer(), safe=False)
    blob = codec.dumps(Vector([1.0]))
    with pytest.raises(freight.UnsafePayloadError):
        codec.loads(blob, allow_pickle=False)
    with pytest.raises(freight.UnsafePayloadError):
        codec.loads_frames(codec.dumps_frames(Vector([1.0])), allow_pickle=False)
    assert codec.loads(blob) == Vector([1.0])


def test_unsafe_serializer_declared_by_attribute():
    class UnsafeVectorSerializer(VectorSerializer):
        tag = "tests.registry.unsafe-vector"
        safe = False

    codec = freight.Freight()
    codec.register(UnsafeVectorSerializer())
    with pytest.raises(freight.UnsafePayloadError):
        codec.loads(codec.dumps([Vector([1.0])]), allow_pickle=False)
    strict = freight.Freight(allow_pickle=False)
    strict.register(UnsafeVectorSerializer())
    with pytest.raises(freight.UnsafePayloadError):
        strict.loads(strict.dumps(Vector([1.0])))


def test_safe_serializer_loads_with_allow_pickle_false():
    codec = freight.Freight()
    codec.register(VectorSerializer())
    blob = codec.dumps({"v": Vector([1.0, 2.0])})
    assert codec.loads(blob, allow_pickle=False) == {"v": Vector([1.0, 2.0])}


# --------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------


def test_instance_registrations_do_not_leak():
    first = freight.Freight()
    ser = VectorSerializer()
    first.register(ser)
    v = Vector([1.0])
    blob = first.dumps(v)
    assert ser.encoded == 1
    second = freight.Freight()
    assert second.loads(second.dumps(v)) == v  # through pickle, not the serializer
    assert freight.loads(freight.dumps(v)) == v
    assert ser.encoded == 1
    with pytest.raises(freight.UnknownTagError):
        second.loads(blob)
    with pytest.raises(freight.UnknownTagError):
        freight.loads(blob)
    # The same tag can be registered in another instance without a clash.
    second.register(VectorSerializer())
    assert second.loads(blob) == v


def test_global_registration_is_seen_by_instances_and_can_be_overridden():
    tag = "tests.registry.global-celsius"
    global_ser = NamedSerializer(tag, (Base,))
    before = freight.Freight()
    freight.register(global_ser)
    try:
        after = freight.Freight()
        for codec in (before, after):
            got = codec.loads(codec.dumps(Base()))
            assert type(got) is Base
        assert type(freight.loads(freight.dumps(Base()))) is Base
        assert global_ser.calls == 3
        with pytest.raises(freight.SerializationError):
            freight.register(NamedSerializer(tag, (Base,)))
        local_ser = NamedSerializer("tests.registry.local-base", (Base,))
        after.register(local_ser)
        after.dumps(Base())
        assert local_ser.calls == 1 and global_ser.calls == 3
        before.dumps(Base())
        assert global_ser.calls == 4
    finally:
        freight.unregister(tag)
    blob = freight.dumps(Base())
    assert global_ser.calls == 4
    assert type(freight.Freight().loads(blob)) is Base


def test_malformed_serializers_are_rejected_at_registration():
    codec = freight.Freight()

    class NoTypes:
        tag = "tests.registry.no-types"

        def serialize(self, obj):
            return None, []

        def deserialize(self, meta, frames):
            return None

    class NoDeserialize:
        tag = "tests.registry.no-deserialize"
        types = (Unrelated,)

        def serialize(self, obj):
            return None, []

    with pytest.raises(freight.SerializationError, match="types"):
        codec.register(NoTypes())
    with pytest.raises(freight.SerializationError):
        codec.register(NoDeserialize())
    with pytest.raises(freight.SerializationError):
        codec.register(VectorSerializer(), types=("not a class",))


class _LateRegistered:
    """A module-level class (pickles by reference) that gets a serializer after freight met it."""

    def __init__(self, v=1):
        self.v = v


class _LateSerializer:
    tag = "tests.late"
    types = (_LateRegistered,)
    safe = True

    def serialize(self, obj):
        return obj.v, []

    def deserialize(self, meta, frames):
        return _LateRegistered(meta)


def test_a_type_met_before_its_serializer_was_registered_uses_it_afterwards():
    # The walker remembers types it found no serializer for; a registration must make it look again.
    inside = freight.inspect(freight.dumps([_LateRegistered(), {"k": _LateRegistered()}]))
    assert inside["needs_pickle"] and "tests.late" not in inside["tags"]
    freight.register(_LateSerializer())
    try:
        info = freight.inspect(freight.dumps([_LateRegistered(2), {"k": _LateRegistered(3)}]))
        assert info["tags"] == ["tests.late"] and not info["needs_pickle"]
        back = freight.loads(freight.dumps([_LateRegistered(2)]), allow_pickle=False)
        assert back[0].v == 2
    finally:
        freight.unregister("tests.late")
    assert freight.inspect(freight.dumps([_LateRegistered()]))["needs_pickle"]  # and forgets it again
