"""pandas DataFrames block by block, the way pickle sees them, and the labels of their axes.

Each numpy block (all the int64 columns, say) travels as one 2-D array with its column
positions, datetime and timedelta blocks as their 2-D datetime64/timedelta64 values, extension
blocks (categorical, str, nullable, period, ...) one column each through
``freight.serializers.pandas``. Loading hands all blocks to pandas'
``create_dataframe_from_blocks`` at once, which takes them on trust, so everything it assumes
is checked here first. The metadata: ``{"index", "columns", "blocks": [(values, placement),
...]}``, plus ``"attrs"`` when not empty and ``"allows_duplicate_labels": False`` when so, where
``placement`` is a column position (one column) or a 1-D integer array, and ``values`` a 2-D
array (a numpy block, or datetime64/timedelta64 for a tz-naive datetime or timedelta block),
``{"tz", "utc"}`` with 2-D UTC values for a tz-aware one, or one extension column's metadata.
Payloads of earlier versions hold one entry per column under ``"data"`` (``frame_from_data``).

Labels (``pd.Index`` of any kind, for frames, Series and categories) travel as their values'
metadata, a RangeIndex as its bounds; an Index, or a CategoricalDtype, of few strings is cached
(the same columns and categories come back payload after payload).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd

# One column's values (and the serializers); read at call time, so either module may be imported first.
from freight.serializers import pandas as _values

try:  # pandas >= 3: builds the frame from the arrays as they are (no inference, no copies)
    from pandas.api.internals import create_dataframe_from_blocks as _from_blocks
except ImportError:  # pragma: no cover - pandas 2
    _from_blocks = None

_DatetimeArray = pd.arrays.DatetimeArray
_TimedeltaArray = pd.arrays.TimedeltaArray
_ExtensionArray = pd.api.extensions.ExtensionArray
# The units pandas stores datetimes and timedeltas in; any other (days, say) breaks its kernels.
_DATETIME_DTYPES = frozenset(np.dtype(f"{kind}8[{unit}]") for kind in "Mm" for unit in ("s", "ms", "us", "ns"))
_NUMPY_KINDS = frozenset("biufcO")  # object arrays only ever come out of a pickle island


def frame_meta(df: pd.DataFrame) -> dict[str, Any]:
    try:
        blocks = _blocks_wire(df)
    except AttributeError:  # pragma: no cover - internals of another pandas version
        blocks = None
    if blocks is None:  # a block layout this module does not know: one entry per column
        return columns_meta(df)
    meta = {"index": _index_meta(df.index), "columns": _index_meta(df.columns), "blocks": blocks}
    attrs = df.attrs
    if attrs:
        meta["attrs"] = dict(attrs)
    if not df.flags.allows_duplicate_labels:
        meta["allows_duplicate_labels"] = False
    return meta


def columns_meta(df: pd.DataFrame) -> dict[str, Any]:
    """The per-column form (what earlier versions wrote)."""
    return {
        "columns": _index_meta(df.columns),
        "index": _index_meta(df.index),
        # items(): half the cost of df.iloc[:, i] per column; duplicate labels are kept.
        "data": [_values._values_meta(_values._column_values(column)) for _, column in df.items()],
        "attrs": dict(df.attrs),
        "allows_duplicate_labels": df.flags.allows_duplicate_labels,
    }


def _blocks_wire(df: pd.DataFrame) -> list[tuple[Any, Any]] | None:
    """The blocks as (values, placement) pairs, or None when pandas lays them out otherwise
    (an ArrayManager, say). Walking blocks instead of ``df.items()`` builds no Series per
    column: that was half the time of dumping a small frame."""
    wire: list[tuple[Any, Any]] = []
    for block in df._mgr.blocks:  # no blocks (pandas 2's ArrayManager): AttributeError
        values = block.values
        positions = block.mgr_locs.as_array
        kind = type(values)
        if kind is np.ndarray:
            if values.ndim != 2:
                return None
            wire.append((_values._writable(values), _placement_wire(positions)))
        elif (kind is _DatetimeArray or kind is _TimedeltaArray) and (zone := _zone_wire(values.dtype)) is not False:
            stored = values._ndarray  # UTC when tz-aware
            stored = _values._writable(stored if stored.ndim == 2 else stored.reshape(1, -1))
            if zone is not None:
                wire.append(({"tz": zone, "utc": stored}, _placement_wire(positions)))
            else:
                wire.append((stored, _placement_wire(positions)))
        else:
            # Extension blocks hold one column, except 2-D ones (period): one entry per row.
            columns = [values] if values.ndim == 1 else [values[i] for i in range(values.shape[0])]
            if len(columns) != len(positions):
                return None
            wire.extend((_values._values_meta(c), int(p)) for c, p in zip(columns, positions))
    return wire


def _zone_wire(dtype: Any) -> str | None | bool:
    """A datetime block's zone as text; None when tz-naive; False when no text names it (the
    block then goes column by column, each pickled)."""
    if getattr(dtype, "tz", None) is None:
        return None
    wire = _values._tz_wire(dtype)
    return False if wire is None else wire


def _placement_wire(positions: np.ndarray) -> Any:
    # One column (most blocks of a mixed frame): a plain int, cheaper to write and read back.
    return int(positions[0]) if len(positions) == 1 else positions


def frame_from(meta: dict[str, Any]) -> pd.DataFrame:
    # Every array is checked to be used in one place only (``seen``, by id): a forged payload can
    # refer to one array from two blocks, or a block and the index, which pandas would then edit
    # together. Only the arrays used are looked at, not the whole metadata.
    seen: set[int] = set()
    index = _index_from(_values._unshared(meta["index"], seen))
    columns = _index_from(_values._unshared(meta["columns"], seen))
    wire = meta["blocks"]
    if not isinstance(wire, list):
        raise ValueError(f"DataFrame blocks are a list, not {type(wire).__name__}")
    length, width = len(index), len(columns)
    covered = bytearray(width)  # 1 where a block puts a column
    total = 0
    blocks = []
    for values, where in wire:
        placement = _placement(where, width, covered, seen)
        total += len(placement)
        blocks.append((_block_values(values, len(placement), length, seen), placement))
    # As many positions as columns, each one covered: every column exactly once.
    if total != width or 0 in covered:
        raise ValueError(f"the blocks' placements must cover the {width} columns exactly once")
    df = _frame(blocks, index, columns)
    attrs = meta.get("attrs")
    if attrs:
        df.attrs.update(attrs)
    flag = meta.get("allows_duplicate_labels", True)
    if flag is not True:  # set_flags copies the frame object: only when it changes anything
        df = df.set_flags(allows_duplicate_labels=flag)
    return df


def _placement(where: Any, width: int, covered: bytearray, seen: set[int]) -> np.ndarray:
    if type(where) is int:
        if not 0 <= where < width:
            raise IndexError(f"block placement {where} outside the {width} columns")
        covered[where] = 1
        return np.array([where], dtype=np.intp)
    if not isinstance(where, np.ndarray) or where.ndim != 1 or where.dtype.kind not in "iu":
        raise ValueError(f"a block placement is a column position or a 1-D integer array, not {type(where).__name__}")
    where = _once(where, seen).astype(np.intp, copy=False)  # uint64 beyond intp turns negative
    if len(where):
        if where.min() < 0 or where.max() >= width:
            raise IndexError(f"block placement outside the {width} columns")
        np.frombuffer(covered, dtype=np.uint8)[where] = 1
    return where


def _once(array: np.ndarray, seen: set[int]) -> np.ndarray:
    """The array, or a copy if it was used already."""
    if id(array) in seen:
        return array.copy()
    seen.add(id(array))
    return array


def _block_values(values: Any, count: int, length: int, seen: set[int]) -> Any:
    """A block's array as pandas expects it, checked: 2-D (count, length) numpy values or a 1-D
    extension array of ``length`` for one column."""
    if type(values) is np.ndarray:  # not a subclass (a masked array, a matrix) pandas would misread
        values = _two_dimensional(_once(values, seen), count, length)
        dtype = values.dtype
        if dtype in _DATETIME_DTYPES:
            array_type = _DatetimeArray if dtype.kind == "M" else _TimedeltaArray
            return array_type._simple_new(values, dtype=dtype)
        if dtype.kind not in _NUMPY_KINDS:
            raise ValueError(f"a DataFrame block of dtype {dtype}")
        return values
    if not isinstance(values, dict):
        raise ValueError(f"a DataFrame block is an array or a dict, not {type(values).__name__}")
    if "tz" in values:
        dtype = _values._dtype_from(values["tz"])
        utc = values["utc"]
        if not isinstance(dtype, pd.DatetimeTZDtype) or type(utc) is not np.ndarray or utc.dtype != f"M8[{dtype.unit}]":
            raise ValueError(f"{dtype} values must be datetime64[{getattr(dtype, 'unit', '?')}]")
        return _DatetimeArray._simple_new(_two_dimensional(_once(utc, seen), count, length), dtype=dtype)
    column = _values._values_from(_values._unshared(values, seen))
    if count != 1 or not isinstance(column, _ExtensionArray) or column.ndim != 1 or len(column) != length:
        raise ValueError(f"an extension block is one 1-D column of {length} values, not {type(column).__name__}")
    return column


def _two_dimensional(values: np.ndarray, count: int, length: int) -> np.ndarray:
    if values.shape != (count, length):
        raise ValueError(f"a block of {count} columns of {length} rows, not of shape {values.shape}")
    return values


def _frame(blocks: list[tuple[Any, np.ndarray]], index: pd.Index, columns: pd.Index) -> pd.DataFrame:
    if _from_blocks is not None:
        return _from_blocks(blocks, index=index, columns=columns)
    # pandas 2: the columns in order, through the per-column constructor.
    by_position: list[Any] = [None] * len(columns)
    for values, placement in blocks:
        if isinstance(values, _ExtensionArray) and values.ndim == 1:
            by_position[placement[0]] = values
        else:
            for row, position in enumerate(placement):
                by_position[position] = values[row]
    return frame_from_columns(by_position, index, columns)


def frame_from_columns(values: list[Any], index: pd.Index, columns: pd.Index) -> pd.DataFrame:
    """A DataFrame of one block per column. pandas' low-level constructor takes the arrays on
    trust (a third of the time of ``DataFrame(dict)``), so what it assumes is checked here: one
    array per column label, each a 1-D numpy or extension array as long as the index."""
    if len(values) != len(columns):
        raise ValueError(f"{len(values)} columns of data for {len(columns)} column labels")
    for v in values:
        if not isinstance(v, (np.ndarray, _ExtensionArray)) or v.ndim != 1 or len(v) != len(index):
            raise ValueError(f"a column must be a 1-D array of {len(index)} values, not {type(v).__name__}")
    if _from_blocks is None:
        df = pd.DataFrame(dict(enumerate(values)), index=index, copy=False)
        df.columns = columns
        return df
    blocks = [
        (v.reshape(1, -1) if isinstance(v, np.ndarray) else v, np.array([i], dtype=np.intp))
        for i, v in enumerate(values)
    ]
    return _from_blocks(blocks, index=index, columns=columns)


def frame_from_data(meta: dict[str, Any]) -> pd.DataFrame:
    """The per-column form (``"data"``)."""
    index = _index_from(meta["index"])
    columns = _index_from(meta["columns"])
    df = frame_from_columns([_values._values_from(v) for v in meta["data"]], index, columns)
    df.attrs.update(meta["attrs"])
    flag = meta["allows_duplicate_labels"]
    return df if flag is True else df.set_flags(allows_duplicate_labels=flag)


# -- labels: the axes of a frame (and of a Series, an Index) and categories ----------------


def _index_meta(index: pd.Index) -> dict[str, Any]:
    if type(index) is pd.RangeIndex:
        return {"range": (index.start, index.stop, index.step), "name": index.name}
    if isinstance(index, pd.MultiIndex):
        return {
            "levels": [_index_meta(level) for level in index.levels],
            "codes": [np.asarray(c) for c in index.codes],
            "names": list(index.names),
        }
    values = index.array if isinstance(index.dtype, pd.api.extensions.ExtensionDtype) else index.to_numpy(copy=False)
    meta: dict[str, Any] = {"values": _values._values_meta(values), "name": index.name}
    freq = getattr(index, "freqstr", None)
    if freq is not None:
        meta["freq"] = freq
    return meta


def _index_from(meta: dict[str, Any]) -> pd.Index:
    if "range" in meta:
        start, stop, step = meta["range"]
        name = meta["name"]
        hash(name)  # what the constructor checks (a name is hashable)
        if _range_simple_new is None:  # pragma: no cover - other pandas versions
            return pd.RangeIndex(start, stop, step, name=name)
        return _range_simple_new(range(start, stop, step), name=name)  # range() takes integers only
    if "levels" in meta:
        levels = [_index_from(level) for level in meta["levels"]]
        codes = [_values._one_dimensional(c, "MultiIndex codes") for c in meta["codes"]]
        for level, c in zip(levels, codes):
            # pandas casts codes to the smallest integer type first, which wraps large ones.
            if c.dtype.kind not in "iu" or (len(c) and (c.min() < -1 or c.max() >= len(level))):
                raise ValueError(f"MultiIndex codes must lie in [-1, {len(level)})")
        return pd.MultiIndex(levels=levels, codes=codes, names=meta["names"])
    key = _labels(meta)
    if key is not None:  # a view: its name is the caller's to change
        return _label_index(*key)._view()
    values = _values._values_from(meta["values"])
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
    dtype, strs = _values._strings(values)
    name = meta["name"]
    hash(name)  # what the constructor checks (a name is hashable)
    if len(strs) > _values._FEW or sum(len(s) for s in strs if s) > _values._FEW_CHARS:
        return None
    return dtype, tuple(strs), name


@functools.lru_cache(maxsize=256)
def _label_index(dtype: Any, labels: tuple[Any, ...], name: Any) -> pd.Index:
    return pd.Index(_values._string_array(dtype, list(labels)), name=name, copy=False)


@functools.lru_cache(maxsize=256)
def _categories(dtype: Any, labels: tuple[Any, ...], name: Any, ordered: bool) -> pd.CategoricalDtype:
    # Checked once by pandas (no missing value, no repeat); one dtype for all the columns loaded
    # with these categories, as pandas itself shares dtypes (copies, astype, concat).
    categories = pd.Index(_values._string_array(dtype, list(labels)), name=name, copy=False)
    return pd.CategoricalDtype(categories, ordered=ordered)


def _categorical_dtype(categories: dict[str, Any], ordered: Any) -> pd.CategoricalDtype:
    key = _labels(categories) if "values" in categories else None
    if key is not None and type(ordered) is bool:
        return _categories(*key, ordered)
    return pd.CategoricalDtype(_index_from(categories), ordered=ordered)
