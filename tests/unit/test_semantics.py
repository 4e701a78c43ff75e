"""The semantics users rely on: identity across the whole payload, determinism, pickle-compatible
exceptions, errors from user code, no leaks, awkward values, subclasses, safe loading."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import io
import json
import math
import os
import pickle
import struct
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


class Color(enum.IntEnum):
    RED = 1
    GREEN = 2


class Flag(enum.Enum):
    ON = "on"
    OFF = "off"


Pair = collections.namedtuple("Pair", "left right")


class MyStr(str):
    pass


class MyBytes(bytes):
    pass


class MyInt(int):
    pass


class MyFloat(float):
    pass


class MyList(list):
    pass


class MyTuple(tuple):
    pass


class MyDict(dict):
    pass


class MySet(set):
    pass


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
        f"{type(exc).__name__} does not chain the user's {exc_type.__name__}: "
        f"{[type(e).__name__ for e in _chain(exc)]}"
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
# Awkward corners
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["\ud800", "a\udfffb", "\udcff" * 1000, "\ud83d\ude00", "x" * 100_000 + "\ud800", "mixed 🙂 \udc80 é"],
    ids=["high", "low-in-middle", "repeated", "pair-of-lone-surrogates", "large", "mixed"],
)
def test_strings_with_lone_surrogates(text):
    got = roundtrip(text)
    assert type(got) is str and got == text
    got = roundtrip({"k": [text], text: 1})
    assert got == {"k": [text], text: 1}


@pytest.mark.parametrize("key", [1, 1.0, True, 1 + 0j, Decimal(1)], ids=["int", "float", "bool", "complex", "decimal"])
def test_equal_keys_of_different_types_keep_their_type(key):
    got = roundtrip({key: "a"})
    (k,) = got
    assert type(k) is type(key)
    assert got[key] == "a"


def test_equal_values_of_different_types_in_one_payload_keep_their_types():
    values = [1, 1.0, True, 1 + 0j, Decimal(1), 0, 0.0, -0.0, False, MyInt(1)]
    got = roundtrip(values)
    assert [type(v) for v in got] == [type(v) for v in values]
    assert struct.pack("<d", got[7]) == struct.pack("<d", -0.0)
    dicts = [{1: "a"}, {1.0: "b"}, {True: "c"}]
    got = roundtrip(dicts)
    assert [type(next(iter(d))) for d in got] == [int, float, bool]
    assert [d[1] for d in got] == ["a", "b", "c"]
    got = roundtrip({"a": 1, "b": 1.0, "c": True, "d": "1"})
    assert {k: type(v) for k, v in got.items()} == {"a": int, "b": float, "c": bool, "d": str}


def _float_from_bits(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


FLOAT_BITS = [
    0x0000000000000000,  # 0.0
    0x8000000000000000,  # -0.0
    0x7FF8000000000000,  # quiet NaN
    0xFFF8000000000000,  # negative quiet NaN
    0x7FF8000000000123,  # NaN with a payload
    0x7FF0000000000001,  # signaling NaN
    0xFFF00000DEADBEEF,  # negative signaling NaN with a payload
    0x7FF0000000000000,  # inf
    0x0000000000000001,  # smallest subnormal
]


def test_float_bits_are_kept():
    values = [_float_from_bits(b) for b in FLOAT_BITS]
    for container in (values, tuple(values), {str(i): v for i, v in enumerate(values)}):
        got = roundtrip(container)
        got_values = list(got.values()) if isinstance(got, dict) else list(got)
        assert [struct.pack("<d", v) for v in got_values] == [struct.pack("<d", v) for v in values]
    for bits in FLOAT_BITS:
        x = _float_from_bits(bits)
        assert struct.pack("<d", roundtrip(x)) == struct.pack("<d", x)
        c = roundtrip(complex(x, -x))
        assert struct.pack("<dd", c.real, c.imag) == struct.pack("<dd", x, -x)
    arr = np.array(FLOAT_BITS, dtype=np.uint64).view(np.float64)
    got = roundtrip(arr)
    assert got.dtype == np.float64
    assert got.view(np.uint64).tolist() == FLOAT_BITS


def test_distinct_nan_objects_stay_distinct_values():
    nan1, nan2 = float("nan"), -float("nan")
    got = roundtrip([nan1, nan2, nan1])
    assert all(math.isnan(v) for v in got)
    assert struct.pack("<d", got[1]) == struct.pack("<d", nan2)


@pytest.mark.parametrize("text", ["1.10", "-0", "0E-7", "1E+3", "NaN", "-NaN", "sNaN", "NaN42", "-Infinity", "1.000000000000000000000000000001"])
def test_decimal_keeps_its_exact_representation(text):
    d = Decimal(text)
    assert str(d) == text
    got = roundtrip(d)
    assert type(got) is Decimal
    assert str(got) == text
    assert str(roundtrip([d, {"d": d}])[1]["d"]) == str(d)


def test_datetime_fold_and_timezones():
    paris = ZoneInfo("Europe/Paris")
    first = dt.datetime(2021, 10, 31, 2, 30, tzinfo=paris)
    second = first.replace(fold=1)
    assert first.utcoffset() != second.utcoffset()  # an ambiguous wall time
    got_first, got_second = roundtrip([first, second])
    assert got_first.fold == 0 and got_second.fold == 1
    assert got_second.utcoffset() == second.utcoffset()
    assert got_second.tzinfo is paris or (type(got_second.tzinfo) is ZoneInfo and got_second.tzinfo.key == "Europe/Paris")

    npt = dt.timezone(dt.timedelta(hours=5, minutes=45), "NPT")
    fixed = dt.datetime(2000, 1, 2, 3, 4, 5, 678901, tzinfo=npt)
    got = roundtrip(fixed)
    assert got == fixed and got.tzname() == "NPT" and got.utcoffset() == dt.timedelta(hours=5, minutes=45)
    anonymous = dt.datetime(2000, 1, 2, tzinfo=dt.timezone(-dt.timedelta(hours=3, minutes=30)))
    got = roundtrip(anonymous)
    assert got.tzname() == anonymous.tzname() and got.utcoffset() == anonymous.utcoffset()
    assert roundtrip(dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)).tzinfo is dt.timezone.utc

    t = dt.time(1, 2, 3, 4, tzinfo=npt, fold=1)
    got = roundtrip(t)
    assert got == t and got.fold == 1 and got.tzname() == "NPT"
    naive = dt.datetime(1, 1, 1, fold=1)
    got = roundtrip(naive)
    assert got == naive and got.fold == 1 and got.tzinfo is None


def test_longdouble_arrays_keep_extended_precision():
    third = np.longdouble(1) / np.longdouble(3)
    arr = np.array([third, np.pi, -0.0, np.inf], dtype=np.longdouble)
    arr[1] = np.longdouble(1) + np.finfo(np.longdouble).eps
    got = roundtrip(arr)
    assert got.dtype == np.longdouble
    assert np.array_equal(got, arr)
    assert got[1] != 1  # more precision than float64 survived
    scalar = roundtrip(third)
    assert type(scalar) is np.longdouble and scalar == third
    carr = np.array([third + 1j * third], dtype=np.clongdouble)
    got = roundtrip(carr)
    assert got.dtype == np.clongdouble and np.array_equal(got, carr)


def test_padded_structured_dtype():
    dtype = np.dtype({"names": ["a", "b"], "formats": ["u1", "<f8"]}, align=True)
    assert dtype.itemsize == 16 and dtype.fields["b"][1] == 8
    arr = np.zeros(5, dtype=dtype)
    arr["a"] = [1, 2, 3, 4, 5]
    arr["b"] = [0.5, -1.5, np.nan, np.inf, 1e300]
    got = roundtrip(arr)
    assert got.dtype == dtype
    assert got.dtype.itemsize == 16 and got.dtype.fields["b"][1] == 8
    assert got.dtype.isalignedstruct == dtype.isalignedstruct
    assert got["a"].tolist() == [1, 2, 3, 4, 5]
    assert np.array_equal(got["b"], arr["b"], equal_nan=True)


_DEEP_SCRIPT = textwrap.dedent(
    """
    import sys
    import freight

    DEPTH = 100_000
    kind = sys.argv[1]
    x = {"list": [], "tuple": (), "dict": {}, "list-with-lambda": []}[kind]
    for _ in range(DEPTH):
        if kind == "list":
            x = [x]
        elif kind == "tuple":
            x = (x,)
        elif kind == "dict":
            x = {"k": x}
        elif kind == "list-with-lambda":
            x = [x]
    if kind == "list-with-lambda":
        leaf = x
        for _ in range(DEPTH):
            leaf = leaf[0]
        leaf.append(lambda: 1)
    try:
        blob = freight.dumps(x)
    except freight.SerializationError as exc:
        assert str(exc), "empty message"
        print("clean-error")
        sys.exit(0)
    y = freight.loads(blob)
    depth = 0
    while True:
        if kind == "dict":
            assert type(y) is dict
            if not y:
                break
            y = y["k"]
        else:
            assert type(y) is (tuple if kind == "tuple" else list)
            if not y or callable(y[0]):
                break
            y = y[0]
        depth += 1
    assert depth == DEPTH, depth
    print("roundtrip")
    """
)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["list", "tuple", "dict", "list-with-lambda"])
def test_very_deep_nesting_roundtrips_or_fails_cleanly(tmp_path, kind):
    script = tmp_path / "deep.py"
    script.write_text(_DEEP_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), kind], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"exit {proc.returncode} (a negative code is a crash):\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip() in {"roundtrip", "clean-error"}


def test_read_only_and_broadcast_arrays_stay_read_only():
    ro = np.arange(10.0)
    ro.flags.writeable = False
    bc = np.broadcast_to(np.arange(3.0), (4, 3))
    assert not bc.flags.writeable
    for load in (
        lambda o: freight.loads(freight.dumps(o)),
        lambda o: freight.loads(bytearray(freight.dumps(o))),
        lambda o: freight.loads_frames(freight.dumps_frames(o)),
    ):
        got_ro, got_bc = load([ro, bc])
        assert not got_ro.flags.writeable and np.array_equal(got_ro, ro)
        assert not got_bc.flags.writeable and got_bc.shape == (4, 3) and np.array_equal(got_bc, bc)


# --------------------------------------------------------------------------------------------
# Subclasses come back as themselves
# --------------------------------------------------------------------------------------------


def _with_attr(obj, **attrs):
    for k, v in attrs.items():
        setattr(obj, k, v)
    return obj


SUBCLASS_CASES = {
    "bool-vs-int": [True, False, 1, 0],
    "intenum": Color.GREEN,
    "enum": Flag.OFF,
    "namedtuple": Pair(1, [2, 3]),
    "ordereddict": collections.OrderedDict([("b", 1), ("a", 2), ("c", 3)]),
    "str-subclass": _with_attr(MyStr("hello"), note=5),
    "bytes-subclass": MyBytes(b"abc"),
    "int-subclass": MyInt(7),
    "float-subclass": MyFloat(2.5),
    "list-subclass": MyList([1, 2]),
    "tuple-subclass": MyTuple((1, 2)),
    "dict-subclass": _with_attr(MyDict(a=1), note="x"),
    "set-subclass": MySet({1, 2}),
    "numpy-float64": np.float64(1.5),
    "numpy-int32": np.int32(-7),
    "numpy-bool": np.bool_(True),
    "numpy-str": np.str_("text"),
    "numpy-bytes": np.bytes_(b"raw"),
    "numpy-datetime64": np.datetime64("2020-01-02T03:04", "m"),
}


@pytest.mark.parametrize("name", list(SUBCLASS_CASES))
def test_subclasses_keep_their_type(name):
    obj = SUBCLASS_CASES[name]
    for got, expected in ((roundtrip(obj), obj), (roundtrip([obj, {"k": obj}])[1]["k"], obj)):
        assert type(got) is type(expected)
        assert got == expected
        if isinstance(expected, list):
            assert [type(v) for v in got] == [type(v) for v in expected]
        if hasattr(expected, "__dict__") and not isinstance(expected, type):
            assert vars(got) == vars(expected)
        if isinstance(expected, dict):
            assert list(got.items()) == list(expected.items())
    if isinstance(obj, enum.Enum):
        assert roundtrip(obj) is obj


def test_ordereddict_keeps_moved_order():
    od = collections.OrderedDict([("b", 1), ("a", 2), ("c", 3)])
    od.move_to_end("b")
    got = roundtrip(od)
    assert type(got) is collections.OrderedDict and list(got) == ["a", "c", "b"]


def test_defaultdict_keeps_its_default_factory():
    dd = collections.defaultdict(list, {"x": [1]})
    got = roundtrip(dd)
    assert type(got) is collections.defaultdict
    assert got.default_factory is list
    assert got == {"x": [1]}
    got["new"].append(1)
    assert got["new"] == [1]


def test_pandas_timestamp_is_not_turned_into_a_datetime():
    pd = pytest.importorskip("pandas")
    ts = pd.Timestamp("2020-01-02 03:04:05.123456789")
    got = roundtrip(ts)
    assert type(got) is pd.Timestamp and got == ts and got.nanosecond == ts.nanosecond


def test_ndarray_subclasses_keep_their_type():
    arr = np.arange(6).reshape(2, 3).view(MyArray)
    got = roundtrip(arr)
    assert type(got) is MyArray and np.array_equal(got, arr)
    masked = np.ma.array([1.0, 2.0, 3.0], mask=[False, True, False])
    got = roundtrip(masked)
    assert type(got) is np.ma.MaskedArray
    assert got.mask.tolist() == [False, True, False]
    assert got.compressed().tolist() == [1.0, 3.0]


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
