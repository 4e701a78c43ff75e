"""Errors: one hierarchy, useful messages, the right class for each failure."""

from __future__ import annotations

import io
import pickle
import random
import threading

import numpy as np
import pytest

import freight
import freight.exceptions

PUBLIC_ERRORS = [
    "FreightError",
    "SerializationError",
    "DeserializationError",
    "UnknownTagError",
    "IntegrityError",
    "UnsafePayloadError",
    "FormatVersionError",
    "MissingDependencyError",
]

DESERIALIZATION_ERRORS = [
    "UnknownTagError",
    "IntegrityError",
    "UnsafePayloadError",
    "FormatVersionError",
    "MissingDependencyError",
]


@pytest.mark.parametrize("name", PUBLIC_ERRORS)
def test_every_public_error_is_a_freight_error_and_re_exported(name):
    cls = getattr(freight.exceptions, name)
    assert getattr(freight, name) is cls
    assert issubclass(cls, freight.FreightError)
    assert issubclass(cls, Exception)
    assert name in freight.__all__ and name in freight.exceptions.__all__
    assert cls.__doc__ and cls.__doc__.strip()


@pytest.mark.parametrize("name", DESERIALIZATION_ERRORS)
def test_decoding_errors_are_deserialization_errors(name):
    assert issubclass(getattr(freight, name), freight.DeserializationError)
    assert issubclass(getattr(freight, name), pickle.UnpicklingError)


def test_hierarchy_matches_pickle():
    assert issubclass(freight.SerializationError, pickle.PicklingError)
    assert issubclass(freight.DeserializationError, pickle.UnpicklingError)
    assert not issubclass(freight.SerializationError, freight.DeserializationError)
    assert not issubclass(freight.DeserializationError, freight.SerializationError)
    assert issubclass(freight.MissingDependencyError, ImportError)


def test_every_exception_freight_exports_is_in_the_hierarchy():
    exported = [getattr(freight, n) for n in freight.__all__]
    for obj in exported:
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert issubclass(obj, freight.FreightError), obj


# --------------------------------------------------------------------------------------------
# Non-freight input
# --------------------------------------------------------------------------------------------

NOT_FREIGHT = {
    "empty": b"",
    "one-byte": b"\x89",
    "pickle": pickle.dumps({"a": [1, 2, 3]}, protocol=5),
    "pickle-protocol-0": pickle.dumps([1, "x"], protocol=0),
    "text": b"hello world, this is not a payload",
    "json": b'{"a": 1}',
    "zeros": bytes(64),
    "ones": b"\xff" * 64,
    "random": random.Random(3).randbytes(500),
    "npy": b"\x93NUMPY\x01\x00" + bytes(100),
}


@pytest.mark.parametrize("name", list(NOT_FREIGHT))
def test_non_freight_input_is_a_deserialization_error(name):
    data = NOT_FREIGHT[name]
    for buf in (data, bytearray(data), memoryview(data)):
        with pytest.raises(freight.DeserializationError) as info:
            freight.loads(buf)
        assert str(info.value).strip(), "empty error message"
    with pytest.raises(freight.DeserializationError):
        freight.loads_frames([data])
    with pytest.raises(freight.DeserializationError):
        freight.inspect(data)


def test_non_freight_message_says_what_is_wrong():
    with pytest.raises(freight.DeserializationError) as info:
        freight.loads(pickle.dumps([1, 2, 3]))
    message = str(info.value).lower()
    assert "freight" in message
    assert any(word in message for word in ("magic", "not a", "payload"))


def test_truncated_payload_message_mentions_truncation():
    blob = freight.dumps({"a": list(range(100))})
    with pytest.raises(freight.DeserializationError) as info:
        freight.loads(blob[: len(blob) // 2])
    message = str(info.value).lower()
    assert any(word in message for word in ("truncat", "ends", "short", "incomplete", "corrupt"))


def test_load_of_a_text_file_is_an_error():
    with pytest.raises(freight.DeserializationError) as info:
        freight.load(io.StringIO("not binary"))
    assert "binary" in str(info.value)


# --------------------------------------------------------------------------------------------
# Format version
# --------------------------------------------------------------------------------------------


def _version_of(blob: bytes) -> int:
    info = freight.inspect(blob)
    for key in ("version", "format_version", "format"):
        if isinstance(info.get(key), int):
            return info[key]
    raise AssertionError(f"freight.inspect() reports no format version: {sorted(info)}")


# The format version is the byte right after the 4 magic bytes (docs/FORMAT.md: "magic and
# format version first").
_VERSION_AT = 4


@pytest.mark.parametrize("future", [1, 2, 100, 255 - 1])
def test_future_format_version_is_refused_naming_both_versions(future):
    blob = bytearray(freight.dumps({"a": [1, 2, 3], "arr": np.arange(10)}))
    current = _version_of(bytes(blob))
    assert blob[_VERSION_AT] == current
    newer = min(current + future, 255)
    blob[_VERSION_AT] = newer
    with pytest.raises(freight.FormatVersionError) as info:
        freight.loads(bytes(blob))
    message = str(info.value)
    assert str(newer) in message and str(current) in message
    with pytest.raises(freight.FormatVersionError):
        freight.loads(bytes(blob), verify=False)
    frames = freight.dumps_frames([1, 2])
    header = bytearray(memoryview(frames[0]))
    header[_VERSION_AT] = newer
    with pytest.raises(freight.FormatVersionError):
        freight.loads_frames([bytes(header), *frames[1:]])


# --------------------------------------------------------------------------------------------
# Integrity
# --------------------------------------------------------------------------------------------


def _array_payload():
    arr = np.arange(10_000, dtype=np.float64)
    blob = freight.dumps({"arr": arr, "name": "data"}, checksum=True)
    # Array frames come last in the payload: this position is inside the array's frame.
    position = len(blob) - arr.nbytes // 2
    assert blob[position - 8 : position + 8] in arr.tobytes()
    return arr, blob, position


def test_bit_flip_in_an_array_frame_is_an_integrity_error():
    arr, blob, position = _array_payload()
    corrupt = bytearray(blob)
    corrupt[position] ^= 0x10
    for buf in (bytes(corrupt), corrupt, memoryview(bytes(corrupt))):
        with pytest.raises(freight.IntegrityError) as info:
            freight.loads(buf)
        message = str(info.value).lower()
        assert "checksum" in message or "corrupt" in message
    with pytest.raises(freight.IntegrityError):
        freight.loads(bytes(corrupt), verify=True)
    with pytest.raises(freight.IntegrityError):
        freight.loads(bytes(corrupt), zero_copy=True, verify=True)


def test_verify_false_skips_the_frame_check():
    arr, blob, position = _array_payload()
    corrupt = bytearray(blob)
    corrupt[position] ^= 0x10
    got = freight.loads(bytes(corrupt), verify=False)
    assert got["name"] == "data"
    changed = np.flatnonzero(got["arr"] != arr)
    assert changed.size == 1  # exactly the flipped element differs: the check was skipped
    assert freight.Freight(verify=False).loads(bytes(corrupt))["name"] == "data"


def test_checksums_can_be_left_out():
    arr, _, _ = _array_payload()
    blob = freight.dumps({"arr": arr, "name": "data"}, checksum=False)
    corrupt = bytearray(blob)
    corrupt[len(blob) - arr.nbytes // 2] ^= 0x10
    got = freight.loads(bytes(corrupt))  # nothing to check against
    assert np.flatnonzero(got["arr"] != arr).size == 1


def test_bit_flip_in_the_header_is_an_error():
    blob = bytearray(freight.dumps({"a": "some text", "b": [1, 2, 3]}))
    for position in range(len(blob)):
        corrupt = bytearray(blob)
        corrupt[position] ^= 0x01
        with pytest.raises(freight.DeserializationError):
            freight.loads(bytes(corrupt))


# --------------------------------------------------------------------------------------------
# Messages that say what to do
# --------------------------------------------------------------------------------------------


def test_unpicklable_object_message_names_the_type():
    with pytest.raises(freight.SerializationError) as info:
        freight.dumps({"lock": threading.Lock()})
    message = str(info.value)
    assert "lock" in message.lower()


def test_unsafe_payload_message_mentions_allow_pickle():
    blob = freight.dumps(lambda: 1)
    with pytest.raises(freight.UnsafePayloadError) as info:
        freight.loads(blob, allow_pickle=False)
    assert "allow_pickle" in str(info.value)


def test_unknown_tag_message_says_to_register():
    class Point:
        pass

    class PointSerializer:
        tag = "tests.errors.point"
        types = (Point,)

        def serialize(self, obj):
            return None, []

        def deserialize(self, meta, frames):
            return Point()

    codec = freight.Freight()
    codec.register(PointSerializer())
    with pytest.raises(freight.UnknownTagError) as info:
        freight.loads(codec.dumps(Point()))
    message = str(info.value)
    assert "tests.errors.point" in message
    assert "register" in message


def test_duplicate_tag_message_says_to_replace():
    class A:
        pass

    class Ser:
        tag = "tests.errors.dup"
        types = (A,)

        def serialize(self, obj):
            return None, []

        def deserialize(self, meta, frames):
            return A()

    codec = freight.Freight()
    codec.register(Ser())
    with pytest.raises(freight.SerializationError) as info:
        codec.register(Ser())
    assert "replace=True" in str(info.value)


def test_errors_pickle_and_unpickle():
    """Errors cross process boundaries (e.g. from a worker back to a client)."""
    for cls in (getattr(freight, n) for n in PUBLIC_ERRORS):
        err = cls("something went wrong")
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is cls and str(back) == "something went wrong"
