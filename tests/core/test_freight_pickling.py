"""Pickling and copying a configured :class:`freight.Freight`: it travels as its options and its
registry layer (the global registry by reference), and the copy encodes and decodes exactly as
the original does."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
import textwrap
import threading

import cloudpickle
import numpy as np
import pytest

import freight
from freight import _api
from freight.registry import GLOBAL
from support import child_env
from support.picklable import Celsius, CelsiusSerializer, sample

KEY = b"k" * 32
OTHER_KEY = b"o" * 32


def pickle_copy(obj):
    return pickle.loads(pickle.dumps(obj))


def cloudpickle_copy(obj):
    return cloudpickle.loads(cloudpickle.dumps(obj))


COPIES = {"pickle": pickle_copy, "cloudpickle": cloudpickle_copy, "copy": copy.copy, "deepcopy": copy.deepcopy}


@pytest.fixture(params=sorted(COPIES))
def duplicate(request):
    return COPIES[request.param]


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


def lambda_payload() -> bytes:
    return freight.dumps(lambda: 1)


def corrupted_array_payload() -> bytes:
    blob = bytearray(freight.dumps(np.arange(100_000.0), checksum=True))
    blob[-10] ^= 1
    return bytes(blob)


def check_allow_pickle(f):
    with pytest.raises(freight.UnsafePayloadError):
        f.loads(lambda_payload())


def check_zero_copy(f):
    assert not f.loads(freight.dumps(np.arange(1000.0))).flags.writeable


def check_verify(f):
    with pytest.raises(freight.IntegrityError):
        f.loads(corrupted_array_payload())


def check_no_verify(f):
    assert f.loads(corrupted_array_payload()).shape == (100_000,)


def check_checksum(f):
    assert freight.inspect(f.dumps(np.arange(1000.0)))["frames"][0]["checksum"] is not None


def check_compression(f):
    assert freight.inspect(f.dumps(np.zeros(100_000)))["frames"][0]["codec"] == "zstd"


def check_key(f):
    assert freight.inspect(f.dumps(1), key=KEY)["signature_ok"] is True
    with pytest.raises(freight.IntegrityError):
        f.loads(freight.dumps(1))


def check_key_rotation(f):
    assert freight.inspect(f.dumps(1), key=KEY)["signature_ok"] is True
    assert f.loads(freight.dumps(1, key=OTHER_KEY)) == 1


def check_max_size(f):
    with pytest.raises(freight.DeserializationError, match="limit"):
        f.loads(freight.dumps(np.arange(10_000.0)))


OPTIONS = [
    ({"allow_pickle": False}, check_allow_pickle),
    ({"zero_copy": True}, check_zero_copy),
    ({"zero_copy": True, "verify": True}, check_verify),
    ({"verify": False}, check_no_verify),
    ({"checksum": True}, check_checksum),
    ({"compression": ("zstd", 3)}, check_compression),
    ({"key": KEY}, check_key),
    ({"key": [KEY, OTHER_KEY]}, check_key_rotation),
    ({"max_size": 1000}, check_max_size),
]


@pytest.mark.parametrize(("options", "check"), OPTIONS, ids=[",".join(o) for o, _ in OPTIONS])
def test_each_option_survives_pickling_and_copying(options, check, duplicate):
    original = freight.Freight(**options)
    check(original)
    clone = duplicate(original)
    assert type(clone) is freight.Freight and clone is not original
    check(clone)
    value = sample()
    assert clone.dumps(value) == original.dumps(value)


def test_the_copy_writes_the_same_bytes_and_reads_the_originals_payloads(duplicate):
    original = freight.Freight(compression="lz4", key=KEY, checksum=False)
    original.register(CelsiusSerializer())
    clone = duplicate(original)
    value = {**sample(), "temperature": Celsius(21.5)}
    blob = original.dumps(value)
    assert clone.dumps(value) == blob
    assert original.dumps_frames(value)[0] == clone.dumps_frames(value)[0]
    back = clone.loads(blob)
    assert back["temperature"] == Celsius(21.5) and np.array_equal(back["array"], value["array"])


# --------------------------------------------------------------------------------------------
# Registries
# --------------------------------------------------------------------------------------------


def test_the_global_registry_travels_by_reference():
    f = freight.Freight(registry=GLOBAL)
    assert pickle_copy(f).registry is GLOBAL
    assert pickle_copy(freight.Freight()).registry.parent is GLOBAL
    assert pickle_copy(GLOBAL) is GLOBAL


def test_the_module_level_instance_unpickles_as_the_module_level_instance():
    assert pickle_copy(_api._DEFAULT) is _api._DEFAULT
    assert cloudpickle_copy(_api._DEFAULT) is _api._DEFAULT


def test_registrations_on_the_instance_layer_travel_with_it(duplicate):
    original = freight.Freight()
    original.register(CelsiusSerializer())
    clone = duplicate(original)
    blob = clone.dumps(Celsius(3.0))
    assert "test.pickling.celsius" in freight.inspect(blob)["tags"]
    assert not freight.inspect(blob)["needs_pickle"]
    assert clone.loads(blob) == Celsius(3.0)
    # Only on the layer: the global registry did not get it.
    with pytest.raises(freight.UnknownTagError):
        freight.loads(blob)


def test_pickled_and_deep_copied_layers_are_independent_of_the_original():
    original = freight.Freight()
    original.register(CelsiusSerializer())
    for clone in (pickle_copy(original), copy.deepcopy(original)):
        assert clone.registry is not original.registry
        clone.unregister("test.pickling.celsius")
        assert "test.pickling.celsius" in freight.inspect(original.dumps(Celsius(1.0)))["tags"]
        assert freight.inspect(clone.dumps(Celsius(1.0)))["needs_pickle"]


def test_a_shallow_copy_shares_the_registry_layer():
    original = freight.Freight(allow_pickle=False)
    clone = copy.copy(original)
    assert clone.registry is original.registry
    clone.register(CelsiusSerializer())
    assert original.loads(clone.dumps(Celsius(2.0))) == Celsius(2.0)


def test_replacements_predicates_and_shared_types_come_back_in_the_same_state():
    original = freight.Freight()
    original.register(PredicateSerializer())
    original.register(PredicateSerializer(), tag="test.pickling.strings-2")
    original.register(CelsiusSerializer(), tag="first", safe=False)
    original.register(CelsiusSerializer(), tag="first", safe=True, replace=True)
    original.register(CelsiusSerializer())  # also Celsius: registered last, it wins
    clone = pickle_copy(original)
    for f in (original, clone):
        assert f.registry.by_tag("first").safe is True
        assert f.registry.types_view()[Celsius].tag == "test.pickling.celsius"
        assert [e.tag for e in f.registry.predicates_view()] == ["test.pickling.strings", "test.pickling.strings-2"]
        blob = f.dumps([Tagged("x"), Celsius(0.5)])
        assert freight.inspect(blob)["tags"] == ["test.pickling.strings", "test.pickling.celsius"]


class Tagged(str):
    pass


class PredicateSerializer:
    tag = "test.pickling.strings"

    def supported(self, obj):
        return type(obj) is Tagged

    def serialize(self, obj):
        return str(obj), []

    def deserialize(self, meta, frames):
        return Tagged(meta)


def test_a_layer_over_another_layer_pickles_with_both():
    base = freight.Freight()
    base.register(CelsiusSerializer())
    top = freight.Freight(registry=freight.Registry(parent=base.registry))
    top.register(PredicateSerializer())
    clone = pickle_copy(top)
    assert clone.registry.parent is not base.registry and clone.registry.parent.parent is GLOBAL
    blob = clone.dumps([Celsius(1.0), Tagged("y")])
    assert set(freight.inspect(blob)["tags"]) == {"test.pickling.celsius", "test.pickling.strings"}
    assert clone.loads(blob) == [Celsius(1.0), Tagged("y")]


# --------------------------------------------------------------------------------------------
# What cannot be pickled
# --------------------------------------------------------------------------------------------


def test_a_serializer_that_cannot_be_pickled_is_a_clear_serialization_error():
    class LocalSerializer:  # local: pickle cannot find it by reference
        tag = "test.pickling.local"
        types = (Celsius,)

        def serialize(self, obj):
            return obj.degrees, []

        def deserialize(self, meta, frames):
            return Celsius(meta)

    f = freight.Freight()
    f.register(LocalSerializer())
    for dumps in (pickle.dumps, cloudpickle.dumps):
        with pytest.raises(freight.SerializationError) as info:
            dumps(f)
        message = str(info.value)
        assert "'test.pickling.local'" in message and "LocalSerializer" in message
        assert "freight.register()" in message and "module" in message
    # Copying in memory needs no pickling: deepcopy copies the serializer object.
    clone = copy.deepcopy(f)
    assert clone.loads(clone.dumps(Celsius(4.0))) == Celsius(4.0)


def test_a_serializer_holding_an_unpicklable_resource_is_a_clear_serialization_error():
    serializer = CelsiusSerializer()
    serializer.lock = threading.Lock()
    f = freight.Freight()
    f.register(serializer)
    with pytest.raises(freight.SerializationError, match="cannot be pickled .*lock"):
        pickle.dumps(f)
    with pytest.raises(freight.SerializationError, match="cannot deep-copy"):
        copy.deepcopy(f)
    assert copy.copy(f).registry is f.registry


# --------------------------------------------------------------------------------------------
# In another process
# --------------------------------------------------------------------------------------------


def test_an_unpickled_instance_in_another_process_writes_the_same_bytes(tmp_path):
    f = freight.Freight(compression="zstd", key=KEY)
    f.register(CelsiusSerializer())
    (tmp_path / "codec.pkl").write_bytes(pickle.dumps(f))
    code = textwrap.dedent(
        f"""
        import pickle
        f = pickle.loads(open({str(tmp_path / "codec.pkl")!r}, "rb").read())
        from support.picklable import Celsius, sample
        value = {{**sample(), "t": Celsius(5.0)}}
        open({str(tmp_path / "out.frt")!r}, "wb").write(f.dumps(value))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=child_env())
    assert proc.returncode == 0, proc.stderr
    value = {**sample(), "t": Celsius(5.0)}
    assert (tmp_path / "out.frt").read_bytes() == f.dumps(value)
