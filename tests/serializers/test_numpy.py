"""numpy arrays: every non-object dtype, layouts and flags, zero-copy frames and views."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import freight

RNG_SEED = 20240601

DTYPES = {
    "bool": np.dtype("?"),
    "int8": np.dtype("i1"),
    "int16": np.dtype("<i2"),
    "int32": np.dtype("<i4"),
    "int64": np.dtype("<i8"),
    "uint8": np.dtype("u1"),
    "uint16": np.dtype("<u2"),
    "uint32": np.dtype("<u4"),
    "uint64": np.dtype("<u8"),
    "float16": np.dtype("<f2"),
    "float32": np.dtype("<f4"),
    "float64": np.dtype("<f8"),
    "longdouble": np.dtype(np.longdouble),
    "complex64": np.dtype("<c8"),
    "complex128": np.dtype("<c16"),
    "clongdouble": np.dtype(np.clongdouble),
    "datetime64[ns]": np.dtype("<M8[ns]"),
    "datetime64[us]": np.dtype("<M8[us]"),
    "datetime64[s]": np.dtype("<M8[s]"),
    "datetime64[D]": np.dtype("<M8[D]"),
    "datetime64[Y]": np.dtype("<M8[Y]"),
    "datetime64-generic": np.dtype("M8"),
    "timedelta64[ms]": np.dtype("<m8[ms]"),
    "timedelta64[h]": np.dtype("<m8[h]"),
    "timedelta64[25s]": np.dtype("<m8[25s]"),
    "bytes-S5": np.dtype("S5"),
    "unicode-U7": np.dtype("<U7"),
    "void-V8": np.dtype("V8"),
    "structured": np.dtype([("a", "<i4"), ("b", "<f8"), ("c", "S3")]),
    "structured-subarray": np.dtype([("p", "<f4", (2, 3)), ("q", "u1")]),
    "nested-structured": np.dtype([("pt", [("x", "<f4"), ("y", "<f4")]), ("n", "<i2", (3,)), ("name", "<U4")]),
    "aligned-structured": np.dtype({"names": ["a", "b", "c"], "formats": ["u1", "<f8", "<i2"]}, align=True),
    "offsets-structured": np.dtype({"names": ["a", "b"], "formats": ["<i2", "<i4"], "offsets": [0, 8], "itemsize": 16}),
    "big-int16": np.dtype(">i2"),
    "big-int32": np.dtype(">i4"),
    "big-uint64": np.dtype(">u8"),
    "big-float32": np.dtype(">f4"),
    "big-float64": np.dtype(">f8"),
    "big-complex128": np.dtype(">c16"),
    "big-datetime64[ms]": np.dtype(">M8[ms]"),
    "big-timedelta64[us]": np.dtype(">m8[us]"),
    "big-unicode-U3": np.dtype(">U3"),
    "big-structured": np.dtype([("a", ">i4"), ("b", ">f8"), ("c", "<u2")]),
}

SHAPES = [(), (0,), (7,), (3, 4), (2, 3, 4), (0, 3), (2, 0, 3)]


def sample(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """An array of ``dtype`` and ``shape`` with varied, valid values."""
    if dtype.subdtype is not None:
        base, sub = dtype.subdtype
        return sample(base, shape + sub, rng)
    if dtype.names is not None:
        out = np.zeros(shape, dtype=dtype)
        for name in dtype.names:
            out[name] = sample(dtype.fields[name][0], shape, rng)
        return out
    size = int(np.prod(shape, dtype=np.int64))
    kind = dtype.kind
    if kind == "b":
        flat = rng.integers(0, 2, size).astype(bool)
    elif kind in "iu":
        info = np.iinfo(dtype)
        flat = rng.integers(info.min, info.max, size, endpoint=True, dtype=dtype.newbyteorder("="))
    elif kind == "f":
        flat = (rng.standard_normal(size) * 1e3).astype(dtype)
        specials = np.array([np.nan, -0.0, np.inf, -np.inf], dtype=dtype)
        flat[: min(size, 4)] = specials[: min(size, 4)]
    elif kind == "c":
        flat = (rng.standard_normal(size) + 1j * rng.standard_normal(size)).astype(dtype)
        if size:
            flat[0] = complex(np.nan, -0.0)
    elif kind in "mM":
        flat = rng.integers(-(10**6), 10**6, size).astype(np.int64).view(dtype.newbyteorder("="))
        if size > 1:
            flat[1] = np.array("NaT", dtype=dtype.newbyteorder("="))
    elif kind == "S":
        flat = np.array(
            [bytes(rng.integers(1, 128, rng.integers(0, dtype.itemsize + 1)).astype(np.uint8)) for _ in range(size)],
            dtype=dtype,
        )
    elif kind == "U":
        alphabet = list("abcxyzé✓🙂αβ")
        flat = np.array(
            ["".join(rng.choice(alphabet, rng.integers(0, dtype.itemsize // 4 + 1))) for _ in range(size)], dtype=dtype
        )
    elif kind == "V":
        flat = np.frombuffer(rng.bytes(size * dtype.itemsize), dtype=dtype).copy()
    else:
        raise AssertionError(f"no sampler for {dtype!r}")
    return np.asarray(flat, dtype=dtype).reshape(shape)


def assert_array_roundtrip(original: np.ndarray, got: np.ndarray) -> None:
    assert type(got) is np.ndarray
    assert got.dtype == original.dtype, f"{got.dtype!r} != {original.dtype!r}"
    assert got.dtype.str == original.dtype.str
    assert got.dtype.descr == original.dtype.descr
    assert got.dtype.itemsize == original.dtype.itemsize
    assert got.shape == original.shape
    assert _value_bytes(got) == _value_bytes(original)


def _value_bytes(arr: np.ndarray) -> list[bytes]:
    """The bytes of every field in C order: exact (NaN payloads included), and blind to the
    padding bytes of structured dtypes, which numpy leaves uninitialised when it copies."""
    if arr.dtype.names is None:
        return [arr.tobytes(order="C")]
    out: list[bytes] = []
    for name in arr.dtype.names:
        out.extend(_value_bytes(arr[name]))
    return out


def roundtrip(obj, **options):
    return freight.loads(freight.dumps(obj), **options)


def _frame_array(frame) -> np.ndarray:
    """The memory of a frame (any buffer) as a numpy array, without copying."""
    try:
        return np.frombuffer(frame, dtype=np.uint8)
    except (ValueError, TypeError, BufferError):
        return np.asarray(memoryview(frame))  # an N-d or Fortran-ordered buffer


def _address(frame) -> int:
    return _frame_array(frame).__array_interface__["data"][0]


def _shares(frame, arr: np.ndarray) -> bool:
    view = _frame_array(frame)
    return view.size > 0 and np.shares_memory(view, arr)


# --------------------------------------------------------------------------------------------
# Every dtype, every shape
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
@pytest.mark.parametrize("name", list(DTYPES))
def test_every_dtype_and_shape_roundtrips(name, shape):
    rng = np.random.default_rng(RNG_SEED)
    arr = sample(DTYPES[name], shape, rng)
    got = roundtrip(arr)
    assert_array_roundtrip(arr, got)
    assert got.flags.writeable
    assert got.flags.c_contiguous
    got_frames = freight.loads_frames(freight.dumps_frames(arr))
    assert_array_roundtrip(arr, got_frames)


@pytest.mark.parametrize("name", list(DTYPES))
def test_every_dtype_in_fortran_order(name):
    rng = np.random.default_rng(RNG_SEED)
    arr = np.asfortranarray(sample(DTYPES[name], (3, 4, 2), rng))
    assert arr.flags.f_contiguous and not arr.flags.c_contiguous
    got = roundtrip(arr)
    assert_array_roundtrip(arr, got)
    assert got.flags.f_contiguous and not got.flags.c_contiguous
    assert got.flags.writeable
    got = freight.loads_frames(freight.dumps_frames(arr))
    assert_array_roundtrip(arr, got)
    assert got.flags.f_contiguous


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[::2],
        lambda a: a[:, ::-1],
        lambda a: a[1:, 1:3, ::2],
        lambda a: a.transpose(1, 0, 2),
        lambda a: a[..., 0],
        lambda a: np.lib.stride_tricks.as_strided(a, shape=(2, 2), strides=(a.strides[0], a.strides[1] * 2)),
    ],
    ids=["every-other", "reversed", "slice", "axes-swapped", "last-index", "as-strided"],
)
@pytest.mark.parametrize(
    "name", ["float64", "int16", "big-float64", "structured", "unicode-U7", "complex64", "datetime64[ns]"]
)
def test_non_contiguous_views_come_back_contiguous(name, view):
    rng = np.random.default_rng(RNG_SEED)
    base = sample(DTYPES[name], (4, 5, 6), rng)
    arr = view(base)
    got = roundtrip(arr)
    assert_array_roundtrip(arr, got)
    assert got.flags.c_contiguous or got.flags.f_contiguous
    assert got.flags.writeable == arr.flags.writeable
    assert not np.shares_memory(got, base)
    got = freight.loads_frames(freight.dumps_frames(arr))
    assert_array_roundtrip(arr, got)


@pytest.mark.parametrize("name", ["float64", "bool", "structured", "datetime64[D]", "bytes-S5"])
def test_writeable_flag_is_kept(name):
    rng = np.random.default_rng(RNG_SEED)
    writable = sample(DTYPES[name], (5, 3), rng)
    readonly = writable.copy()
    readonly.flags.writeable = False
    readonly_view = readonly[::2]
    for source in (bytes, bytearray, memoryview):
        got_w, got_r, got_rv = freight.loads(source(freight.dumps([writable, readonly, readonly_view])))
        assert got_w.flags.writeable, source
        assert not got_r.flags.writeable, source
        assert not got_rv.flags.writeable, source
        assert_array_roundtrip(readonly_view, got_rv)
    got_w, got_r = freight.loads_frames(freight.dumps_frames([writable, readonly]))
    assert got_w.flags.writeable and not got_r.flags.writeable


def test_unaligned_and_zero_strided_arrays():
    raw = b"\x00" + np.arange(10, dtype="<f8").tobytes()
    unaligned = np.frombuffer(raw, dtype="<f8", offset=1)
    assert not unaligned.flags.aligned
    got = roundtrip(unaligned)
    assert_array_roundtrip(unaligned, got)
    assert not got.flags.writeable  # frombuffer over bytes is read-only, and so is the result
    zero_strided = np.lib.stride_tricks.as_strided(np.arange(3.0), shape=(4, 3), strides=(0, 8))
    got = roundtrip(zero_strided)
    assert_array_roundtrip(zero_strided, got)


def test_zero_d_arrays_are_arrays_not_scalars():
    for value in (np.array(5.0), np.array(b"xy"), np.array(("a", 1), dtype=[("s", "U1"), ("i", "i4")])):
        got = roundtrip(value)
        assert type(got) is np.ndarray and got.shape == ()
        assert_array_roundtrip(value, got)


@pytest.mark.parametrize(
    "scalar",
    [
        np.float32(1.5),
        np.float16(-0.0),
        np.int8(-3),
        np.uint64(2**64 - 1),
        np.complex64(1 - 2j),
        np.bool_(False),
        np.datetime64("2021-03-04", "D"),
        np.timedelta64(5, "h"),
        np.str_("é"),
        np.bytes_(b"x"),
        np.longdouble(1) / 3,
        np.void(b"\x01\x02"),
    ],
    ids=lambda s: type(s).__name__,
)
def test_numpy_scalars_keep_their_type(scalar):
    got = roundtrip(scalar)
    assert type(got) is type(scalar)
    assert got.dtype == scalar.dtype
    assert got.tobytes() == scalar.tobytes()


# --------------------------------------------------------------------------------------------
# Zero copy
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("writeable", [True, False])
def test_dumps_frames_does_not_copy_array_data(order, writeable):
    arr = np.asarray(np.arange(1 << 16, dtype=np.float64).reshape(256, 256), order=order)
    arr.flags.writeable = writeable
    frames = freight.dumps_frames(arr)
    assert len(frames) >= 2
    data_frames = [f for f in frames[1:] if _shares(f, arr)]
    assert data_frames, "no frame of dumps_frames(arr) is a view of the array's memory"
    assert any(_address(f) == arr.__array_interface__["data"][0] for f in data_frames)
    assert freight.loads_frames(frames).tobytes(order="A") == arr.tobytes(order="A")


def test_dumps_frames_of_nested_arrays_are_views():
    arrays = [np.arange(10_000, dtype=np.int32), np.ones((100, 100)), np.zeros(5000, dtype=np.complex64)]
    obj = {"a": arrays[0], "l": [arrays[1], {"b": arrays[2]}]}
    frames = freight.dumps_frames(obj)
    assert len(frames) >= 1 + len(arrays)
    for arr in arrays:
        assert any(_shares(f, arr) for f in frames[1:]), f"no frame views the {arr.dtype} array"


def test_loads_zero_copy_returns_read_only_views_of_the_input():
    arr = np.arange(100_000, dtype=np.float64)
    blob = freight.dumps(arr)
    blob_view = np.frombuffer(blob, dtype=np.uint8)
    got = freight.loads(blob, zero_copy=True)
    assert np.array_equal(got, arr)
    assert not got.flags.writeable
    assert np.shares_memory(got, blob_view)
    # Frames start at 64-byte aligned offsets from the start of the payload.
    assert (got.__array_interface__["data"][0] - _address(blob)) % 64 == 0
    codec = freight.Freight(zero_copy=True)
    got = codec.loads(blob)
    assert np.shares_memory(got, blob_view) and not got.flags.writeable


def test_zero_copy_from_a_bytearray_is_still_read_only():
    arr = np.arange(10_000, dtype=np.int64)
    buf = bytearray(freight.dumps(arr))
    got = freight.loads(buf, zero_copy=True)
    assert np.array_equal(got, arr)
    assert not got.flags.writeable


def test_default_loads_of_bytes_returns_a_writable_copy():
    arr = np.arange(100_000, dtype=np.float64)
    blob = freight.dumps(arr)
    got = freight.loads(blob)
    assert got.flags.writeable
    assert not np.shares_memory(got, np.frombuffer(blob, dtype=np.uint8))
    got[0] = 42.0  # writing to it does not touch the payload
    assert np.array_equal(freight.loads(blob), arr)


def test_loads_of_a_bytearray_may_return_a_writable_view():
    arr = np.arange(100_000, dtype=np.float64)
    buf = bytearray(freight.dumps(arr))
    got = freight.loads(buf)
    assert got.flags.writeable
    assert np.array_equal(got, arr)
    got[:] = -1.0
    assert (got == -1.0).all()


def test_dumps_copies_each_frame_once_into_a_tight_payload():
    arr = np.arange(1 << 20, dtype=np.float64)
    blob = freight.dumps(arr)
    assert arr.nbytes <= len(blob) < arr.nbytes + 4096
    assert np.array_equal(freight.loads(blob), arr)


# --------------------------------------------------------------------------------------------
# Arrays inside containers and objects
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Experiment:
    name: str
    data: np.ndarray
    extra: dict


def test_arrays_nested_in_containers_roundtrip():
    rng = np.random.default_rng(RNG_SEED)
    obj = {
        "a": sample(DTYPES["float32"], (10, 10), rng),
        "l": [sample(DTYPES["int16"], (5,), rng), {"b": sample(DTYPES["structured"], (3,), rng)}],
        "t": (sample(DTYPES["big-float64"], (2, 2), rng),),
    }
    got = roundtrip(obj)
    assert_array_roundtrip(obj["a"], got["a"])
    assert_array_roundtrip(obj["l"][0], got["l"][0])
    assert_array_roundtrip(obj["l"][1]["b"], got["l"][1]["b"])
    assert_array_roundtrip(obj["t"][0], got["t"][0])


def test_array_inside_a_dataclass_still_travels_as_a_frame():
    arr = np.arange(50_000, dtype=np.float64)
    exp = Experiment("run-1", arr, {"more": np.ones(20_000, dtype=np.int32)})
    frames = freight.dumps_frames(exp)
    assert len(frames) > 1
    assert any(_shares(f, arr) for f in frames[1:]), "the dataclass's array was copied into the pickle stream"
    assert any(_shares(f, exp.extra["more"]) for f in frames[1:])
    got = freight.loads_frames(frames)
    assert type(got) is Experiment and got.name == "run-1"
    assert np.array_equal(got.data, arr) and np.array_equal(got.extra["more"], exp.extra["more"])
    got = roundtrip(exp)
    assert np.array_equal(got.data, arr) and got.data.flags.writeable
    # The pickle stream does not hold the array bytes.
    assert len(freight.dumps(exp)) < arr.nbytes + exp.extra["more"].nbytes + 4096


def test_same_array_twice_is_one_array():
    arr = np.arange(1000.0)
    got = roundtrip([arr, {"again": arr}, Experiment("e", arr, {})])
    assert got[0] is got[1]["again"] is got[2].data


# --------------------------------------------------------------------------------------------
# Object arrays and inspect
# --------------------------------------------------------------------------------------------


def _needs_pickle(info: dict) -> bool:
    for key in ("needs_pickle", "pickle", "unsafe"):
        if key in info:
            return bool(info[key])
    flags = info.get("flags")
    if isinstance(flags, dict):
        return bool(flags.get("needs_pickle"))
    if isinstance(flags, (list, tuple, set)):
        return "needs_pickle" in flags
    raise AssertionError(f"freight.inspect() reports no pickle flag: {sorted(info)}")


def test_object_arrays_are_flagged_as_needing_pickle():
    obj_arr = np.array([1, "two", None, [3]], dtype=object)
    blob = freight.dumps(obj_arr)
    assert _needs_pickle(freight.inspect(blob))
    assert _needs_pickle(freight.inspect(freight.dumps_frames(obj_arr)))
    got = freight.loads(blob)
    assert got.dtype == object and list(got) == list(obj_arr)
    with pytest.raises(freight.UnsafePayloadError):
        freight.loads(blob, allow_pickle=False)


def test_numeric_arrays_are_not_flagged_as_needing_pickle():
    blob = freight.dumps({"a": np.arange(10), "b": np.zeros((3, 3), dtype=[("x", "f4")])})
    assert not _needs_pickle(freight.inspect(blob))
    freight.loads(blob, allow_pickle=False)


def test_structured_dtype_with_object_field_needs_pickle():
    arr = np.zeros(3, dtype=[("a", "i4"), ("o", "O")])
    arr["o"] = [None, "x", [1]]
    blob = freight.dumps(arr)
    assert _needs_pickle(freight.inspect(blob))
    got = freight.loads(blob)
    assert got["o"].tolist() == [None, "x", [1]] and got["a"].tolist() == [0, 0, 0]
    with pytest.raises(freight.UnsafePayloadError):
        freight.loads(blob, allow_pickle=False)
