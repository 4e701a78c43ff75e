"""The semantics users rely on: identity across the whole payload, determinism, pickle-compatible
exceptions, errors from user code, no leaks, safe loading, files. Awkward values and subclasses
are in test_awkward_values.py."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import uuid
import weakref
from decimal import Decimal
from pathlib import PurePosixPath
from zoneinfo import ZoneInfo

import numpy as np
import pytest

import freight

MODULE_CONSTANT = 21


def module_level_helper(x):
    return x + MODULE_CONSTANT


@dataclasses.dataclass
class Holder:
    items: list
    name: str = "holder"


class MyArray(np.ndarray):
    pass


class Thing:
    def __init__(self):
        self.payload = list(range(100))


SIDE_EFFECTS: list = []


def _record_side_effect(value):
    SIDE_EFFECTS.append(value)
    return value


class RunsCodeOnLoad:
    def __reduce__(self):
        return (_record_side_effect, ("ran",))


class UserError(Exception):
    pass


class UserValueError(ValueError):
    pass


class UserTypeError(TypeError):
    pass


class ExplodesOnDump:
    def __init__(self, exc_type):
        self.exc_type = exc_type

    def __reduce__(self):
        raise self.exc_type("boom from __reduce__")


class ExplodesOnLoad:
    def __init__(self, exc_type):
        self.exc_type = exc_type

    def __getstate__(self):
        return {"exc_type": self.exc_type}

    def __setstate__(self, state):
        raise state["exc_type"]("boom from __setstate__")


def _chain(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def assert_propagated(exc: BaseException, exc_type: type) -> None:
    """The user's exception came out as itself, or as a FreightError caused by it."""
    if isinstance(exc, exc_type):
        return
    assert isinstance(exc, freight.FreightError), f"got {type(exc).__name__}: {exc}"
    assert any(isinstance(e, exc_type) for e in _chain(exc)), (
        f"{type(exc).__name__} does not chain the user's {exc_type.__name__}: {[type(e).__name__ for e in _chain(exc)]}"
    )


def roundtrip(obj, **loads_options):
    return freight.loads(freight.dumps(obj), **loads_options)


# --------------------------------------------------------------------------------------------
# Identity across the whole payload
# --------------------------------------------------------------------------------------------


def test_same_function_twice_is_one_function():
    f = lambda x: x * 2  # noqa: E731
    obj = {"a": f, "b": [f, (f,)], "c": {"d": f}, "data": [1, 2, 3]}
    got = roundtrip(obj)
    assert got["a"] is got["b"][0] is got["b"][1][0] is got["c"]["d"]
    assert got["a"](4) == 8


def test_module_level_function_keeps_identity():
    got = roundtrip([module_level_helper, {"f": module_level_helper}])
    assert got[0] is module_level_helper and got[1]["f"] is module_level_helper


def test_functions_share_their_module_globals():
    f = lambda: MODULE_CONSTANT  # noqa: E731
    g = lambda: MODULE_CONSTANT + 1  # noqa: E731
    got = roundtrip({"f": f, "nested": [{"g": g}]})
    rf, rg = got["f"], got["nested"][0]["g"]
    assert rf() == 21 and rg() == 22
    assert rf.__globals__ is rg.__globals__


def test_closures_sharing_a_cell_still_share_it():
    def make():
        state = []

        def push(x):
            state.append(x)

        def get():
            return state

        return push, get

    push, get = roundtrip(make())
    push(1)
    push(2)
    assert get() == [1, 2]


def test_dynamic_class_is_the_same_class_in_the_same_process():
    class Local:
        def method(self):
            return 42

    assert roundtrip(Local) is Local
    instance = roundtrip(Local())
    assert type(instance) is Local
    assert instance.method() == 42
    both = roundtrip([Local, Local()])
    assert both[0] is Local and type(both[1]) is Local


def test_list_shared_between_a_dict_and_a_dataclass_is_one_list():
    shared = [1, 2]
    for obj in ({"list": shared, "holder": Holder(shared)}, {"holder": Holder(shared), "list": shared}):
        got = roundtrip(obj)
        assert got["list"] is got["holder"].items
        got["list"].append(3)
        assert got["holder"].items == [1, 2, 3]


def test_list_shared_with_a_closure_is_one_list():
    lst = [1]
    f = lambda: lst  # noqa: E731
    got = roundtrip({"lst": lst, "f": f, "deep": [[lst]]})
    assert got["f"]() is got["lst"] is got["deep"][0][0]


def test_same_dataclass_instance_twice_is_one_instance():
    h = Holder([1])
    got = roundtrip([h, {"again": h}])
    assert got[0] is got[1]["again"]


# --------------------------------------------------------------------------------------------
# Determinism
# --------------------------------------------------------------------------------------------

_DETERMINISM_SCRIPT = textwrap.dedent(
    """
    import sys
    import freight

    SCALE = 3
    GREETING = "hello"

    def square(x):
        return x * x * SCALE + len(GREETING)

    data = {
        "ints": list(range(-5, 300)) + [2**70, -(2**90)],
        "strs": ["a", "βγ", "x" * 100, ""],
        "nested": {"k": [1, (2, 3), {"z": None}], "b": b"\\x00\\xff", "ba": bytearray(b"ab")},
        "floats": [1.5, -0.0, float("inf")],
        "keys": {str(i): i for i in range(50)},
        "tuple": (1, "two", 3.0, None, True),
        "ints-set": {1, 2, 3, 100},
    }
    obj = {"data": data, "function": square, "both": [data, square]}[sys.argv[1]]
    sys.stdout.write(freight.dumps(obj).hex())
    """
)


@pytest.mark.parametrize("which", ["data", "function", "both"])
def test_dumps_is_deterministic_across_processes_and_hash_seeds(tmp_path, which):
    script = tmp_path / "determinism.py"
    script.write_text(_DETERMINISM_SCRIPT)
    outputs = []
    for seed in ("0", "4242", "123456"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run(
            [sys.executable, str(script), which], capture_output=True, text=True, env=env, timeout=120
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        outputs.append(proc.stdout)
    assert outputs[0], "no payload written"
    assert outputs[0] == outputs[1] == outputs[2]


# --------------------------------------------------------------------------------------------
# Exceptions are pickle's exceptions; user exceptions propagate
# --------------------------------------------------------------------------------------------


def test_errors_are_pickle_errors():
    assert issubclass(freight.SerializationError, pickle.PicklingError)
    assert issubclass(freight.DeserializationError, pickle.UnpicklingError)
    with pytest.raises(pickle.PicklingError):
        freight.dumps(threading.Lock())
    with pytest.raises(pickle.UnpicklingError):
        freight.loads(b"this is not a freight payload")
    with pytest.raises(pickle.PickleError):
        freight.loads(pickle.dumps([1, 2, 3]))


@pytest.mark.parametrize("exc_type", [UserError, UserValueError, UserTypeError])
def test_exception_in_reduce_propagates(exc_type):
    with pytest.raises(Exception) as info:
        freight.dumps({"x": [ExplodesOnDump(exc_type)]})
    assert_propagated(info.value, exc_type)


@pytest.mark.parametrize("exc_type", [UserError, UserValueError])
def test_exception_in_setstate_propagates(exc_type):
    blob = freight.dumps([ExplodesOnLoad(exc_type)])
    with pytest.raises(Exception) as info:
        freight.loads(blob)
    assert_propagated(info.value, exc_type)


class _Box:
    def __init__(self, value):
        self.value = value


class _FailingSerializer:
    tag = "tests.semantics.failing"
    types = (_Box,)
    safe = True

    def __init__(self, fail_on):
        self.fail_on = fail_on

    def serialize(self, obj):
        if self.fail_on == "serialize":
            raise UserError("boom from serialize")
        return obj.value, []

    def deserialize(self, meta, frames):
        if self.fail_on == "deserialize":
            raise UserError("boom from deserialize")
        return _Box(meta)


def test_exception_in_registered_serialize_propagates():
    codec = freight.Freight()
    codec.register(_FailingSerializer("serialize"))
    with pytest.raises(Exception) as info:
        codec.dumps([_Box(1)])
    assert_propagated(info.value, UserError)


def test_exception_in_registered_deserialize_propagates():
    codec = freight.Freight()
    codec.register(_FailingSerializer("deserialize"))
    blob = codec.dumps([_Box(1)])
    with pytest.raises(Exception) as info:
        codec.loads(blob)
    assert_propagated(info.value, UserError)


# --------------------------------------------------------------------------------------------
# No leaks
# --------------------------------------------------------------------------------------------


def test_dumps_keeps_no_reference_to_a_pickled_object():
    obj = Thing()
    ref = weakref.ref(obj)
    freight.dumps(obj)
    del obj
    assert ref() is None


def test_dumps_keeps_no_reference_to_a_lambda():
    f = lambda: 1  # noqa: E731
    ref = weakref.ref(f)
    freight.dumps({"f": f})
    del f
    assert ref() is None


def test_dumps_keeps_no_reference_to_an_array():
    arr = np.arange(10_000.0)
    ref = weakref.ref(arr)
    freight.dumps([arr])
    del arr
    assert ref() is None


def test_frames_release_the_array_when_dropped():
    arr = np.arange(10_000.0)
    ref = weakref.ref(arr)
    frames = freight.dumps_frames({"a": arr})
    del arr
    del frames
    assert ref() is None


def test_loaded_objects_are_released():
    blob = freight.dumps([Thing(), np.arange(10_000.0)])
    got = freight.loads(blob)
    refs = [weakref.ref(got[0]), weakref.ref(got[1])]
    del got
    assert all(r() is None for r in refs)


_RSS_SCRIPT = textwrap.dedent(
    """
    import gc, json
    import numpy as np
    import psutil
    import freight

    data = np.random.default_rng(0).bytes(1 << 20)

    def make():
        captured = data
        return lambda: len(captured)

    f = make()
    for _ in range(5):
        assert freight.loads(freight.dumps(f))() == 1 << 20
    gc.collect()
    before = psutil.Process().memory_info().rss
    for _ in range(100):
        g = freight.loads(freight.dumps(f))
        assert g() == 1 << 20
    del g
    gc.collect()
    after = psutil.Process().memory_info().rss
    print(json.dumps({"growth": after - before}))
    """
)


def test_round_trips_of_a_large_closure_do_not_grow_memory(tmp_path):
    """100 round trips of a closure capturing 1 MiB: RSS grows by less than 50 MiB. Measured in a
    fresh process, where freed memory from earlier tests cannot hide a leak."""
    pytest.importorskip("psutil")
    script = tmp_path / "rss.py"
    script.write_text(_RSS_SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    growth = json.loads(proc.stdout.strip().splitlines()[-1])["growth"]
    assert growth < 50 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB over 100 round trips"


# --------------------------------------------------------------------------------------------
# Safe loading
# --------------------------------------------------------------------------------------------


def test_object_arrays_roundtrip():
    arr = np.array([1, "a", None, [1, 2], {"k": 3.5}], dtype=object)
    got = roundtrip(arr)
    assert got.dtype == object and got.shape == arr.shape
    assert list(got) == list(arr)


SAFE_OBJECTS = {
    "builtins": {"a": [1, 2.5, "x", b"y", None, (1, 2), {1, 2}, frozenset({3})], "n": 2**100, "c": 1j},
    "stdlib": [dt.datetime(2020, 1, 1, tzinfo=ZoneInfo("UTC")), Decimal("1.10"), uuid.uuid4(), PurePosixPath("/x")],
    "numeric-arrays": {"f": np.arange(10.0), "i": np.arange(7, dtype=np.int16).reshape(7, 1), "s": np.array([b"ab"])},
    "structured-array": np.zeros(3, dtype=[("a", "i4"), ("b", "f8")]),
    "nested": [[{"k": np.ones(3)}], (np.zeros((2, 2), order="F"),)],
}


@pytest.mark.parametrize("name", list(SAFE_OBJECTS))
def test_plain_data_loads_with_allow_pickle_false(name):
    obj = SAFE_OBJECTS[name]
    blob = freight.dumps(obj)
    got = freight.loads(blob, allow_pickle=False)
    assert type(got) is type(obj)
    assert freight.loads_frames(freight.dumps_frames(obj), allow_pickle=False) is not None
    assert freight.Freight(allow_pickle=False).loads(blob) is not None


UNSAFE_OBJECTS = {
    "lambda": lambda: 1,
    "dataclass": Holder([1, 2]),
    "object-array": np.array([1, "a", None], dtype=object),
    "nested-lambda": {"data": [1, 2, 3], "deep": [[lambda x: x]]},
    "runs-code": RunsCodeOnLoad(),
    "ndarray-subclass": np.arange(3).view(MyArray),
}


@pytest.mark.parametrize("name", list(UNSAFE_OBJECTS))
def test_allow_pickle_false_refuses_payloads_that_need_pickle(name):
    obj = UNSAFE_OBJECTS[name]
    blob = freight.dumps(obj)
    SIDE_EFFECTS.clear()
    with pytest.raises(freight.UnsafePayloadError):
        freight.loads(blob, allow_pickle=False)
    with pytest.raises(freight.UnsafePayloadError):
        freight.loads_frames(freight.dumps_frames(obj), allow_pickle=False)
    with pytest.raises(freight.UnsafePayloadError):
        freight.Freight(allow_pickle=False).loads(blob)
    assert SIDE_EFFECTS == [], "pickle ran before the payload was refused"
    freight.loads(blob)  # and it does load when pickle is allowed


def test_refused_payload_runs_no_code():
    SIDE_EFFECTS.clear()
    blob = freight.dumps({"a": [1, RunsCodeOnLoad()]})
    with pytest.raises(freight.UnsafePayloadError):
        freight.loads(blob, allow_pickle=False)
    assert SIDE_EFFECTS == []
    assert freight.loads(blob)["a"][1] == "ran"
    assert SIDE_EFFECTS == ["ran"]


# --------------------------------------------------------------------------------------------
# dump / load
# --------------------------------------------------------------------------------------------


def test_dump_and_load_with_paths_and_files(tmp_path):
    obj = {"a": np.arange(100.0), "f": lambda: 3, "text": "x" * 10}
    path = tmp_path / "obj.freight"
    freight.dump(obj, path)
    got = freight.load(path)
    assert np.array_equal(got["a"], obj["a"]) and got["f"]() == 3
    got = freight.load(str(path))
    assert got["text"] == obj["text"]
    assert path.read_bytes()[:4] == freight.dumps(1)[:4]
    buf = io.BytesIO()
    freight.dump(obj, buf)
    buf.seek(0)
    got = freight.load(buf)
    assert np.array_equal(got["a"], obj["a"]) and got["f"]() == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["obj.freight"]  # no temp files left
