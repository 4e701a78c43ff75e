"""Hypothesis strategies for pandas objects, drawn as ``pandas._testing`` builds them (the pandas
property tests, tests/fidelity/test_fidelity_pandas_properties.py): columns of every extension
dtype (nullable, str/string in both storages and NA kinds, categorical, datetime of every unit
and tz across DST, timedelta, period, interval, sparse, ArrowDtype) and numpy ones (object cells
of mixed Python objects, None/NaN/NaT/NA); indexes of every kind; column labels of any type,
with a name; frames consolidated or built column by column, sliced or not. ``event`` lines show
what was drawn (``--hypothesis-show-statistics``)."""

from __future__ import annotations

import datetime
import warnings
import zoneinfo
from typing import Any

import dateutil.tz
import hypothesis.strategies as st
import numpy as np
import pandas as pd
import pandas._testing as tm
import pyarrow as pa
from hypothesis import event

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
