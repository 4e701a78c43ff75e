"""pandas DataFrames block by block, the way pickle sees them.

Each numpy block (all the int64 columns, say) travels as one 2-D array with its column
positions, datetime and timedelta blocks as their 2-D datetime64/timedelta64 values, extension
blocks (categorical, str, nullable, period, ...) one column each through
``freight.serializers.pandas_columns``, which also writes and reads the frame's axes (labels).
This module builds on that one and is imported by the serializers in
``freight.serializers.pandas``; it imports neither back. Loading hands all blocks to pandas'
``create_dataframe_from_blocks`` at once, which takes them on trust, so everything it assumes
is checked here first. The metadata: ``{"index", "columns", "blocks": [(values, placement),
...]}``, plus ``"attrs"`` when not empty and ``"allows_duplicate_labels": False`` when so, where
``placement`` is a column position (one column) or a 1-D integer array, and ``values`` a 2-D
array (a numpy block, or datetime64/timedelta64 for a tz-naive datetime or timedelta block),
``{"tz", "utc"}`` with 2-D UTC values for a tz-aware one, or one extension column's metadata.
Payloads of earlier versions hold one entry per column under ``"data"`` (``frame_from_data``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from freight.serializers.pandas_columns import (
    column_values,
    dtype_from,
    index_from,
    index_meta,
    tz_wire,
    unshared,
    values_from,
    values_meta,
    writable,
)

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
    meta = {"index": index_meta(df.index), "columns": index_meta(df.columns), "blocks": blocks}
    attrs = df.attrs
    if attrs:
        meta["attrs"] = dict(attrs)
    if not df.flags.allows_duplicate_labels:
        meta["allows_duplicate_labels"] = False
    return meta


def columns_meta(df: pd.DataFrame) -> dict[str, Any]:
    """The per-column form (what earlier versions wrote)."""
    return {
        "columns": index_meta(df.columns),
        "index": index_meta(df.index),
        # items(): half the cost of df.iloc[:, i] per column; duplicate labels are kept.
        "data": [values_meta(column_values(column)) for _, column in df.items()],
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
            wire.append((writable(values), _placement_wire(positions)))
        elif (kind is _DatetimeArray or kind is _TimedeltaArray) and (zone := _zone_wire(values.dtype)) is not False:
            stored = values._ndarray  # UTC when tz-aware
            stored = writable(stored if stored.ndim == 2 else stored.reshape(1, -1))
            if zone is not None:
                wire.append(({"tz": zone, "utc": stored}, _placement_wire(positions)))
            else:
                wire.append((stored, _placement_wire(positions)))
        else:
            # Extension blocks hold one column, except 2-D ones (period): one entry per row.
            columns = [values] if values.ndim == 1 else [values[i] for i in range(values.shape[0])]
            if len(columns) != len(positions):
                return None
            wire.extend((values_meta(c), int(p)) for c, p in zip(columns, positions))
    return wire


def _zone_wire(dtype: Any) -> str | None | bool:
    """A datetime block's zone as text; None when tz-naive; False when no text names it (the
    block then goes column by column, each pickled)."""
    if getattr(dtype, "tz", None) is None:
        return None
    wire = tz_wire(dtype)
    return False if wire is None else wire


def _placement_wire(positions: np.ndarray) -> Any:
    # One column (most blocks of a mixed frame): a plain int, cheaper to write and read back.
    return int(positions[0]) if len(positions) == 1 else positions


def frame_from(meta: dict[str, Any]) -> pd.DataFrame:
    # Every array is checked to be used in one place only (``seen``, by id): a forged payload can
    # refer to one array from two blocks, or a block and the index, which pandas would then edit
    # together. Only the arrays used are looked at, not the whole metadata.
    seen: set[int] = set()
    index = index_from(unshared(meta["index"], seen))
    columns = index_from(unshared(meta["columns"], seen))
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
        dtype = dtype_from(values["tz"])
        utc = values["utc"]
        if not isinstance(dtype, pd.DatetimeTZDtype) or type(utc) is not np.ndarray or utc.dtype != f"M8[{dtype.unit}]":
            raise ValueError(f"{dtype} values must be datetime64[{getattr(dtype, 'unit', '?')}]")
        return _DatetimeArray._simple_new(_two_dimensional(_once(utc, seen), count, length), dtype=dtype)
    column = values_from(unshared(values, seen))
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
    index = index_from(meta["index"])
    columns = index_from(meta["columns"])
    df = frame_from_columns([values_from(v) for v in meta["data"]], index, columns)
    df.attrs.update(meta["attrs"])
    flag = meta["allows_duplicate_labels"]
    return df if flag is True else df.set_flags(allows_duplicate_labels=flag)
