"""Errors as a user of pickle expects them (found by running cloudpickle's own test suite and
tricky objects through freight): the object's own exceptions pass through; with a key, any
change to a signed payload is an integrity error; option errors are freight errors."""

from __future__ import annotations

import pytest

import freight
from freight.exceptions import DeserializationError, IntegrityError, SerializationError

KEY = b"k" * 32


class RaisesInReduce:
    def __reduce__(self):
        raise ValueError("the object refuses")


class Unpicklable:
    def __reduce__(self):
        raise TypeError("cannot pickle 'Unpicklable' object")


def test_an_exception_from_the_objects_own_code_propagates_as_itself():
    with pytest.raises(ValueError, match="the object refuses") as info:
        freight.dumps(RaisesInReduce())
    assert any("freight pickled" in note for note in info.value.__notes__)
    with pytest.raises(ValueError, match="the object refuses"):
        freight.dumps({"nested": [RaisesInReduce()]})


def test_what_pickle_cannot_pickle_is_a_serialization_error():
    with pytest.raises(SerializationError) as info:
        freight.dumps(Unpicklable())
    assert isinstance(info.value.__cause__, TypeError)


@pytest.mark.parametrize("offset", [0, 1, 3, 4, 5, 6, -1, -40])
def test_with_a_key_any_change_of_a_signed_payload_is_an_integrity_error(offset):
    blob = bytearray(freight.dumps({"a": [1, 2, 3]}, key=KEY))
    blob[offset] ^= 0x41
    with pytest.raises(IntegrityError):
        freight.loads(bytes(blob), key=KEY)


def test_without_a_key_a_changed_magic_is_not_a_freight_payload():
    blob = bytearray(freight.dumps([1]))
    blob[0] ^= 1
    with pytest.raises(DeserializationError, match="magic"):
        freight.loads(bytes(blob))


@pytest.mark.parametrize("value", [-1, -(2**70), 2**64])
def test_max_size_out_of_range_is_a_freight_error(value):
    with pytest.raises(freight.OptionError, match="max_size"):
        freight.loads(freight.dumps(1), max_size=value)
    with pytest.raises(freight.OptionError, match="max_size"):
        freight.Freight(max_size=value)
    assert freight.loads(freight.dumps(1), max_size=0) == 1
