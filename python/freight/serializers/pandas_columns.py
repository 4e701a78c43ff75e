"""One pandas column's values, and the labels of a frame's axes: what
``freight.serializers.pandas_blocks`` (DataFrames block by block) and the serializers in
``freight.serializers.pandas`` (Series, Index) build on. Nothing here imports those two.

Values travel as frames, not through pickle: numpy-backed columns as numpy arrays, nullable
Int/Float/boolean as values plus mask, datetimes with tz as UTC values plus a zone text that
reads back as the same zone, other extension columns (string in either storage, period,
interval, pyarrow-backed) through Arrow (their dtype's own ``__arrow_array__``/``__from_arrow__``,
where an empty column comes back), a few pyarrow strings as a list, categoricals as codes plus
categories, sparse columns as their stored values and positions. Only object columns (and sparse
columns of objects), and columns of a dtype none of these forms keeps (a zone no text names),
are pickled in place, and only they make the payload need pickle.

Labels (``pd.Index`` of any kind, for frames, Series and categories) travel as their values'
metadata, a RangeIndex as its bounds; an Index, or a CategoricalDtype, of few strings is cached
(the same columns and categories come back payload after payload). Labels and values are one
module because each holds the other: an Index holds values, a categorical column an Index.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pandas as pd

# Nullable ints, floats and booleans: values plus a mask (the same classes in pandas 2 and 3).
from pandas.core.arrays.masked import BaseMaskedArray as _MaskedArray
from pandas.core.dtypes.dtypes import BaseMaskedDtype as _MaskedDtype

from freight import _versions
from freight.serializers import Pickled

__all__ = [
    "values_meta",
    "values_from",
    "column_values",
    "index_meta",
    "index_from",
    "writable",
    "tz_wire",
    "dtype_from",
    "unshared",
    "pa_errors",
]

_pandas_dtype = pd.api.types.pandas_dtype

try:  # pandas registers its Arrow extension types (period, interval) only when this is imported
    import pandas.core.arrays.arrow.extension_types  # noqa: F401
except ImportError:  # pragma: no cover - other pandas versions
    pass


def values_meta(values: Any) -> dict[str, Any]:
    """A column's (or index's) values as natively encodable metadata."""
    if isinstance(values, np.ndarray):
        return {"np": writable(values)}  # object arrays become pickle islands
    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return {
            "codes": writable(values.codes),
            "categories": index_meta(dtype.categories),
            "ordered": bool(dtype.ordered),
        }
    if isinstance(dtype, pd.SparseDtype):
        return {
            "sparse": writable(np.asarray(values.sp_values)),
            "indices": values.sp_index.to_int_index().indices,
            "length": len(values),
            "fill": _scalar_meta(values.fill_value),
            "kind": values.kind,
            "subtype": str(dtype.subtype),
        }
    if isinstance(dtype, pd.DatetimeTZDtype):
        # Its UTC datetime64 values (a view, NaT kept): several times faster than through Arrow.
        zone = tz_wire(dtype)
        if zone is None:  # a zone no dtype text names (a fixed offset with a name): pickled
            return {"object": Pickled(values)}
        return {"tz": zone, "utc": writable(values.to_numpy(f"datetime64[{dtype.unit}]"))}
    if isinstance(values, _MaskedArray) and _round_trips_text(dtype):
        # Values and mask as they are: through Arrow, pandas (is_nan_na) reads a NaN value of a
        # Float column back as NA, and pickle keeps the two apart.
        return {"dtype": str(dtype), "masked": writable(values._data), "mask": writable(values._mask)}
    if _round_trips(dtype):
        try:
            import pyarrow as pa

            wire = _dtype_wire(dtype)
            arrow = getattr(values, "_pa_array", None)  # Arrow-backed: its own chunks, as __arrow_array__ gives
            if arrow is not None and len(arrow) <= _FEW and isinstance(dtype, pd.StringDtype):
                return {"dtype": wire, "strs": arrow.to_pylist()}
            if not isinstance(arrow, pa.ChunkedArray):
                arrow = pa.array(values)
                if not isinstance(arrow, pa.ChunkedArray):
                    arrow = pa.chunked_array([arrow])
            return {"dtype": wire, "arrow": arrow}
        except (TypeError, ValueError, ImportError, NotImplementedError, pa_errors()):
            pass
    return {"object": Pickled(values)}


def _same_dtype(a: Any, b: Any) -> bool:
    """Equal dtypes holding the same time zone: pandas compares zones by name, so a column of
    ``ZoneInfo("UTC")`` equals one of ``datetime.timezone.utc`` (the text both write), and
    pickle keeps them apart."""
    return type(a) is type(b) and bool(a == b) and _zone_key(a) == _zone_key(b)


def _zone_key(dtype: Any) -> Any:
    zone = getattr(getattr(dtype, "subtype", dtype), "tz", None)  # an interval's subtype's too
    return None if zone is None else (type(zone), repr(zone))


def tz_wire(dtype: Any) -> str | None:
    """The text of a tz-aware dtype that reads back as the same zone, or None. ``str(dtype)``
    names most zones; a dateutil zone's is its file (``tzfile('/usr/share/zoneinfo/...')``),
    which pandas does not parse (and a payload must not name files): it goes by zone name."""
    try:
        return _cached_tz_wire(dtype, _zone_key(dtype))  # by zone too: see _same_dtype
    except TypeError:  # an unhashable zone
        return _check_tz_wire(dtype)


def _check_tz_wire(dtype: Any, _key: Any = None) -> str | None:
    candidates = [str(dtype)]
    filename = getattr(dtype.tz, "_filename", None)  # dateutil's tzfile
    if isinstance(filename, str):
        name = filename.rsplit("zoneinfo/", 1)[-1] if filename.startswith("/") else filename
        candidates.append(f"datetime64[{dtype.unit}, dateutil/{name}]")
    for text in candidates:
        try:
            if _same_dtype(dtype_from(text), dtype):
                return text
        except (TypeError, ValueError, KeyError, ImportError, pa_errors()):
            continue
    return None


_cached_tz_wire = functools.lru_cache(maxsize=256)(_check_tz_wire)


def _round_trips_text(dtype: Any) -> bool:
    """Whether ``str(dtype)`` reads back as the dtype (nullable ints, floats, booleans)."""
    try:
        return _same_dtype(dtype_from(str(dtype)), dtype)
    except (TypeError, ValueError, ImportError, pa_errors()):
        return False


def _round_trips(dtype: Any) -> bool:
    """Whether an extension dtype travels through Arrow: it converts from Arrow, and its wire
    form reads back as an equal dtype. Decided once per dtype (the check costs more than a
    small column's conversion); the wire form itself is the dtype's own each time, since some
    unequal dtypes compare equal (ArrowDtype structs whose fields differ by metadata)."""
    try:
        return _cached_round_trips(dtype, _zone_key(dtype))  # by zone too: see _same_dtype
    except TypeError:  # an unhashable dtype
        return _check_round_trip(dtype)


def _check_round_trip(dtype: Any, _key: Any = None) -> bool:
    if not hasattr(dtype, "__from_arrow__"):
        return False
    try:
        if not _same_dtype(dtype_from(_dtype_wire(dtype)), dtype):
            return False
        # And an empty column converts back: pandas writes intervals of tz-aware datetimes to
        # Arrow, but its __from_arrow__ refuses them (a payload dumps wrote and loads could not).
        import pyarrow as pa

        empty = dtype.construct_array_type()._from_sequence([], dtype=dtype)
        return _same_dtype(dtype.__from_arrow__(pa.chunked_array([pa.array(empty)])).dtype, dtype)
    except (TypeError, ValueError, ImportError, NotImplementedError, AttributeError, pa_errors()):
        return False


_cached_round_trips = functools.lru_cache(maxsize=256)(_check_round_trip)


def writable(a: np.ndarray) -> np.ndarray:
    """A view of a column's array marked writable when its memory is: pandas (copy-on-write)
    hands out read-only views, and freight restores the flag it is given, so a loaded DataFrame
    would refuse in-place edits that a pickled one accepts. Nothing here writes to it."""
    if a.flags.writeable:
        return a
    view = a.view()
    try:
        view.flags.writeable = True
    except ValueError:  # the memory itself is read-only (a zero-copy load, say): keep it so
        return a
    return view


def pa_errors() -> type[BaseException]:
    try:
        import pyarrow as pa

        return pa.ArrowException
    except ImportError:  # pragma: no cover - pandas 3 requires pyarrow for its string dtype
        return TypeError


def _dtype_wire(dtype: Any) -> str | tuple[Any, ...]:
    """How an extension dtype travels: a StringDtype as ("string", storage, NA-or-NaN missing
    values), since its text ("str", "string") means what the reader's options say; an
    ArrowDtype as ("arrow", its Arrow type's IPC encoding), since pandas parses only some of
    their texts back; any other as a text ``pandas_dtype`` parses (checked by the caller)."""
    if isinstance(dtype, pd.StringDtype):
        # pandas 2.2's "pyarrow_numpy" is pandas 3's "str" (pyarrow storage, NaN for missing).
        storage = "pyarrow" if dtype.storage == "pyarrow_numpy" else dtype.storage
        return ("string", storage, dtype.na_value is pd.NA)
    if isinstance(dtype, pd.ArrowDtype):
        # Here, not at the top: pandas columns need no pyarrow until one is Arrow-backed.
        from freight.serializers.arrow_python import type_wire

        return ("arrow", type_wire(dtype.pyarrow_dtype))
    return str(dtype)


def dtype_from(wire: Any) -> Any:
    if isinstance(wire, tuple):
        if len(wire) == 2 and wire[0] == "arrow" and isinstance(wire[1], bytes):
            from freight.serializers.arrow_python import type_from

            return pd.ArrowDtype(type_from(wire[1]))
        if len(wire) != 3 or wire[0] != "string" or wire[1] not in ("python", "pyarrow", "pyarrow_numpy"):
            raise ValueError(f"unknown extension dtype {wire!r}")
        if wire[1] == "pyarrow_numpy":  # what pandas 2.2 would have written before the alias above
            return _string_dtype("pyarrow", False)
        return _string_dtype(wire[1], bool(wire[2]))
    if not isinstance(wire, str):
        raise ValueError(f"a dtype is a text, not {type(wire).__name__}")
    if wire in ("str", "string"):  # payloads of earlier versions: what the options say
        return _pandas_dtype(wire)
    _refuse_zone_paths(wire)
    if len(wire) > _CACHED_TEXT_MAX:  # the cache must not keep payload memory alive
        return _pandas_dtype(wire)
    return _parsed_dtype(wire)


_CACHED_TEXT_MAX = 128
# What may follow "dateutil/" in a time zone: a zone name ("Europe/Paris", "Etc/GMT+1").
_DATEUTIL_ZONE = re.compile(r"dateutil/([^\],]*)")
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*")


def _refuse_zone_paths(text: str) -> None:
    """dateutil opens the file a zone names ("dateutil//etc/passwd", "dateutil/:/abs/path"):
    in a payload only zone names are accepted."""
    for zone in _DATEUTIL_ZONE.findall(text):
        if not _ZONE_NAME.fullmatch(zone.strip()):
            raise ValueError(f"refusing time zone {zone!r}: zones are names, not file paths")


@functools.lru_cache(maxsize=256)
def _parsed_dtype(text: str) -> Any:
    # Parsing a dtype text costs several microseconds (a tenth of a small column's load).
    return _pandas_dtype(text)


@functools.lru_cache(maxsize=8)
def _string_dtype(storage: str, na: bool) -> Any:
    if na:
        return pd.StringDtype(storage)
    try:
        return pd.StringDtype(storage, na_value=np.nan)
    except TypeError:  # pandas < 2.3: NaN semantics exist only as "pyarrow_numpy"
        if storage == "pyarrow":
            return pd.StringDtype("pyarrow_numpy")
    raise _versions.refusal(
        "pandas",
        "a string column with python storage and NaN for missing values (pandas 3's str without pyarrow) "
        "cannot load: pandas before 2.3 has no such dtype",
        "install pandas >= 2.3 (or pyarrow on the writer's side, whose str columns this pandas reads), or "
        "convert the column before sending (.astype(object) or .astype('string'))",
    )


def values_from(meta: dict[str, Any]) -> Any:
    if "np" in meta:
        # A scalar here would be broadcast to the index's length (a tiny payload, a huge frame).
        return _one_dimensional(meta["np"], "column values")
    if "codes" in meta:
        dtype = _categorical_dtype(meta["categories"], meta["ordered"])
        return pd.Categorical.from_codes(meta["codes"], dtype=dtype)  # checks the codes against it
    if "strs" in meta:
        return _string_array(*_strings(meta))
    if "sparse" in meta:
        return _sparse(meta)
    if "tz" in meta:
        return _datetime_tz(meta["utc"], dtype_from(meta["tz"]))
    if "masked" in meta:
        return _masked(meta)
    if "arrow" in meta:
        return dtype_from(meta["dtype"]).__from_arrow__(meta["arrow"])
    return meta["object"].value


# Labels (column names, categories) and small string columns: up to _FEW pyarrow strings travel
# as a list of str, not as an Arrow array (a node of its own, several times slower to write and
# read back). Indexes and categories of them are cached on load (see _labels below) up
# to _FEW_CHARS characters: the cache must not keep much payload memory alive.
_FEW = 64
_FEW_CHARS = 4096
_ARROW_STORAGE = ("pyarrow", "pyarrow_numpy")  # pandas 2.2 names pandas 3's str "pyarrow_numpy"


def _strings(meta: dict[str, Any]) -> tuple[Any, list[Any]]:
    dtype, strs = dtype_from(meta["dtype"]), meta["strs"]
    if not isinstance(dtype, pd.StringDtype) or dtype.storage not in _ARROW_STORAGE or type(strs) is not list:
        raise ValueError(f"a list of strings for a column of {dtype}")
    for s in strs:
        if type(s) is not str and s is not None:  # pyarrow would take bytes as they are, UTF-8 or not
            raise ValueError(f"a list of strings holding a {type(s).__name__}")
    return dtype, strs


def _string_array(dtype: Any, strs: list[Any]) -> Any:
    import pyarrow as pa

    return dtype.__from_arrow__(pa.chunked_array([pa.array(strs, type=pa.large_string())]))


def _scalar_meta(value: Any) -> Any:
    """A fill value: numpy scalars (NaT of a unit, say) as 0-d arrays, which travel natively."""
    return {"np0": np.asarray(value)} if isinstance(value, np.generic) else value


def _scalar_from(meta: Any) -> Any:
    return meta["np0"][()] if isinstance(meta, dict) else meta


def _one_dimensional(values: Any, what: str) -> np.ndarray:
    if not isinstance(values, np.ndarray) or values.ndim != 1:
        raise ValueError(f"{what} must be a 1-D array, not {type(values).__name__}")
    return values


def _sparse(meta: dict[str, Any]) -> Any:
    """A SparseArray from its stored values and their positions, never materialising the dense
    array. The positions are checked here (strictly increasing, within the length, one per
    value): pandas checks them for one index kind only, and casts them to int32."""
    dtype = pd.SparseDtype(dtype_from(meta["subtype"]), _scalar_from(meta["fill"]))
    if meta["kind"] not in ("integer", "block"):
        raise ValueError(f"unknown sparse index kind {meta['kind']!r}")
    length = int(meta["length"])
    positions = _one_dimensional(meta["indices"], "sparse positions")
    values = _one_dimensional(meta["sparse"], "sparse values")
    if not 0 <= length <= np.iinfo(np.int32).max or positions.dtype.kind not in "iu" or len(positions) != len(values):
        raise ValueError("sparse positions must be integers, one per stored value, in an int32 length")
    if len(positions) and (positions[0] < 0 or positions[-1] >= length or (np.diff(positions) <= 0).any()):
        raise ValueError(f"sparse positions must increase strictly within [0, {length})")
    if values.dtype != dtype.subtype:
        # pandas would cast them silently (NaN to the most negative int64, 1.5 to 1).
        raise ValueError(f"sparse values of dtype {values.dtype} for a column of Sparse[{dtype.subtype}]")
    from pandas._libs.sparse import IntIndex

    index = IntIndex(length, positions.astype(np.int32))
    if meta["kind"] == "block":
        index = index.to_block_index()
    simple_new = getattr(pd.arrays.SparseArray, "_simple_new", None)
    if simple_new is not None:
        # The values as they are: from_indices infers a dtype from object values first, and
        # an object column holding a Timestamp came back holding its nanoseconds (an int).
        return simple_new(values, index, dtype)
    return pd.arrays.SparseArray(values, sparse_index=index, dtype=dtype)  # pragma: no cover


def _masked(meta: dict[str, Any]) -> Any:
    """A nullable int, float or boolean array from its values and mask, checked: pandas takes
    them on trust."""
    dtype = dtype_from(meta["dtype"])
    data = _one_dimensional(meta["masked"], "masked values")
    mask = _one_dimensional(meta["mask"], "mask")
    if not isinstance(dtype, _MaskedDtype) or data.dtype != dtype.numpy_dtype:
        raise ValueError(f"values of dtype {data.dtype} for a column of {dtype}")
    if mask.dtype != np.bool_ or len(mask) != len(data):
        raise ValueError("a mask is one bool per value")
    return dtype.construct_array_type()(data, mask, copy=False)


def _datetime_tz(utc: Any, dtype: Any) -> Any:
    """A tz-aware DatetimeArray over UTC datetime64 values."""
    if (
        not isinstance(dtype, pd.DatetimeTZDtype)
        or _one_dimensional(utc, "datetime values").dtype != f"M8[{dtype.unit}]"
    ):
        raise ValueError(f"{dtype} values must be datetime64[{getattr(dtype, 'unit', '?')}]")
    simple_new = getattr(pd.arrays.DatetimeArray, "_simple_new", None)
    if simple_new is not None:  # wraps the values as they are (the public path below copies twice)
        return simple_new(utc, dtype=dtype)
    return pd.array(utc).tz_localize("UTC").tz_convert(dtype.tz)


def column_values(series: pd.Series) -> Any:
    dtype = series.dtype
    if isinstance(dtype, pd.api.extensions.ExtensionDtype):
        return series.array
    return series.to_numpy(copy=False)


def unshared(meta: Any, seen: set[int]) -> Any:
    """The metadata with every numpy array appearing once: freight writes each place's array
    separately, but a forged payload can refer to one array from two places (a column and the
    index), and pandas would then edit both, and look up a stale index. Copies repeats."""
    kind = type(meta)
    if kind is dict:
        for key, value in meta.items():
            # attrs are the user's own values: shared arrays there stay shared.
            if type(value) not in _SCALARS and key != "attrs":
                meta[key] = unshared(value, seen)
    elif kind is list:
        for i, value in enumerate(meta):
            if type(value) not in _SCALARS:
                meta[i] = unshared(value, seen)
    elif kind is tuple:
        if not all(type(value) in _SCALARS for value in meta):
            return tuple(unshared(value, seen) for value in meta)
    elif isinstance(meta, np.ndarray):
        if id(meta) in seen:
            return meta.copy()
        seen.add(id(meta))
    return meta


# What the walk above skips at once (by exact type: a decoded payload's containers are exact
# dicts, lists and tuples): most of a small frame's metadata.
_SCALARS = frozenset((str, int, float, bool, bytes, type(None)))


# -- labels: the axes of a frame (and of a Series, an Index) and categories ----------------


def index_meta(index: pd.Index) -> dict[str, Any]:
    if type(index) is pd.RangeIndex:
        return {"range": (index.start, index.stop, index.step), "name": index.name}
    if isinstance(index, pd.MultiIndex):
        return {
            "levels": [index_meta(level) for level in index.levels],
            "codes": [np.asarray(c) for c in index.codes],
            "names": list(index.names),
        }
    values = index.array if isinstance(index.dtype, pd.api.extensions.ExtensionDtype) else index.to_numpy(copy=False)
    meta: dict[str, Any] = {"values": values_meta(values), "name": index.name}
    freq = getattr(index, "freqstr", None)
    if freq is not None:
        meta["freq"] = freq
    return meta


def index_from(meta: dict[str, Any]) -> pd.Index:
    if "range" in meta:
        start, stop, step = meta["range"]
        name = meta["name"]
        hash(name)  # what the constructor checks (a name is hashable)
        if _range_simple_new is None:  # pragma: no cover - other pandas versions
            return pd.RangeIndex(start, stop, step, name=name)
        return _range_simple_new(range(start, stop, step), name=name)  # range() takes integers only
    if "levels" in meta:
        levels = [index_from(level) for level in meta["levels"]]
        codes = [_one_dimensional(c, "MultiIndex codes") for c in meta["codes"]]
        for level, c in zip(levels, codes):
            # pandas casts codes to the smallest integer type first, which wraps large ones.
            if c.dtype.kind not in "iu" or (len(c) and (c.min() < -1 or c.max() >= len(level))):
                raise ValueError(f"MultiIndex codes must lie in [-1, {len(level)})")
        return pd.MultiIndex(levels=levels, codes=codes, names=meta["names"])
    key = _labels(meta)
    if key is not None:  # a view: its name is the caller's to change
        return _label_index(*key)._view()
    values = values_from(meta["values"])
    if "freq" not in meta and _is_plain(values):
        name = meta["name"]
        hash(name)
        return _index_simple_new(values, name)
    # An object array keeps its dtype, as pickle does: pandas would infer one from the values
    # (pandas 3 makes strs its "str" dtype, pandas 2 Timestamps a DatetimeIndex).
    dtype = values.dtype if type(values) is np.ndarray and values.dtype.kind == "O" else None
    index = pd.Index(values, dtype=dtype, name=meta["name"], copy=False)
    if "freq" in meta:
        try:  # DatetimeIndex, TimedeltaIndex, PeriodIndex keep their frequency
            index = type(index)(values, freq=meta["freq"], name=meta["name"])
        except (TypeError, ValueError):
            pass
    return index


# The constructors' fast paths (a tenth of the time of RangeIndex(...) and Index(...)), for the
# values _is_plain accepts; the public constructors where absent.
_range_simple_new = getattr(pd.RangeIndex, "_simple_new", None)
_index_simple_new = getattr(pd.Index, "_simple_new", None)


def _is_plain(values: Any) -> bool:
    """Whether ``pd.Index(values)`` is a plain Index holding these numbers or booleans as they
    are, so its inference can be skipped: decided once per dtype, by pandas on an empty array."""
    if _index_simple_new is None or type(values) is not np.ndarray or values.dtype.kind not in "iufcb":
        return False
    known = _PLAIN.get(values.dtype)
    if known is None:
        try:
            sample = pd.Index(values[:0], copy=False)
            known = type(sample) is pd.Index and type(sample._data) is np.ndarray and sample.dtype == values.dtype
        except (TypeError, ValueError, NotImplementedError):  # float16, say: the constructor refuses it
            known = False
        _PLAIN[values.dtype] = known
    return known


_PLAIN: dict[np.dtype, bool] = {}


def _labels(meta: dict[str, Any]) -> tuple[Any, tuple[Any, ...], Any] | None:
    """The cache key of an index of few strings: (dtype, labels, name); None for any other."""
    values = meta["values"]
    if type(values) is not dict or "strs" not in values or "freq" in meta:
        return None
    dtype, strs = _strings(values)
    name = meta["name"]
    hash(name)  # what the constructor checks (a name is hashable)
    if len(strs) > _FEW or sum(len(s) for s in strs if s) > _FEW_CHARS:
        return None
    return dtype, tuple(strs), name


@functools.lru_cache(maxsize=256)
def _label_index(dtype: Any, labels: tuple[Any, ...], name: Any) -> pd.Index:
    return pd.Index(_string_array(dtype, list(labels)), name=name, copy=False)


@functools.lru_cache(maxsize=256)
def _categories(dtype: Any, labels: tuple[Any, ...], name: Any, ordered: bool) -> pd.CategoricalDtype:
    # Checked once by pandas (no missing value, no repeat); one dtype for all the columns loaded
    # with these categories, as pandas itself shares dtypes (copies, astype, concat).
    categories = pd.Index(_string_array(dtype, list(labels)), name=name, copy=False)
    return pd.CategoricalDtype(categories, ordered=ordered)


def _categorical_dtype(categories: dict[str, Any], ordered: Any) -> pd.CategoricalDtype:
    key = _labels(categories) if "values" in categories else None
    if key is not None and type(ordered) is bool:
        return _categories(*key, ordered)
    return pd.CategoricalDtype(index_from(categories), ordered=ordered)
