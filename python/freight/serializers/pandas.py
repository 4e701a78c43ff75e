"""pandas DataFrame, Series and Index. Column data travels as frames, not through pickle:
numpy-backed columns as numpy arrays, nullable Int/Float/boolean as values plus mask, datetimes
with tz as UTC values plus a zone text that reads back as the same zone, other extension
columns (string in either storage, period, interval, pyarrow-backed) through Arrow (their
dtype's own ``__arrow_array__``/``__from_arrow__``, where an empty column comes back), a few
pyarrow strings as a list, categoricals as codes plus categories. Only object columns (and
sparse columns of objects), and columns of a dtype none of these forms keeps (a zone no text
names), are pickled in place, and only they make the payload need pickle. Sparse columns travel as their stored
values and positions. DataFrames go block by block, and Index kinds (Range, Multi, Datetime
with tz and freq, Categorical, ...) as ``freight.serializers.pandas_blocks`` writes them; names
of any type, ``attrs`` and ``flags`` are kept. This module holds one column's values and the
serializers. Imported the first time a pandas object is serialized or a ``pandas.*`` payload
is loaded; registers into ``freight.registry.BUILTINS``.
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
from freight.exceptions import DeserializationError
from freight.registry import BUILTINS
from freight.serializers import LibrarySerializer, Pickled

_pandas_dtype = pd.api.types.pandas_dtype

try:  # pandas registers its Arrow extension types (period, interval) only when this is imported
    import pandas.core.arrays.arrow.extension_types  # noqa: F401
except ImportError:  # pragma: no cover - other pandas versions
    pass


def _alias_nat_unpickle() -> None:
    """pandas pickles NaT as a call to ``__nat_unpickle`` (pandas 2) or ``_nat_unpickle``
    (pandas 3), and each lacks the other's name, so an object column holding NaT (a pickle
    island) would not load across them. Gives this pandas the other name as well, the way
    pandas' own ``read_pickle`` maps renamed functions; only adds a name."""
    from pandas._libs.tslibs import nattype

    for name, other in (("_nat_unpickle", "__nat_unpickle"), ("__nat_unpickle", "_nat_unpickle")):
        function = getattr(nattype, name, None)
        if function is not None and not hasattr(nattype, other):
            try:
                setattr(nattype, other, function)
            except (AttributeError, TypeError):  # pragma: no cover - a module that refuses it
                pass


_alias_nat_unpickle()


def _values_meta(values: Any) -> dict[str, Any]:
    """A column's (or index's) values as natively encodable metadata."""
    if isinstance(values, np.ndarray):
        return {"np": _writable(values)}  # object arrays become pickle islands
    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return {
            "codes": _writable(values.codes),
            "categories": _blocks._index_meta(dtype.categories),
            "ordered": bool(dtype.ordered),
        }
    if isinstance(dtype, pd.SparseDtype):
        return {
            "sparse": _writable(np.asarray(values.sp_values)),
            "indices": values.sp_index.to_int_index().indices,
            "length": len(values),
            "fill": _scalar_meta(values.fill_value),
            "kind": values.kind,
            "subtype": str(dtype.subtype),
        }
    if isinstance(dtype, pd.DatetimeTZDtype):
        # Its UTC datetime64 values (a view, NaT kept): 6x faster than through Arrow.
        zone = _tz_wire(dtype)
        if zone is None:  # a zone no dtype text names (a fixed offset with a name): pickled
            return {"object": Pickled(values)}
        return {"tz": zone, "utc": _writable(values.to_numpy(f"datetime64[{dtype.unit}]"))}
    if isinstance(values, _MaskedArray) and _round_trips_text(dtype):
        # Values and mask as they are: through Arrow, pandas (is_nan_na) reads a NaN value of a
        # Float column back as NA, and pickle keeps the two apart.
        return {"dtype": str(dtype), "masked": _writable(values._data), "mask": _writable(values._mask)}
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


def _tz_wire(dtype: Any) -> str | None:
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
            if _same_dtype(_dtype_from(text), dtype):
                return text
        except (TypeError, ValueError, KeyError, ImportError, pa_errors()):
            continue
    return None


_cached_tz_wire = functools.lru_cache(maxsize=256)(_check_tz_wire)


def _round_trips_text(dtype: Any) -> bool:
    """Whether ``str(dtype)`` reads back as the dtype (nullable ints, floats, booleans)."""
    try:
        return _same_dtype(_dtype_from(str(dtype)), dtype)
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
        if not _same_dtype(_dtype_from(_dtype_wire(dtype)), dtype):
            return False
        # And an empty column converts back: pandas writes intervals of tz-aware datetimes to
        # Arrow, but its __from_arrow__ refuses them (a payload dumps wrote and loads could not).
        import pyarrow as pa

        empty = dtype.construct_array_type()._from_sequence([], dtype=dtype)
        return _same_dtype(dtype.__from_arrow__(pa.chunked_array([pa.array(empty)])).dtype, dtype)
    except (TypeError, ValueError, ImportError, NotImplementedError, AttributeError, pa_errors()):
        return False


_cached_round_trips = functools.lru_cache(maxsize=256)(_check_round_trip)


def _writable(a: np.ndarray) -> np.ndarray:
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
        from freight.serializers.arrow import _type_wire

        return ("arrow", _type_wire(dtype.pyarrow_dtype))
    return str(dtype)


def _dtype_from(wire: Any) -> Any:
    if isinstance(wire, tuple):
        if len(wire) == 2 and wire[0] == "arrow" and isinstance(wire[1], bytes):
            from freight.serializers.arrow import _type_from

            return pd.ArrowDtype(_type_from(wire[1]))
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


def _values_from(meta: dict[str, Any]) -> Any:
    if "np" in meta:
        # A scalar here would be broadcast to the index's length (a tiny payload, a huge frame).
        return _one_dimensional(meta["np"], "column values")
    if "codes" in meta:
        dtype = _blocks._categorical_dtype(meta["categories"], meta["ordered"])
        return pd.Categorical.from_codes(meta["codes"], dtype=dtype)  # checks the codes against it
    if "strs" in meta:
        return _string_array(*_strings(meta))
    if "sparse" in meta:
        return _sparse(meta)
    if "tz" in meta:
        return _datetime_tz(meta["utc"], _dtype_from(meta["tz"]))
    if "masked" in meta:
        return _masked(meta)
    if "arrow" in meta:
        return _dtype_from(meta["dtype"]).__from_arrow__(meta["arrow"])
    return meta["object"].value


# Labels (column names, categories) and small string columns: up to _FEW pyarrow strings travel
# as a list of str, not as an Arrow array (a node of its own, several times slower to write and
# read back). Indexes and categories of them are cached on load (see pandas_blocks._labels) up
# to _FEW_CHARS characters: the cache must not keep much payload memory alive.
_FEW = 64
_FEW_CHARS = 4096
_ARROW_STORAGE = ("pyarrow", "pyarrow_numpy")  # pandas 2.2 names pandas 3's str "pyarrow_numpy"


def _strings(meta: dict[str, Any]) -> tuple[Any, list[Any]]:
    dtype, strs = _dtype_from(meta["dtype"]), meta["strs"]
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
    dtype = pd.SparseDtype(_dtype_from(meta["subtype"]), _scalar_from(meta["fill"]))
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
    dtype = _dtype_from(meta["dtype"])
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


def _column_values(series: pd.Series) -> Any:
    dtype = series.dtype
    if isinstance(dtype, pd.api.extensions.ExtensionDtype):
        return series.array
    return series.to_numpy(copy=False)


class _PandasSerializer(LibrarySerializer):
    """Object columns become pickle islands, which mark the payload as needing pickle."""

    def deserialize(self, meta: Any, frames: list[memoryview]) -> Any:
        try:
            return self._decode(meta, frames)
        except DeserializationError as exc:
            # Written by another pandas: say so, with both versions (the likely cause).
            crossing = _versions.failed_crossing("pandas", self.tag, exc)
            if crossing is None:
                raise
            raise crossing from exc

    def _decode(self, meta: Any, frames: list[memoryview]) -> Any:
        return super().deserialize(_unshared(meta, set()), frames)


def _unshared(meta: Any, seen: set[int]) -> Any:
    """The metadata with every numpy array appearing once: freight writes each place's array
    separately, but a forged payload can refer to one array from two places (a column and the
    index), and pandas would then edit both, and look up a stale index. Copies repeats."""
    kind = type(meta)
    if kind is dict:
        for key, value in meta.items():
            # attrs are the user's own values: shared arrays there stay shared.
            if type(value) not in _SCALARS and key != "attrs":
                meta[key] = _unshared(value, seen)
    elif kind is list:
        for i, value in enumerate(meta):
            if type(value) not in _SCALARS:
                meta[i] = _unshared(value, seen)
    elif kind is tuple:
        if not all(type(value) in _SCALARS for value in meta):
            return tuple(_unshared(value, seen) for value in meta)
    elif isinstance(meta, np.ndarray):
        if id(meta) in seen:
            return meta.copy()
        seen.add(id(meta))
    return meta


# What the walk above skips at once (by exact type: a decoded payload's containers are exact
# dicts, lists and tuples): most of a small frame's metadata.
_SCALARS = frozenset((str, int, float, bool, bytes, type(None)))


class DataFrameSerializer(_PandasSerializer):
    """Block by block (``freight.serializers.pandas_blocks``); payloads of earlier versions hold
    one entry per column under ``"data"``."""

    tag = "pandas.DataFrame"
    types = (pd.DataFrame,)

    def serialize(self, df: pd.DataFrame) -> tuple[Any, list[Any]]:
        return _blocks.frame_meta(df), []

    def _decode(self, meta: Any, frames: list[memoryview]) -> Any:
        if isinstance(meta, dict) and "blocks" in meta:  # checks the arrays it uses for sharing itself
            return LibrarySerializer.deserialize(self, meta, frames)
        return super()._decode(meta, frames)

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> pd.DataFrame:
        if "blocks" in meta:
            return _blocks.frame_from(meta)
        return _blocks.frame_from_data(meta)


class SeriesSerializer(_PandasSerializer):
    tag = "pandas.Series"
    types = (pd.Series,)

    def serialize(self, s: pd.Series) -> tuple[Any, list[Any]]:
        return {
            "values": _values_meta(_column_values(s)),
            "index": _blocks._index_meta(s.index),
            "name": s.name,
            "attrs": dict(s.attrs),
            "allows_duplicate_labels": s.flags.allows_duplicate_labels,
        }, []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> pd.Series:
        values = _values_from(meta["values"])
        # An object array keeps its dtype, as pickle does (pandas 3 would make strs its "str").
        dtype = values.dtype if type(values) is np.ndarray and values.dtype.kind == "O" else None
        s = pd.Series(values, index=_blocks._index_from(meta["index"]), dtype=dtype, name=meta["name"], copy=False)
        s.attrs.update(meta["attrs"])
        flag = meta["allows_duplicate_labels"]
        return s if flag is True else s.set_flags(allows_duplicate_labels=flag)  # set_flags copies


class IndexSerializer(_PandasSerializer):
    tag = "pandas.Index"
    types = (
        pd.Index,
        pd.RangeIndex,
        pd.MultiIndex,
        pd.DatetimeIndex,
        pd.TimedeltaIndex,
        pd.PeriodIndex,
        pd.IntervalIndex,
        pd.CategoricalIndex,
    )

    def serialize(self, index: pd.Index) -> tuple[Any, list[Any]]:
        return _blocks._index_meta(index), []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> pd.Index:
        return _blocks._index_from(meta)


# DataFrame blocks and labels; each module reads the other's functions at call time, so either
# may be imported first.
from freight.serializers import pandas_blocks as _blocks  # noqa: E402

for _serializer in (DataFrameSerializer(), SeriesSerializer(), IndexSerializer()):
    BUILTINS.register(_serializer)
