"""Errors: one hierarchy, useful messages, the right class for each failure."""

from __future__ import annotations

import io
import pickle
import random
import threading

import numpy as np
import pytest

import freight
import freight._unpicklable
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


# --------------------------------------------------------------------------------------------
# Issue 30: a value pickle cannot take names the entry that failed, with advice for its kind
# --------------------------------------------------------------------------------------------


class _Holder:
    def __init__(self, **attributes):
        self.__dict__.update(attributes)


class _Slotted:
    __slots__ = ("name", "guard")

    def __init__(self, name, guard):
        self.name = name
        self.guard = guard


class _NoPickle:
    """An arbitrary class pickle cannot take (as a C type without pickle support)."""

    def __reduce__(self):
        raise TypeError("cannot pickle '_NoPickle' object")


class _RaisesInReduce:
    def __reduce__(self):
        raise ValueError("the object refuses")


def _generator():
    yield 1


def _closing_over_a_lock():
    guard = threading.Lock()

    def task():
        with guard:
            return 1

    return task


def _dumps_error(value) -> str:
    with pytest.raises(freight.SerializationError) as info:
        freight.dumps(value)
    return str(info.value)


_CANNOT_TRAVEL = "belongs to this process and cannot travel to another one"


def test_a_lock_in_a_dict_is_named_by_its_key_and_said_to_stay_here():
    message = _dumps_error({"cfg": 1, "lock": threading.RLock()})
    assert message.startswith('cannot serialize value["lock"], a lock (_thread.RLock): '), message
    assert _CANNOT_TRAVEL in message and "leave it out of what you send" in message
    assert "freight.register" not in message and "builtins.dict" not in message


@pytest.mark.parametrize(
    ("value", "path", "kind", "advice"),
    [
        ([1, 2, 3, _Holder(attr=_generator())], "value[3].attr", "a generator", "list(...)"),
        ({"s": _Slotted("x", threading.Lock())}, 'value["s"].guard', "a lock (_thread.lock)", _CANNOT_TRAVEL),
        ({"f": _closing_over_a_lock()}, 'value["f"].__closure__[0].cell_contents', "a lock", _CANNOT_TRAVEL),
        ({"ev": threading.Event()}, 'value["ev"]', "an event (threading.Event)", _CANNOT_TRAVEL),
        ({"t": threading.Thread(target=print)}, 'value["t"]', "a thread (threading.Thread)", "start a thread"),
        ({"frame": __import__("sys")._getframe()}, 'value["frame"]', "a stack frame", "traceback.format_exc()"),
        ((0, [{"deep": {"er": threading.Condition()}}]), 'value[1][0]["deep"]["er"]', "a condition", _CANNOT_TRAVEL),
    ],
    ids=["generator attribute", "slot", "closure", "event", "thread", "frame", "condition"],
)
def test_the_message_names_the_path_and_what_the_object_is(value, path, kind, advice):
    message = _dumps_error(value)
    assert message.startswith(f"cannot serialize {path}, {kind}"), message
    assert advice in message
    assert "register a serializer" not in message


def test_a_socket_says_to_connect_again_on_the_other_side():
    import socket

    with socket.socket() as sock:
        message = _dumps_error({"conn": sock})
    assert message.startswith('cannot serialize value["conn"], a socket (socket.socket): '), message
    assert "connect again on the other side" in message


def test_a_coroutine_says_to_send_its_function():
    async def work():
        return 1

    coroutine = work()
    try:
        message = _dumps_error({"c": coroutine})
    finally:
        coroutine.close()
    assert message.startswith('cannot serialize value["c"], a coroutine: '), message
    assert "coroutine function and its arguments" in message


def test_the_value_itself_is_named_as_such():
    assert _dumps_error(threading.Lock()).startswith("cannot serialize the value, a lock (_thread.lock): ")


def test_an_arbitrary_class_is_told_to_register_a_serializer_or_reduce():
    message = _dumps_error({"x": [1, _NoPickle()]})
    cls = f"{__name__}._NoPickle"
    assert message.startswith(f'cannot serialize value["x"][1] (a {cls}): '), message
    assert f"register a serializer for {cls} with freight.register" in message and "__reduce__" in message
    assert "cannot pickle '_NoPickle' object" in message  # what pickle said


def test_an_entry_without_a_path_is_named_inside_its_container():
    message = _dumps_error({"s": {threading.Lock()}})  # a set's items have no key or index
    assert message.startswith('cannot serialize a lock (_thread.lock) inside value["s"]: '), message


def test_a_cyclic_value_is_located():
    value: dict = {"a": [1, 2]}
    value["self"] = value
    value["a"].append(value)
    value["lock"] = threading.Lock()
    assert _dumps_error(value).startswith('cannot serialize value["lock"], a lock')


def test_numbers_beside_the_entry_do_not_use_up_the_search():
    # Ints, strs, floats, bytes and None cannot fail: they are passed over, not counted.
    message = _dumps_error({"data": list(range(300_000)), "lock": threading.RLock()})
    assert message.startswith('cannot serialize value["lock"], a lock (_thread.RLock): '), message
    assert "register a serializer" not in message


def test_when_the_search_gives_up_the_advice_fits_what_pickle_named(monkeypatch):
    """The search for the entry is bounded: on a value too large for it, the message names no
    path, but still says what the object pickle could not take is (its message names the class)
    and what to do, not to register a serializer for the value's type."""
    monkeypatch.setattr(freight._unpicklable, "_PROBE_LIMIT", 50)
    message = _dumps_error({"data": [[i] for i in range(100)], "lock": threading.RLock()})
    assert message.startswith("cannot serialize a lock (_thread.RLock) inside the value (a dict): "), message
    assert _CANNOT_TRAVEL in message and "register a serializer" not in message
    assert "cannot pickle '_thread.RLock' object" in message
    message = _dumps_error([[i] for i in range(100)] + [_generator()])
    assert message.startswith("cannot serialize a generator inside the value (a list): "), message
    assert "list(...)" in message


def test_a_value_nested_too_deep_for_the_search_gets_the_advice_of_what_pickle_named():
    value: dict = {"lock": threading.RLock()}
    for _ in range(400):  # deeper than the pure-Python search can follow; pickle's C pickler fails first
        value = {"x": value}
    message = _dumps_error(value)
    assert message.startswith("cannot serialize a lock (_thread.RLock) inside the value (a dict): "), message
    assert "register a serializer" not in message


def test_an_arbitrary_class_still_gets_the_advice_to_register_when_the_search_gives_up(monkeypatch):
    monkeypatch.setattr(freight._unpicklable, "_PROBE_LIMIT", 5)
    message = _dumps_error([[i] for i in range(20)] + [_NoPickle()])
    assert message.startswith("cannot serialize a list: "), message
    assert "freight.register" in message


def test_an_object_freight_encodes_itself_is_not_blamed():
    class Opaque:
        def __init__(self):
            self.lock = threading.Lock()  # plain pickle could not take it; the serializer does

    class OpaqueSerializer:
        tag = "tests.errors.opaque"
        types = (Opaque,)

        def serialize(self, obj):
            return None, []

        def deserialize(self, meta, frames):
            return Opaque()

    codec = freight.Freight()
    codec.register(OpaqueSerializer())
    with pytest.raises(freight.SerializationError) as info:
        codec.dumps({"o": Opaque(), "a": np.arange(3), "g": _generator()})
    assert str(info.value).startswith('cannot serialize value["g"], a generator: ')


def test_an_error_of_the_objects_own_code_notes_where_it_was_raised():
    with pytest.raises(ValueError, match="the object refuses") as info:
        freight.dumps({"nested": [_RaisesInReduce()]})
    assert f'(raised while freight pickled value["nested"][0], a {__name__}._RaisesInReduce)' in info.value.__notes__


class _RaisesOther:
    def __init__(self, error):
        self.error = error

    def __reduce__(self):
        raise self.error


class _OwnError(Exception):
    pass


@pytest.mark.parametrize(
    "error", [RuntimeError("boom"), KeyError("k"), OSError(5, "io"), _OwnError("mine")], ids=lambda e: type(e).__name__
)
def test_any_error_of_the_objects_own_code_notes_where_it_was_raised(error):
    with pytest.raises(type(error)) as info:
        freight.dumps({"nested": [1, _RaisesOther(error)]})
    assert info.value is error
    assert f'(raised while freight pickled value["nested"][1], a {__name__}._RaisesOther)' in info.value.__notes__


class _SlotsRaisingGetattr:
    """No __dict__, and a __getattr__ that raises something other than AttributeError."""

    __slots__ = ("guard",)

    def __init__(self, guard):
        self.guard = guard

    def __getattr__(self, name):
        raise RuntimeError(f"no {name} here")


def test_an_object_whose_getattr_raises_is_searched_all_the_same():
    message = _dumps_error({"s": _SlotsRaisingGetattr(threading.Lock())})
    assert message.startswith('cannot serialize value["s"].guard, a lock (_thread.lock): '), message


def test_the_error_still_chains_what_pickle_said():
    with pytest.raises(freight.SerializationError) as info:
        freight.dumps({"lock": threading.Lock()})
    assert isinstance(info.value.__cause__, TypeError)
    assert isinstance(info.value, pickle.PicklingError)
