"""Awkward values that must come back exactly: lone surrogates, equal keys of different types,
float bits and NaNs, decimals, datetimes with folds and zones, extended precision and padded
dtypes, very deep nesting, read-only arrays; and subclasses of built-in types, which come
back as themselves."""

from __future__ import annotations

import collections
import datetime as dt
import enum
import math
import struct
import subprocess
import sys
import textwrap
from decimal import Decimal
from zoneinfo import ZoneInfo

import numpy as np
import pytest

import freight


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


def roundtrip(obj, **loads_options):
    return freight.loads(freight.dumps(obj), **loads_options)


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


@pytest.mark.parametrize(
    "text",
    ["1.10", "-0", "0E-7", "1E+3", "NaN", "-NaN", "sNaN", "NaN42", "-Infinity", "1.000000000000000000000000000001"],
)
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
    assert got_second.tzinfo is paris or (
        type(got_second.tzinfo) is ZoneInfo and got_second.tzinfo.key == "Europe/Paris"
    )

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
