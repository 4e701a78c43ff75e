"""Property tests over pandas objects: for generated DataFrames, Series and Index objects, every
payload ``freight.dumps`` (and ``dumps_frames``) writes, ``freight.loads`` (``loads_frames``,
zero-copy too) reads, and gives what pickle's round trip gives: classes, dtypes (zones
included), values (floats bit for bit, object cells of the same types), labels of every axis and
level, ``freq``, ``attrs``, ``flags``. Drawn as ``pandas._testing`` builds them: columns of every
extension dtype (nullable, str/string in both storages and NA kinds, categorical, datetime of
every unit and tz across DST, timedelta, period, interval, sparse, ArrowDtype) and numpy ones
(object cells of mixed Python objects, None/NaN/NaT/NA); indexes of every kind; column labels of
any type, with a name; frames consolidated or built column by column (many non-contiguous
blocks), sliced or not. ``event`` lines show what was drawn (``--hypothesis-show-statistics``).

Examples per property: ``FREIGHT_FIDELITY_EXAMPLES`` (default 40, as in
``test_fidelity_properties.py``); ``make fuzz`` sets it higher.
"""

from __future__ import annotations

import datetime
import decimal
import inspect
import os
import pickle
import warnings
import zoneinfo
from typing import Any

import dateutil.tz
import hypothesis.strategies as st
import numpy as np
import pandas as pd
import pandas._testing as tm
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings

import freight
from test_fidelity_compare import assert_same
from test_hostile_libraries import forge  # forge: metadata under a built-in tag

EXAMPLES = int(os.environ.get("FREIGHT_FIDELITY_EXAMPLES", "40"))
# No deadline: behaviour is asserted, not time (a first draw imports pyarrow's kernels).
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]
fidelity = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=_HEALTH)

# -- The comparison -------------------------------------------------------------------------------
# freight's result against pickle's, stricter than pandas' own where pandas' is loose (1 == 1.0 ==
# True in object columns, -0.0 == 0.0, a label's type, the zone of equal dtypes).

_STRICT = dict(check_exact=True, check_dtype=True, check_index_type=True, check_categorical=True)
# pandas 3 asks for it (and warns without it); pandas 2 has no such keyword. Checked below anyway.
_INDEX_FREQ = {"check_freq": True} if "check_freq" in inspect.signature(tm.assert_index_equal).parameters else {}


def assert_pandas_same(want: Any, got: Any, path: str = "obj") -> None:
    assert type(got) is type(want), f"{path}: type {type(got)} != {type(want)}"
    if isinstance(want, pd.DataFrame):
        tm.assert_frame_equal(
            _comparable(got), _comparable(want), check_column_type=True, check_freq=True, check_flags=True, **_STRICT
        )
        _index_same(want.index, got.index, f"{path}.index")
        _index_same(want.columns, got.columns, f"{path}.columns")
        for i in range(want.shape[1]):
            _array_same(want.iloc[:, i].array, got.iloc[:, i].array, f"{path}.iloc[:, {i}]")
    elif isinstance(want, pd.Series):
        tm.assert_series_equal(
            _comparable(got), _comparable(want), check_series_type=True, check_freq=True, check_flags=True, **_STRICT
        )
        _cell_same(want.name, got.name, f"{path}.name")
        _index_same(want.index, got.index, f"{path}.index")
        _array_same(want.array, got.array, f"{path}.array")
    else:
        _index_same(want, got, path)
    if not isinstance(want, pd.Index):
        assert got.attrs == want.attrs, f"{path}: attrs {got.attrs} != {want.attrs}"
        assert got.flags == want.flags, f"{path}: flags {got.flags} != {want.flags}"


def _comparable(obj: Any) -> Any:
    """What pandas' assertions compare: object cells, and the labels of an Arrow index, as their
    repr. pandas compares them with ``==``: a tuple holding NaN equals another only if both hold
    the same NaN object, which two loads never share, and an Arrow index holding NaN is unequal
    to itself (pickle's own two loads differ so). The values themselves are compared in
    _array_same (types, bits)."""
    if isinstance(obj, pd.MultiIndex) or not isinstance(obj, (pd.Index, pd.Series, pd.DataFrame)):
        return obj
    if isinstance(obj, pd.Index):
        if obj.dtype != object and not isinstance(obj.dtype, pd.ArrowDtype):
            return obj
        return pd.Index(np.array([repr(v) for v in obj], dtype=object), dtype=object, name=obj.name)
    out = obj.copy()
    if isinstance(obj, pd.Series):
        out = out.set_axis(_comparable(obj.index))
        return out if obj.dtype != object else pd.Series(_comparable(pd.Index(obj)), out.index, name=obj.name)
    out = out.set_axis(_comparable(obj.index), axis=0).set_axis(_comparable(obj.columns), axis=1)
    for i, dtype in enumerate(obj.dtypes):
        if isinstance(dtype, np.dtype) and dtype.kind == "O":
            out.isetitem(i, _comparable(pd.Index(obj.iloc[:, i])).to_numpy())
    return out


def _index_same(want: pd.Index, got: pd.Index, path: str) -> None:
    assert type(got) is type(want), f"{path}: type {type(got)} != {type(want)}"
    tm.assert_index_equal(
        _comparable(got), _comparable(want), exact=True, check_exact=True, check_categorical=True, **_INDEX_FREQ
    )
    _cell_same(list(want.names), list(got.names), f"{path}.names")
    assert getattr(got, "freq", None) == getattr(want, "freq", None), f"{path}: freq {got.freq} != {want.freq}"
    if isinstance(want, pd.RangeIndex):
        assert (got.start, got.stop, got.step) == (want.start, want.stop, want.step), f"{path}: range"
    elif isinstance(want, pd.MultiIndex):
        for i, (w, g) in enumerate(zip(want.levels, got.levels)):
            _index_same(w, g, f"{path}.levels[{i}]")
        for i, (w, g) in enumerate(zip(want.codes, got.codes)):
            assert np.array_equal(w, g), f"{path}.codes[{i}]"
    else:
        _array_same(want.array, got.array, f"{path}.array")


def _array_same(want: Any, got: Any, path: str) -> None:
    """One column's (or index's) values, beyond what pandas' equality looks at."""
    dtype = want.dtype
    assert type(got.dtype) is type(dtype) and got.dtype == dtype, f"{path}: dtype {got.dtype!r} != {dtype!r}"
    assert str(got.dtype) == str(dtype), f"{path}: dtype {got.dtype} != {dtype}"
    zone = _zone(dtype)  # equal dtypes may hold different zones (ZoneInfo("UTC"), timezone.utc)
    assert (type(_zone(got.dtype)), repr(_zone(got.dtype))) == (type(zone), repr(zone)), f"{path}: zone"
    if isinstance(dtype, pd.CategoricalDtype):
        _index_same(dtype.categories, got.dtype.categories, f"{path}.categories")
        assert dtype.ordered == got.dtype.ordered, f"{path}: ordered"
    elif isinstance(dtype, pd.SparseDtype):
        assert_same(want.fill_value, got.fill_value, f"{path}.fill_value")
        assert want.kind == got.kind, f"{path}: kind {got.kind} != {want.kind}"
        assert np.array_equal(want.sp_index.indices, got.sp_index.indices), f"{path}: sparse positions"
        _numpy_same(np.asarray(want.sp_values), np.asarray(got.sp_values), f"{path}.sp_values")
    elif isinstance(dtype, pd.IntervalDtype):
        _array_same(want.left, got.left, f"{path}.left")
        _array_same(want.right, got.right, f"{path}.right")
    elif isinstance(dtype, pd.ArrowDtype):
        assert_same(want._pa_array, got._pa_array, f"{path}._pa_array")
    elif isinstance(dtype, pd.StringDtype):
        for i, (w, g) in enumerate(zip(want, got)):
            _cell_same(w, g, f"{path}[{i}]")
    elif hasattr(want, "_mask"):  # nullable ints, floats, booleans: the values under no mask
        assert np.array_equal(want._mask, got._mask), f"{path}: mask"
        _numpy_same(want._data[~want._mask], got._data[~got._mask], f"{path}._data")
    else:
        _numpy_same(np.asarray(want), np.asarray(got), path)


def _zone(dtype: Any) -> Any:
    return getattr(getattr(dtype, "subtype", dtype), "tz", None)


def _numpy_same(want: np.ndarray, got: np.ndarray, path: str) -> None:
    assert got.dtype == want.dtype, f"{path}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind == "O":
        for i, (w, g) in enumerate(zip(want.tolist(), got.tolist())):
            _cell_same(w, g, f"{path}[{i}]")
    else:
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(), f"{path}: values"


def _cell_same(want: Any, got: Any, path: str) -> None:
    """An object cell: its type, and its value where ``==`` cannot tell (NaT and NA are never
    equal to themselves, nor a Decimal NaN)."""
    assert type(got) is type(want), f"{path}: type {type(got)} != {type(want)}"
    if want is pd.NaT or want is pd.NA:
        assert got is want, f"{path}: {got!r} is not {want!r}"
    elif isinstance(want, decimal.Decimal):
        assert want.as_tuple() == got.as_tuple(), f"{path}: {got!r} != {want!r}"
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (w, g) in enumerate(zip(want, got)):
            _cell_same(w, g, f"{path}[{i}]")
    else:
        assert_same(want, got, path)


def check(obj: Any) -> None:
    """Pickle's round trip first (a value it cannot round-trip is excluded from the strategies,
    with a comment there); then freight's, in one payload and in frames."""
    want = pickle.loads(pickle.dumps(obj, protocol=5))
    payload = freight.dumps(obj)
    assert_pandas_same(want, freight.loads(payload))
    assert_pandas_same(want, freight.loads(payload, zero_copy=True))  # over the payload's memory
    assert_pandas_same(want, freight.loads_frames(freight.dumps_frames(obj)))


# -- Values ----------------------------------------------------------------------------------------

_INT64 = st.integers(-(2**63) + 1, 2**63 - 1)  # min int64 is NaT: drawn apart
_UNITS = ["s", "ms", "us", "ns"]  # what pandas stores datetimes in
# Not "dateutil/UTC": pickle's copy of that zone is no longer pandas' UTC (pandas knows it by
# identity), so pickle's own round trip gives an unequal dtype. ZoneInfo("UTC") is not
# timezone.utc, though their dtypes compare equal; "XYZ" is a name pandas cannot parse back.
_ZONES = ["UTC", "US/Eastern", "Europe/London", "Asia/Kolkata", "dateutil/Europe/Berlin", zoneinfo.ZoneInfo("UTC")]
_ZONES += [zoneinfo.ZoneInfo("America/Santiago"), datetime.timezone.utc, dateutil.tz.tzlocal()]
_ZONES += [datetime.timezone(datetime.timedelta(hours=-3.5)), datetime.timezone(datetime.timedelta(hours=2), "XYZ")]
_ZONES += [dateutil.tz.tzoffset("X", 3600)]
# Times around US and EU DST changes (nanoseconds since the epoch), and anywhere.
_DST = [1615705200, 1636264800, 1616893200, 1635645600]
_near_dst = st.builds(lambda base, s: (base + s) * 10**9, st.sampled_from(_DST), st.integers(-7200, 7200))
_instants = st.one_of(_near_dst, st.integers(-(2**62), 2**62))
_texts = st.text(max_size=4)
# Python storage keeps lone surrogates (pyarrow's UTF-8 cannot).
_any_texts = st.text(st.characters(blacklist_categories=()), max_size=4)
_floats = st.one_of(st.floats(), st.sampled_from([-0.0, float("nan"), float("inf")]))
_objects = st.one_of(
    st.sampled_from([*tm.NULL_OBJECTS, *tm.NP_NAT_OBJECTS[:3], np.float64(1.5), np.int32(-2), True]),
    *(st.integers(), _floats, _any_texts, st.binary(max_size=3), st.tuples(st.integers(-3, 3), _texts)),
    st.decimals(allow_nan=False, places=2, max_value=10**6, min_value=-(10**6)),
    st.builds(pd.Timestamp, st.integers(-(10**17), 10**17), tz=st.sampled_from([None, "UTC", "US/Eastern"])),
    st.builds(pd.Timedelta, st.integers(-(10**15), 10**15)),
    st.builds(pd.Period, st.just("2020-01"), freq=st.sampled_from(["M", "D"])),
    st.dictionaries(_texts, st.integers(), max_size=2),
)


def _float_items(dtype: np.dtype) -> st.SearchStrategy[float]:
    # float32 columns of floats float32 holds (numpy warns casting others to inf).
    return _floats if dtype.itemsize == 8 else st.floats(width=32)


def _masks(n: int) -> st.SearchStrategy[np.ndarray]:
    return st.lists(st.booleans(), min_size=n, max_size=n).map(lambda m: np.array(m, dtype=bool))


def _lists(n: int, elements: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    return st.lists(elements, min_size=n, max_size=n)


def _with_nat(draw: Any, values: list[int]) -> np.ndarray:
    out = np.array(values, dtype=np.int64)
    out[draw(_masks(len(values)))] = np.iinfo(np.int64).min
    return out


def _nullable(draw, n):
    """Nullable ints, floats (NaN apart from NA), booleans: values (any under the mask) and mask."""
    dtype = pd.api.types.pandas_dtype(draw(st.sampled_from([*tm.ALL_INT_EA_DTYPES, *tm.FLOAT_EA_DTYPES, "boolean"])))
    kind = dtype.numpy_dtype.kind
    if kind in "iu":
        info = np.iinfo(dtype.numpy_dtype)
        items = st.integers(int(info.min), int(info.max))
    else:
        items = st.booleans() if kind == "b" else _float_items(dtype.numpy_dtype)
    values = np.array(draw(_lists(n, items)), dtype=dtype.numpy_dtype)
    return dtype.construct_array_type()(values, draw(_masks(n)))


def _strings(draw, n):
    storage, na = draw(st.sampled_from(["python", "pyarrow"])), draw(st.sampled_from([pd.NA, np.nan]))
    values = draw(_lists(n, st.one_of(st.none(), _any_texts if storage == "python" else _texts)))
    return pd.array(values, dtype=pd.StringDtype(storage, na_value=na))


def _categorical(draw, n):
    kind = draw(st.sampled_from(["object", "int", "str", "float", "datetime"]))
    if kind == "datetime":
        start = pd.Timestamp(draw(st.sampled_from(_DST)), unit="s", tz="UTC").tz_convert(draw(st.sampled_from(_ZONES)))
        index = pd.date_range(start, periods=draw(st.integers(0, 5)), freq="h")
    else:
        items = {"object": st.one_of(st.integers(-5, 5), _texts), "int": st.integers(), "str": _texts}
        categories = draw(st.lists(items.get(kind, st.floats(allow_nan=False)), unique=True, max_size=5))
        index = pd.Index(categories, dtype=object if kind == "object" else None)
    codes = draw(_lists(n, st.integers(-1, len(index) - 1)))
    dtype = pd.CategoricalDtype(index, ordered=draw(st.booleans()))
    return pd.Categorical.from_codes(codes, dtype=dtype)


def _datetimes(draw, n):
    unit = draw(st.sampled_from(_UNITS))
    scale = 10 ** (9 - 3 * _UNITS.index(unit))  # the instants are in nanoseconds
    values = _with_nat(draw, [v // scale for v in draw(_lists(n, _instants))])
    naive = pd.arrays.DatetimeArray._simple_new(values.view(f"M8[{unit}]"), dtype=np.dtype(f"M8[{unit}]"))
    zone = draw(st.sampled_from([None, *_ZONES]))
    return naive if zone is None else naive.tz_localize("UTC").tz_convert(zone)


def _timedeltas(draw, n):
    unit = draw(st.sampled_from(_UNITS))
    values = _with_nat(draw, draw(_lists(n, st.integers(-(2**62), 2**62))))
    return pd.arrays.TimedeltaArray._simple_new(values.view(f"m8[{unit}]"), dtype=np.dtype(f"m8[{unit}]"))


# Not "B": pandas deprecates business-day periods (a FutureWarning on creation).
_PERIOD_FREQS = ["D", "M", "Q-DEC", "Q-MAR", "Y-DEC", "h", "min", "s", "ms", "W-SUN"]


def _periods(draw, n):
    values = _with_nat(draw, draw(_lists(n, st.integers(-(10**5), 10**5))))
    return pd.arrays.PeriodArray(values, dtype=pd.PeriodDtype(draw(st.sampled_from(_PERIOD_FREQS))))


def _intervals(draw, n):
    closed = draw(st.sampled_from(["left", "right", "both", "neither"]))
    subtype = draw(st.sampled_from(["int64", "float64", "datetime64[ns]", "timedelta64[ns]", "tz"]))
    pairs = draw(_lists(n, st.tuples(st.integers(-(10**9), 10**9), st.integers(0, 10**6))))
    left = np.array([a for a, _ in pairs], dtype=np.int64)
    right = left + np.array([b for _, b in pairs], dtype=np.int64)
    if subtype == "float64":  # missing intervals need a float (or datetime) subtype
        missing = draw(_masks(n))
        left, right = left.astype(float), right.astype(float)
        left[missing] = right[missing] = np.nan
    elif subtype == "tz":
        zone = draw(st.sampled_from(_ZONES))
        left, right = (pd.DatetimeIndex(a.view("M8[ns]")).tz_localize("UTC").tz_convert(zone) for a in (left, right))
    else:
        left, right = left.astype(subtype), right.astype(subtype)
    return pd.arrays.IntervalArray.from_arrays(left, right, closed=closed)


_SPARSE = [("float64", np.nan, _floats), ("float64", 0.0, _floats), ("int64", 0, _INT64)]
_SPARSE += [("int64", -1, st.integers(-2, 2)), ("bool", False, st.booleans()), ("bool", True, st.booleans())]
_SPARSE += [("datetime64[ns]", np.datetime64("NaT", "ns"), st.integers(-(2**62), 2**62)), ("object", None, _objects)]


def _sparse(draw, n):
    subtype, fill, items = draw(st.sampled_from(_SPARSE))
    values = draw(_lists(n, st.one_of(st.just(fill), items)))
    if subtype.startswith("datetime"):
        values = [np.datetime64("NaT", "ns") if v is fill else np.datetime64(v, "ns") for v in values]
    dense = np.empty(n, dtype=subtype)
    dense[:] = values if n else dense
    kind = draw(st.sampled_from(["integer", "block"]))
    with warnings.catch_warnings():  # pandas warns of zones in object values, which it keeps
        warnings.filterwarnings("ignore", "Creating SparseArray from datetime64", UserWarning)
        return pd.arrays.SparseArray(dense, fill_value=fill, kind=kind, dtype=pd.SparseDtype(subtype, fill))


_small = st.integers(-9, 9)
_ARROW = [
    (pa.int64(), _INT64),
    (pa.int8(), st.integers(-128, 127)),
    (pa.uint32(), st.integers(0, 2**32 - 1)),
    (pa.float64(), _floats),
    (pa.string(), _texts),
    (pa.large_string(), _texts),
    (pa.bool_(), st.booleans()),
    (pa.binary(), st.binary(max_size=3)),
    (pa.list_(pa.int64()), st.lists(st.none() | _small, max_size=3)),
    (pa.large_list(pa.string()), st.lists(st.one_of(st.none(), _texts), max_size=3)),
    (pa.struct([("a", pa.int32()), ("b", pa.string())]), st.fixed_dictionaries({"a": st.none() | _small, "b": _texts})),
    (pa.decimal128(10, 2), st.decimals(places=2, min_value=-(10**7), max_value=10**7, allow_nan=False)),
    (pa.dictionary(pa.int32(), pa.string()), st.sampled_from(["a", "b", "c", ""])),
    # Temporal types from integers, within Python's dates (pandas prints Arrow values through them).
    (pa.timestamp("us", tz="US/Eastern"), st.integers(-(2**50), 2**50)),
    (pa.timestamp("ns"), st.integers(-(2**62), 2**62)),
    (pa.timestamp("s", tz="UTC"), st.integers(-(6 * 10**10), 2 * 10**11)),
    (pa.date32(), st.integers(-700_000, 2_900_000)),
    (pa.duration("ms"), st.integers(-(8 * 10**16), 8 * 10**16)),
    (pa.time64("us"), st.integers(0, 86400 * 10**6 - 1)),
]


def _arrow(draw, n):
    arrow_type, items = draw(st.sampled_from(_ARROW))
    values = draw(_lists(n, st.one_of(st.none(), items)))
    if pa.types.is_temporal(arrow_type):  # from their integers, cast
        array = pa.array(values, pa.int64() if arrow_type.bit_width == 64 else pa.int32()).cast(arrow_type)
    elif pa.types.is_dictionary(arrow_type):
        array = pa.array(values, pa.string()).dictionary_encode().cast(arrow_type)
    else:
        array = pa.array(values, arrow_type)
    cut = draw(st.integers(0, n))  # one or two chunks
    chunks = [array] if cut in (0, n) else [array.slice(0, cut), array.slice(cut)]
    return pd.arrays.ArrowExtensionArray(pa.chunked_array(chunks, arrow_type))


_NUMPY = ["int8", "int16", "int32", "int64", "uint8", "uint64", "float32", "float64", "bool", "complex128"]


def _numpy(draw, n, dtype=None):
    dtype = np.dtype(draw(st.sampled_from(_NUMPY))) if dtype is None else dtype
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        items = st.integers(int(info.min), int(info.max))
    else:
        items = {"b": st.booleans(), "c": st.complex_numbers(), "f": _float_items(dtype)}[dtype.kind]
    return np.array(draw(_lists(n, items)), dtype=dtype)


def _numpy_time(draw, n):
    dtype = np.dtype(f"{draw(st.sampled_from('Mm'))}8[{draw(st.sampled_from(_UNITS))}]")
    return _with_nat(draw, draw(_lists(n, st.integers(-(2**62), 2**62)))).view(dtype)


def _objects_column(draw, n):
    values = np.empty(n, dtype=object)
    values[:] = draw(_lists(n, _objects)) if n else values  # cells as they are (tuples too)
    return values


KINDS = {"nullable": _nullable, "string": _strings}
KINDS |= {"category": _categorical, "datetime": _datetimes, "timedelta": _timedeltas, "period": _periods}
KINDS |= {"interval": _intervals, "sparse": _sparse, "arrow": _arrow, "numpy": _numpy}
KINDS |= {"numpy time": _numpy_time, "object": _objects_column}


def column(draw, n: int) -> Any:
    kind = draw(st.sampled_from(sorted(KINDS)))
    values = KINDS[kind](draw, n)
    event(f"column {kind}: {values.dtype}")  # what was drawn (--hypothesis-show-statistics)
    return values


# -- Labels ----------------------------------------------------------------------------------------

_names = st.one_of(st.none(), _texts, st.integers(-3, 3), st.tuples(st.integers(0, 2), _texts), st.just(np.nan))


def index(draw, n: int) -> pd.Index:
    kind = draw(st.sampled_from(["range", "multi", "datetime", "timedelta", "period", "interval", "labels", "any"]))
    name = draw(_names)
    event(f"index {kind}")
    if kind == "range":
        start, step = draw(st.integers(-10, 10)), draw(st.sampled_from([1, 2, -1, -3, 7]))
        return pd.RangeIndex(start, start + step * n, step, name=name)
    if kind == "multi":
        levels = [draw(_label_values(n)) for _ in range(draw(st.integers(1, 3)))]
        return pd.MultiIndex.from_arrays(levels, names=[draw(_names) for _ in levels])
    if kind == "datetime":
        unit, zone = draw(st.sampled_from(_UNITS)), draw(st.sampled_from([None, *_ZONES]))
        freq = draw(st.sampled_from(["D", "h", "min", "s", "ms", "B", "W-SUN", "MS", "ME", "QE-DEC", "7D", None]))
        if freq == "ms" and unit == "s":  # pandas refuses a frequency finer than the unit
            unit = "ms"
        start = pd.Timestamp(draw(st.sampled_from(_DST)) + 900 * draw(st.integers(-12, 12)), unit="s")
        # Made in UTC and converted: pandas refuses wall times a zone's DST change repeats or skips.
        rows = pd.date_range(start, periods=n, freq=freq, unit=unit, name=name)
        return rows if zone is None else rows.tz_localize("UTC").tz_convert(zone)
    if kind == "timedelta":
        freq = draw(st.sampled_from(["D", "h", "s", "ms", "3h"]))
        return pd.timedelta_range("-1 day", periods=n, freq=freq, name=name)
    if kind == "period":
        return pd.period_range("2000-01-01", periods=n, freq=draw(st.sampled_from(_PERIOD_FREQS)), name=name)
    if kind == "interval":
        return pd.IntervalIndex(_intervals(draw, n), name=name)
    if kind == "labels":
        return pd.Index(draw(_label_values(n)), name=name)
    values = column(draw, n)  # any column's values as an index, where pandas makes one of them
    if isinstance(values.dtype, pd.SparseDtype):  # pandas refuses sparse indexes
        values = np.asarray(values)
    return pd.Index(values, name=name, dtype=values.dtype if values.dtype == object else None)


@st.composite
def _label_values(draw, n):
    """Labels the way people write them: strs (pandas' str dtype), ints, floats with NaN,
    object mixes, tuples, repeats."""
    items = draw(
        st.sampled_from(
            [_texts, st.integers(-5, 5), st.sampled_from([1.5, np.nan, -0.0]), st.one_of(_texts, st.integers(0, 3))]
        )
    )
    values = draw(_lists(n, st.one_of(items, st.sampled_from(["dup", "dup"])) if n > 1 else items))
    return pd.Index(values, dtype=object) if draw(st.booleans()) else values


def column_labels(draw, k: int) -> pd.Index:
    kind = draw(st.sampled_from(["index", "ints", "tuples", "unique strs", "multi"]))
    if kind == "ints":
        labels = pd.Index(draw(st.lists(st.integers(-3, 9), min_size=k, max_size=k)))
    elif kind == "tuples":
        labels = pd.Index([(i, draw(_texts)) for i in range(k)], tupleize_cols=False)
    elif kind == "unique strs":
        labels = pd.Index(draw(st.lists(_texts, min_size=k, max_size=k, unique=True)))
    elif kind == "multi":
        labels = pd.MultiIndex.from_arrays([[f"g{i % 2}" for i in range(k)], list(range(k))], names=["g", None])
    else:
        labels = index(draw, k)
    if not isinstance(labels, pd.MultiIndex):
        labels.name = draw(_names)  # the column labels' own name
    return labels


# -- Objects ---------------------------------------------------------------------------------------

_attrs = st.dictionaries(_texts, st.one_of(st.integers(), _texts, st.lists(st.integers(), max_size=2)), max_size=2)


def _finish(draw, obj: Any) -> Any:
    obj.attrs.update(draw(_attrs))
    try:
        axes_unique = obj.index.is_unique and (not isinstance(obj, pd.DataFrame) or obj.columns.is_unique)
    except TypeError:  # labels pandas cannot hash (dicts in an object index)
        axes_unique = False
    if axes_unique and draw(st.booleans()):  # pandas refuses the flag over duplicated labels
        obj = obj.set_flags(allows_duplicate_labels=False)
    return obj


@st.composite
def frames(draw):
    n, k = draw(st.integers(0, 7)), draw(st.integers(0, 6))
    rows = index(draw, n)
    values = [column(draw, n) for _ in range(k)]
    build = draw(st.sampled_from(["dict", "insert", "2-D"]))
    if build == "dict":  # consolidated: numpy columns of a dtype share one 2-D block
        df = pd.DataFrame(dict(enumerate(values)), index=rows)
    elif build == "2-D":  # one block over a 2-D array (pandas keeps its transpose, a view)
        dtype = np.dtype(draw(st.sampled_from(_NUMPY)))
        df = pd.DataFrame(_numpy(draw, n * k, dtype).reshape(n, k), index=rows)
    else:  # column by column at random positions: one block each, placements out of order
        df = pd.DataFrame(index=rows)
        for i, v in enumerate(values):
            df.insert(draw(st.integers(0, i)), i, v)
    df.columns = column_labels(draw, k)
    views = {
        "whole": lambda df: df,
        "every other row": lambda df: df.iloc[::2],
        "every other column": lambda df: df.iloc[:, ::2],
        "reversed": lambda df: df.iloc[::-1],
        "columns shuffled": lambda df: df.iloc[:, draw(st.permutations(range(k)))],
        "tail": lambda df: df.iloc[1:, 1:],
        "copy": lambda df: df.copy(),
    }
    df = views[draw(st.sampled_from(sorted(views)))](df)
    return _finish(draw, df)


@st.composite
def series(draw):
    how = draw(st.sampled_from(["values", "every other row", "a frame's column"]))
    if how == "a frame's column":  # a view into one row of a 2-D block
        df = draw(frames())
        if df.shape[1] == 0:
            return df.index.to_series()
        s = df.iloc[:, draw(st.integers(0, df.shape[1] - 1))]
    else:
        n = draw(st.integers(0, 7))
        s = pd.Series(column(draw, n), index=index(draw, n), name=draw(_names), copy=False)
        s = s.iloc[::2] if how == "every other row" else s
    return _finish(draw, s)


@st.composite
def indexes(draw):
    return index(draw, draw(st.integers(0, 7)))


@fidelity
@given(df=frames())
def test_dataframes_come_back_as_pickle_brings_them_back(df):
    check(df)


@fidelity
@given(s=series())
def test_series_come_back_as_pickle_brings_them_back(s):
    check(s)


@fidelity
@given(ix=indexes())
def test_indexes_come_back_as_pickle_brings_them_back(ix):
    check(ix)


# -- What the properties found, one case each. -----------------------------------------------------


def _zoned(zone: Any, n: int = 3) -> pd.DatetimeIndex:
    # Across the US DST change of 2021-03-14.
    return pd.date_range("2021-03-14 05:00", periods=n, freq="h", unit="s", tz="UTC").tz_convert(zone)


def test_a_dateutil_zone_travels_by_name():
    # Its dtype's text names the zone's file (tzfile('/usr/share/zoneinfo/Europe/Berlin')), which
    # pandas does not parse: dumps wrote it and loads refused it, in a frame's block, a Series
    # and an Index alike. It goes as "dateutil/Europe/Berlin", and stays native.
    values = _zoned("dateutil/Europe/Berlin")
    for obj in (pd.DataFrame({"a": values, "b": values}), pd.Series(values), values):
        check(obj)
        assert not freight.inspect(freight.dumps(obj))["needs_pickle"]


def test_a_zone_no_text_names_is_pickled():
    # "datetime64[ns, XYZ]" (a fixed offset with a name) did not load back; a dateutil tzoffset
    # came back equal in pandas' eyes but as another zone.
    for zone in (datetime.timezone(datetime.timedelta(hours=2), "XYZ"), dateutil.tz.tzoffset("X", 3600)):
        values = _zoned(zone)
        for obj in (pd.DataFrame({"a": values, "b": values, "n": 1}), pd.Series(values), values):
            check(obj)


def test_zoneinfo_utc_is_not_datetime_utc():
    # Both dtypes write "datetime64[ns, UTC]" and compare equal (pandas compares zones by name),
    # so ZoneInfo("UTC") came back as datetime.timezone.utc, and the per-dtype caches answered
    # for one what they had found for the other.
    for zone in (datetime.timezone.utc, zoneinfo.ZoneInfo("UTC"), datetime.timezone.utc):
        values = _zoned(zone)
        for obj in (pd.Series(values), pd.DataFrame({"a": values}), pd.Series(pd.Categorical(values))):
            check(obj)


def test_intervals_of_zoned_datetimes():
    # pandas writes them to Arrow but its __from_arrow__ refuses them: a payload loads could not
    # read. They are pickled (a dtype travels through Arrow only if an empty column comes back).
    left = _zoned("US/Eastern")
    values = pd.arrays.IntervalArray.from_arrays(left, left + pd.Timedelta("1h"), closed="both")
    for obj in (pd.Series(values), pd.IntervalIndex(values), pd.DataFrame({"i": values}), pd.Series(values[:0])):
        check(obj)


def test_nan_in_a_nullable_float_column_is_not_na():
    # Through Arrow pandas reads a NaN value back as NA (is_nan_na); pickle keeps the two apart.
    # Values and mask travel as they are.
    values = pd.arrays.FloatingArray(np.array([np.nan, -0.0, 1.5, np.nan]), np.array([False, False, False, True]))
    for obj in (pd.Series(values), pd.DataFrame({"f": values}), pd.Index(values)):
        check(obj)
        assert not freight.inspect(freight.dumps(obj))["needs_pickle"]
    check(pd.Series(pd.array([1, None, -(2**63)], dtype="Int64")))
    check(pd.Series(pd.array([True, None], dtype="boolean")))


def test_a_sparse_object_column_keeps_its_timestamps():
    # pandas' SparseArray.from_indices infers a dtype from object values before casting them
    # back to object: a Timestamp came back as its nanoseconds (an int). Built as they are now.
    values = np.empty(3, dtype=object)
    values[:] = [None, pd.Timestamp(0), (1, "a")]
    sparse = pd.arrays.SparseArray(values, fill_value=None, dtype=pd.SparseDtype(object, None))
    for obj in (pd.Series(sparse), pd.DataFrame({"s": sparse, "n": 1})):
        check(obj)


@pytest.mark.parametrize(
    "values",
    [
        {"dtype": "Float64", "masked": np.array([1, 2]), "mask": np.zeros(2, bool)},  # int64 values
        {"dtype": "Int64", "masked": np.array([1, 2]), "mask": np.zeros(3, bool)},  # a mask too long
        {"dtype": "Int64", "masked": np.array([1, 2]), "mask": np.zeros(2, np.int8)},
        {"dtype": "Int64", "masked": np.array([[1, 2]]), "mask": np.zeros((1, 2), bool)},
        {"dtype": "category", "masked": np.array([1, 2]), "mask": np.zeros(2, bool)},
    ],
)
def test_forged_masked_columns_are_refused(values):
    meta = {"values": values, "index": {"range": (0, 2, 1), "name": None}, "name": None, "attrs": {}}
    with pytest.raises(freight.DeserializationError, match="pandas.Series"):
        freight.loads(forge("pandas.Series", {**meta, "allows_duplicate_labels": True}), allow_pickle=False)


def _differs(want: Any, got: Any) -> bool:
    try:
        assert_pandas_same(want, got)
    except AssertionError:
        return True
    return False


def test_the_comparison_notices_what_it_claims():
    # (A comparison that passed anything would make the properties pass.)
    s = pd.Series([1.0, 0.0], index=pd.Index([1, 2], name="k"), name="s")
    assert not _differs(s, s.copy())
    assert _differs(s, pd.Series([1.0, -0.0], index=s.index, name="s"))
    assert _differs(s, s.rename(index=float))
    assert _differs(s, s.rename(("s",)))
    assert not _differs(s.rename(pd.NA), s.rename(pd.NA)) and _differs(s.rename(pd.NA), s.rename(pd.NaT))
    obj = pd.Series([1, "a"], dtype=object)
    assert _differs(obj, pd.Series([1.0, "a"], dtype=object))
    assert _differs(obj, pd.Series([True, "a"], dtype=object))
    floats = pd.arrays.FloatingArray(np.array([np.nan]), np.array([False]))
    assert _differs(pd.Series(floats), pd.Series(pd.array([None], dtype="Float64")))
    utc = pd.Series(_zoned(datetime.timezone.utc))
    assert _differs(utc, pd.Series(_zoned(zoneinfo.ZoneInfo("UTC"))))
    daily = pd.date_range("2021", periods=3, freq="D")
    assert _differs(daily, pd.DatetimeIndex(list(daily)))
    with_attrs = s.copy()
    with_attrs.attrs["k"] = 1
    assert _differs(s, with_attrs)
    assert _differs(s, s.set_flags(allows_duplicate_labels=False))
    df = pd.DataFrame({"a": [1]})
    assert _differs(df, pd.DataFrame({"a": [1]}, columns=pd.Index(["a"], dtype=object)))
    assert _differs(df, df.rename_axis(columns="c"))
    cat = pd.Series(pd.Categorical(["a"], categories=pd.Index(["a"], dtype=object)))
    assert _differs(cat, pd.Series(pd.Categorical(["a"])))
    assert _differs(pd.RangeIndex(0, 4, 2), pd.Index([0, 2]))
    # Two loads of a tuple holding NaN hold two NaN objects: the same value all the same.
    tuples = pd.Series([(np.nan,), (1,)], index=pd.Index([(np.nan,), "a"], dtype=object))
    assert not _differs(pickle.loads(pickle.dumps(tuples)), pickle.loads(pickle.dumps(tuples)))
    assert _differs(tuples, pd.Series([(np.nan,), (1.0,)], index=tuples.index))
    arrow = pd.Index(pd.arrays.ArrowExtensionArray(pa.array([np.nan, 0.0])))
    assert not _differs(pickle.loads(pickle.dumps(arrow)), pickle.loads(pickle.dumps(arrow)))
    assert _differs(arrow, pd.Index(pd.arrays.ArrowExtensionArray(pa.array([np.nan, -0.0]))))
