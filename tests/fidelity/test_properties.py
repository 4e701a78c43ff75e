"""Property tests: freight round-trips whatever pickle round-trips.

Every property compares freight's result with pickle's on the same input: the same types
(recursively: ``type(a) is type(b)``), the same values (floats bit for bit, so NaN payloads and
the sign of -0.0 count, as they do under pickle), and the same aliasing of mutable objects
(``[a, a]`` comes back as one ``a``; two equal but distinct lists stay two lists).
"""

from __future__ import annotations

import datetime as dt
import math
import mmap
import pathlib
import pickle
import struct
import tempfile
import uuid
from decimal import Decimal
from zoneinfo import ZoneInfo

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import freight

# --------------------------------------------------------------------------------------------
# Comparison helpers
# --------------------------------------------------------------------------------------------


def _float_bits(x: float) -> bytes:
    return struct.pack("<d", x)


def assert_arrays_same(a: np.ndarray, b: np.ndarray, path: str = "arr", check_writeable: bool = True) -> None:
    assert type(a) is type(b), f"{path}: type {type(a)!r} != {type(b)!r}"
    assert b.dtype == a.dtype, f"{path}: dtype {b.dtype!r} != {a.dtype!r}"
    assert b.dtype.str == a.dtype.str, f"{path}: dtype.str {b.dtype.str!r} != {a.dtype.str!r}"
    assert b.dtype.descr == a.dtype.descr, f"{path}: dtype.descr {b.dtype.descr!r} != {a.dtype.descr!r}"
    assert b.dtype.itemsize == a.dtype.itemsize, f"{path}: itemsize"
    assert b.shape == a.shape, f"{path}: shape {b.shape} != {a.shape}"
    # Bytes in C order: exact for every non-object dtype, NaN payloads included.
    assert b.tobytes(order="C") == a.tobytes(order="C"), f"{path}: values differ"
    if check_writeable:
        assert b.flags.writeable == a.flags.writeable, f"{path}: writeable {b.flags.writeable} != {a.flags.writeable}"
    if a.ndim >= 2 and a.flags.f_contiguous and not a.flags.c_contiguous:
        assert b.flags.f_contiguous, f"{path}: a Fortran-ordered array came back not F-contiguous"
    assert b.flags.c_contiguous or b.flags.f_contiguous or b.size <= 1, f"{path}: result is not contiguous"


def assert_same(a, b, path: str = "obj", _active: set | None = None) -> None:
    """``a`` and ``b`` have the same types and values, recursively (cycle-safe)."""
    if _active is None:
        _active = set()
    ta, tb = type(a), type(b)
    assert ta is tb, f"{path}: type {ta!r} != {tb!r}"
    if ta is float:
        assert _float_bits(a) == _float_bits(b), f"{path}: float {a!r} != {b!r} (bitwise)"
    elif ta is complex:
        assert _float_bits(a.real) == _float_bits(b.real), f"{path}: complex real {a!r} != {b!r}"
        assert _float_bits(a.imag) == _float_bits(b.imag), f"{path}: complex imag {a!r} != {b!r}"
    elif ta is Decimal:
        # str keeps sign, exponent and NaN payloads; == would raise on a signaling NaN.
        assert str(a) == str(b), f"{path}: Decimal {a} != {b}"
    elif ta in (dt.datetime, dt.time):
        assert a.replace(tzinfo=None) == b.replace(tzinfo=None), f"{path}: {a!r} != {b!r}"
        assert a.fold == b.fold, f"{path}: fold {a.fold} != {b.fold}"
        assert type(a.tzinfo) is type(b.tzinfo), f"{path}: tzinfo type {type(a.tzinfo)} != {type(b.tzinfo)}"
        assert repr(a.tzinfo) == repr(b.tzinfo), f"{path}: tzinfo {a.tzinfo!r} != {b.tzinfo!r}"
    elif isinstance(a, pathlib.PurePath):
        assert str(a) == str(b), f"{path}: path {a!r} != {b!r}"
    elif ta is uuid.UUID:
        assert a == b, f"{path}: {a!r} != {b!r}"
        assert a.is_safe == b.is_safe, f"{path}: is_safe {a.is_safe} != {b.is_safe}"
    elif isinstance(a, np.ndarray):
        assert_arrays_same(a, b, path)
    elif isinstance(a, (list, tuple)):
        if id(a) in _active:
            return
        _active.add(id(a))
        assert len(a) == len(b), f"{path}: len {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]", _active)
    elif isinstance(a, dict):
        if id(a) in _active:
            return
        _active.add(id(a))
        assert len(a) == len(b), f"{path}: len {len(a)} != {len(b)}"
        for i, ((ka, va), (kb, vb)) in enumerate(zip(a.items(), b.items())):
            assert_same(ka, kb, f"{path}.key#{i}", _active)
            assert_same(va, vb, f"{path}[{ka!r}]", _active)
    elif isinstance(a, (set, frozenset)):
        assert a == b, f"{path}: {a!r} != {b!r}"
        by_value = {x: x for x in b}
        for x in a:
            assert_same(x, by_value[x], f"{path}{{{x!r}}}", _active)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


_MUTABLE = (list, dict, set, bytearray)


def _children(x, y):
    if isinstance(x, (list, tuple)):
        return list(zip(x, y))
    if isinstance(x, dict):
        out = []
        for (ka, va), (kb, vb) in zip(x.items(), y.items()):
            out.append((ka, kb))
            out.append((va, vb))
        return out
    if isinstance(x, (set, frozenset)):
        by_value = {v: v for v in y}
        return [(v, by_value[v]) for v in x]
    return []


def assert_same_aliasing(a, b) -> None:
    """Mutable objects of ``a`` map one-to-one onto those of ``b``: an object shared in ``a``
    is shared in ``b`` and distinct objects stay distinct (what pickle's memo guarantees)."""
    forward: dict[int, int] = {}
    backward: dict[int, int] = {}
    stack = [(a, b, "obj")]
    while stack:
        x, y, path = stack.pop()
        if isinstance(x, _MUTABLE):
            if id(x) in forward:
                assert forward[id(x)] == id(y), f"{path}: one object in the original, two after loads"
                continue
            assert id(y) not in backward, f"{path}: two objects in the original, one after loads"
            forward[id(x)] = id(y)
            backward[id(y)] = id(x)
        for i, (cx, cy) in enumerate(_children(x, y)):
            stack.append((cx, cy, f"{path}/{i}"))


def pickle_roundtrip(obj):
    return pickle.loads(pickle.dumps(obj, protocol=5))


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------


def _bits_to_float(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


ints = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.integers(min_value=-(1 << 4000), max_value=1 << 4000),
    st.sampled_from([0, -1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 2**64, -(2**64) - 1]),
)
floats = st.one_of(
    st.floats(),
    st.sampled_from([math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 5e-324, 1.7976931348623157e308]),
    # NaNs with payload bits (quiet and signaling), and anything else a bit pattern can be.
    st.integers(min_value=0, max_value=2**64 - 1).map(_bits_to_float),
)
complexes = st.builds(complex, floats, floats)
lone_surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, codec=None, exclude_categories=())
texts = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=())),
    st.text(
        st.one_of(lone_surrogates, st.characters(max_codepoint=0x7F), st.characters(codec=None, exclude_categories=())),
        max_size=12,
    ),
    st.sampled_from(["", "\ud800", "a\udfffb", "\udcff" * 7, "é🙂\ud83d", "\x00"]),
)
# Large values that a writer may move to frames instead of inlining them.
big_leaves = st.sampled_from(
    [
        b"\x00\x01\xfe\xff" * 40_000,
        bytearray(b"big bytearray ") * 12_000,
        "large string ✓ " * 20_000,
        "with a lone surrogate \ud800 " * 10_000,
    ]
)

TIMEZONES = [
    None,
    dt.timezone.utc,
    dt.timezone(dt.timedelta(hours=5, minutes=30)),
    dt.timezone(dt.timedelta(hours=-8), "PST"),
    dt.timezone(dt.timedelta(hours=23, minutes=59, seconds=59, microseconds=999999)),
    dt.timezone(-dt.timedelta(hours=3, microseconds=7), "odd"),
    ZoneInfo("Europe/Paris"),
    ZoneInfo("America/New_York"),
    ZoneInfo("UTC"),
]
tzs = st.sampled_from(TIMEZONES)
folds = st.sampled_from([0, 1])
datetimes = st.builds(lambda d, tz, fold: d.replace(tzinfo=tz, fold=fold), st.datetimes(), tzs, folds)
times = st.builds(lambda t, tz, fold: t.replace(tzinfo=tz, fold=fold), st.times(), tzs, folds)
decimals = st.one_of(
    st.decimals(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            Decimal("NaN"),
            Decimal("-NaN"),
            Decimal("sNaN"),
            Decimal("NaN123"),
            Decimal("-0"),
            Decimal("1.10"),
            Decimal("1E+5"),
            Decimal("-0E-7"),
            Decimal("Infinity"),
            Decimal("-Infinity"),
            Decimal("123456789012345678901234567890.000"),
        ]
    ),
    st.builds(
        lambda sign, digits, exp: Decimal((sign, digits, exp)),
        st.integers(0, 1),
        st.lists(st.integers(0, 9), max_size=40).map(tuple),
        st.integers(-10_000, 10_000),
    ),
)
uuids = st.one_of(
    st.uuids(),
    st.builds(
        lambda n, safe: uuid.UUID(int=n, is_safe=safe),
        st.integers(0, 2**128 - 1),
        st.sampled_from(list(uuid.SafeUUID)),
    ),
)
path_parts = st.lists(
    st.text(st.characters(codec=None, exclude_categories=(), exclude_characters="/\\\x00"), min_size=1, max_size=8),
    max_size=4,
)
paths = st.builds(
    lambda cls, absolute, parts: cls(*((["/"] if absolute else []) + parts)),
    st.sampled_from([pathlib.PurePosixPath, pathlib.PureWindowsPath, pathlib.Path]),
    st.booleans(),
    path_parts,
)

hashables = st.recursive(
    st.one_of(st.none(), st.booleans(), ints, texts, st.binary(max_size=16), st.floats(allow_nan=False)),
    lambda children: st.one_of(
        st.lists(children, max_size=3).map(tuple),
        st.frozensets(children, max_size=3),
    ),
    max_leaves=6,
)

leaves = st.one_of(
    st.none(),
    st.booleans(),
    ints,
    floats,
    complexes,
    texts,
    st.binary(),
    st.binary().map(bytearray),
    datetimes,
    st.dates(),
    times,
    st.timedeltas(),
    decimals,
    uuids,
    paths,
    big_leaves,
)

values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.dictionaries(hashables, children, max_size=5),
        st.sets(hashables, max_size=5),
        st.frozensets(hashables, max_size=5),
    ),
    max_leaves=25,
)

# Shared references: a pool of distinct mutable objects (possibly equal to one another) and a
# structure that refers to pool entries by index, several times.
pool_atoms = st.one_of(
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(-3, 3), max_size=3),
    st.sets(st.integers(-3, 3), max_size=3),
    st.binary(max_size=3).map(bytearray),
)
index_trees = st.recursive(
    st.integers(min_value=0, max_value=7),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=3), children, max_size=4),
    ),
    max_leaves=20,
)


def _build(tree, pool):
    if isinstance(tree, int):
        return pool[tree % len(pool)]
    if isinstance(tree, list):
        return [_build(t, pool) for t in tree]
    if isinstance(tree, tuple):
        return tuple(_build(t, pool) for t in tree)
    return {k: _build(v, pool) for k, v in tree.items()}


@st.composite
def shared_structures(draw):
    pool = draw(st.lists(pool_atoms, min_size=1, max_size=8))
    root = _build(draw(index_trees), pool)
    # Sometimes close a cycle: a pooled list or dict refers back to the root.
    if draw(st.booleans()):
        for atom in pool:
            if isinstance(atom, list):
                atom.append(root)
                break
            if isinstance(atom, dict):
                atom["\x00root"] = root
                break
    return root


# numpy arrays: every non-object dtype family, both byte orders, structured and nested.
array_dtypes = st.one_of(
    hnp.scalar_dtypes(),
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(endianness="?"),
    hnp.unsigned_integer_dtypes(endianness="?"),
    hnp.floating_dtypes(endianness="?"),
    hnp.complex_number_dtypes(endianness="?"),
    hnp.datetime64_dtypes(endianness="?"),
    hnp.timedelta64_dtypes(endianness="?"),
    hnp.byte_string_dtypes(endianness="?"),
    hnp.unicode_string_dtypes(endianness="?"),
    hnp.array_dtypes(allow_subarrays=True),
    hnp.nested_dtypes(),
)
array_shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)
base_arrays = hnp.arrays(array_dtypes, array_shapes)

LAYOUTS = ["as-is", "fortran", "strided", "reversed", "transposed", "readonly", "readonly-strided", "fortran-readonly"]


def _layout(arr: np.ndarray, layout: str) -> np.ndarray:
    if layout == "fortran":
        return np.asfortranarray(arr)
    if layout == "strided":
        return arr[::2] if arr.ndim else arr
    if layout == "reversed":
        return arr[::-1] if arr.ndim else arr
    if layout == "transposed":
        return arr.T
    if layout == "readonly":
        out = arr.copy()
        out.flags.writeable = False
        return out
    if layout == "readonly-strided":
        out = arr.copy()
        out.flags.writeable = False
        return out[::2] if out.ndim else out
    if layout == "fortran-readonly":
        out = np.asfortranarray(arr)
        out.flags.writeable = False
        return out
    return arr


arrays = st.builds(_layout, base_arrays, st.sampled_from(LAYOUTS))

INPUT_KINDS = ["bytes", "bytearray", "memoryview", "memoryview-offset", "mmap", "mmap-file-readonly"]


def _as_input(blob: bytes, kind: str):
    if kind == "bytes":
        return blob
    if kind == "bytearray":
        return bytearray(blob)
    if kind == "memoryview":
        return memoryview(blob)
    if kind == "memoryview-offset":
        # A view that starts at an odd address: frames lose their absolute alignment.
        return memoryview(b"\x00\x00\x00" + blob)[3:]
    if kind == "mmap":
        m = mmap.mmap(-1, len(blob))
        m[:] = blob
        return m
    if kind == "mmap-file-readonly":
        with tempfile.TemporaryFile() as fh:
            fh.write(blob)
            fh.flush()
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    raise AssertionError(kind)


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------


@given(values)
def test_roundtrip_matches_pickle(obj):
    blob = freight.dumps(obj)
    assert type(blob) is bytes
    got = freight.loads(blob)
    expected = pickle_roundtrip(obj)
    assert_same(expected, got)
    assert_same(obj, got)


@given(values)
def test_roundtrip_without_checksums(obj):
    got = freight.loads(freight.dumps(obj, checksum=False))
    assert_same(pickle_roundtrip(obj), got)


@given(shared_structures())
def test_aliasing_and_cycles_match_pickle(obj):
    got = freight.loads(freight.dumps(obj))
    assert_same(pickle_roundtrip(obj), got)
    assert_same_aliasing(obj, got)
    # pickle itself keeps the same pattern: the property is "as pickle does".
    assert_same_aliasing(obj, pickle_roundtrip(obj))


@given(arrays)
def test_numpy_arrays_roundtrip(arr):
    got = freight.loads(freight.dumps(arr))
    assert isinstance(got, np.ndarray)
    assert_arrays_same(arr, got)


@given(
    st.one_of(values, arrays, st.lists(arrays, max_size=3), st.dictionaries(st.text(max_size=3), arrays, max_size=3))
)
def test_frames_roundtrip(obj):
    frames = freight.dumps_frames(obj)
    assert isinstance(frames, list) and len(frames) >= 1
    for frame in frames:
        memoryview(frame)  # every frame is a buffer
    assert_same(obj, freight.loads_frames(frames))
    # Frames as they arrive after a network hop: independent bytes objects.
    assert_same(obj, freight.loads_frames([bytes(memoryview(f)) for f in frames]))


@given(st.one_of(values, arrays, st.lists(arrays, max_size=3)), st.sampled_from(INPUT_KINDS))
def test_loads_accepts_every_buffer_kind(obj, kind):
    blob = freight.dumps(obj)
    assert_same(obj, freight.loads(_as_input(blob, kind)))


@given(arrays, st.sampled_from(INPUT_KINDS))
def test_arrays_load_from_every_buffer_kind_with_their_flags(arr, kind):
    blob = freight.dumps(arr)
    got = freight.loads(_as_input(blob, kind))
    assert_arrays_same(arr, got)


@given(arrays, st.sampled_from(INPUT_KINDS))
def test_zero_copy_loads_give_read_only_arrays_with_the_same_values(arr, kind):
    got = freight.loads(_as_input(freight.dumps(arr), kind), zero_copy=True)
    assert_arrays_same(arr, got, check_writeable=False)
    assert not got.flags.writeable


@given(st.one_of(values, st.lists(arrays, max_size=3)), st.sampled_from(INPUT_KINDS))
def test_zero_copy_loads_of_anything(obj, kind):
    got = freight.loads(_as_input(freight.dumps(obj), kind), zero_copy=True)
    if isinstance(obj, list) and obj and isinstance(obj[0], np.ndarray):
        assert len(got) == len(obj)
        for a, b in zip(obj, got):
            assert_arrays_same(a, b, check_writeable=False)
    else:
        assert_same(obj, got)


# --------------------------------------------------------------------------------------------
# Cycles and aliasing, spelled out
# --------------------------------------------------------------------------------------------


def test_list_containing_itself():
    a = [1, "x"]
    a.append(a)
    got = freight.loads(freight.dumps(a))
    assert type(got) is list and got[:2] == [1, "x"]
    assert got[2] is got


def test_dict_containing_itself():
    d = {"k": 1}
    d["self"] = d
    got = freight.loads(freight.dumps(d))
    assert got["k"] == 1
    assert got["self"] is got


def test_list_containing_tuple_containing_the_list():
    a = []
    t = (a, 5)
    a.append(t)
    got = freight.loads(freight.dumps(a))
    assert type(got[0]) is tuple
    assert got[0][0] is got
    assert got[0][1] == 5


def test_tuple_root_of_a_cycle_through_a_list():
    a = []
    t = (a,)
    a.append(t)
    expected = pickle_roundtrip(t)
    assert expected[0][0] is expected  # what pickle does
    got = freight.loads(freight.dumps(t))
    assert type(got) is tuple and type(got[0]) is list
    assert got[0][0] is got


def test_shared_subobjects_keep_identity():
    a = [1, 2]
    b = {"z": 3}
    obj = {"x": a, "y": [a, b], "z": (a, b, [b])}
    got = freight.loads(freight.dumps(obj))
    assert got["x"] is got["y"][0] is got["z"][0]
    assert got["y"][1] is got["z"][1] is got["z"][2][0]
    got["x"].append(99)
    assert got["z"][0][-1] == 99


def test_equal_but_distinct_objects_stay_distinct():
    obj = [[1], [1], {"a": 1}, {"a": 1}, bytearray(b"x"), bytearray(b"x")]
    got = freight.loads(freight.dumps(obj))
    assert got == obj
    assert got[0] is not got[1]
    assert got[2] is not got[3]
    assert got[4] is not got[5]


def test_frames_keep_aliasing_and_cycles():
    shared = [1, 2, 3]
    root = [shared, {"s": shared}]
    root.append(root)
    got = freight.loads_frames(freight.dumps_frames(root))
    assert got[0] is got[1]["s"]
    assert got[2] is got


@pytest.mark.parametrize("kind", INPUT_KINDS)
def test_loads_from_each_buffer_kind(kind):
    obj = {"a": [1, 2.5, "three"], "arr": np.arange(1000, dtype=np.int32), "b": b"bytes" * 100}
    got = freight.loads(_as_input(freight.dumps(obj), kind))
    assert got["a"] == obj["a"] and got["b"] == obj["b"]
    assert np.array_equal(got["arr"], obj["arr"]) and got["arr"].dtype == np.int32
