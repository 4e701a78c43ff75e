"""The serializer registry, which serializer runs: dispatch order (user before built-in, exact
type before the MRO), tags (duplicates, replace, unregister, unknown on load), safety
(``allow_pickle=False`` and unsafe serializers) and layers (instances over the global registry).
The shapes a serializer can take: test_registry_shapes.py."""

from __future__ import annotations

import numpy as np
import pytest

import freight
from support.vectors import Vector, VectorSerializer, Wrapper, shares_memory


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


def test_user_serializer_for_int_sees_a_small_root():
    # Scalars and small flat containers at the root are written without the walk: a serializer
    # registered for int must see them there too.
    codec = freight.Freight()
    ser = CountingIntSerializer()
    codec.register(ser)
    for value, calls in [(7, 1), ((1, 2.5), 1), ([1, 2], 2), ({"a": 3, "b": None}, 1)]:
        before = ser.calls
        assert codec.loads(codec.dumps(value)) == value
        assert ser.calls - before == calls, value


class UpperStrSerializer:
    """Stores a str upper-cased (so that a test sees which strings it encoded)."""

    tag = "tests.registry.upper-str"
    types = (str,)

    def __init__(self):
        self.calls = 0

    def serialize(self, obj):
        self.calls += 1
        return obj.upper().encode(), []  # bytes: a str here would be this serializer's again

    def deserialize(self, meta, frames):
        return meta.decode()


def test_user_serializer_for_str_sees_dict_keys_shared_or_not():
    # The walker writes a dict's unshared str keys on a short path of its own: a serializer
    # registered for str must still see every key, whether one reference holds it or several.
    codec = freight.Freight()
    ser = UpperStrSerializer()
    codec.register(ser)
    unshared = {f"key{i}": i for i in range(4)}
    shared = {"alpha": 1, "beta": 2}
    got = codec.loads(codec.dumps([unshared, shared]))
    assert got == [{f"KEY{i}": i for i in range(4)}, {"ALPHA": 1, "BETA": 2}]
    assert ser.calls == 6
    # Without the registration the same keys come back as they were.
    assert freight.loads(freight.dumps([unshared, shared])) == [unshared, shared]


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
    assert len(frames) > 1 and any(shares_memory(f, ser.last_buffer) for f in frames[1:])


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
