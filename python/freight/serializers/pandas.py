"""The serializers of pandas DataFrame, Series and Index (``SERIALIZERS``, which
``freight.registry`` registers). Imported the first time a pandas object is serialized or a
``pandas.*`` payload is loaded.

What travels how is the business of the modules below, which never import this one: one
column's values and the axes' labels in ``freight.serializers.pandas_columns`` (column data as
frames, not through pickle; only object columns are pickled in place), DataFrames block by block
in ``freight.serializers.pandas_blocks``. Names of any type, ``attrs`` and ``flags`` are kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from freight import _versions
from freight.exceptions import DeserializationError
from freight.serializers import LibrarySerializer
from freight.serializers.pandas_blocks import frame_from, frame_from_data, frame_meta
from freight.serializers.pandas_columns import column_values, index_from, index_meta, unshared, values_from, values_meta


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
        return super().deserialize(unshared(meta, set()), frames)


class DataFrameSerializer(_PandasSerializer):
    """Block by block (``freight.serializers.pandas_blocks``); payloads of earlier versions hold
    one entry per column under ``"data"``."""

    tag = "pandas.DataFrame"
    types = (pd.DataFrame,)

    def serialize(self, df: pd.DataFrame) -> tuple[Any, list[Any]]:
        return frame_meta(df), []

    def _decode(self, meta: Any, frames: list[memoryview]) -> Any:
        if isinstance(meta, dict) and "blocks" in meta:  # checks the arrays it uses for sharing itself
            return LibrarySerializer.deserialize(self, meta, frames)
        return super()._decode(meta, frames)

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> pd.DataFrame:
        if "blocks" in meta:
            return frame_from(meta)
        return frame_from_data(meta)


class SeriesSerializer(_PandasSerializer):
    tag = "pandas.Series"
    types = (pd.Series,)

    def serialize(self, s: pd.Series) -> tuple[Any, list[Any]]:
        return {
            "values": values_meta(column_values(s)),
            "index": index_meta(s.index),
            "name": s.name,
            "attrs": dict(s.attrs),
            "allows_duplicate_labels": s.flags.allows_duplicate_labels,
        }, []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> pd.Series:
        values = values_from(meta["values"])
        # An object array keeps its dtype, as pickle does (pandas 3 would make strs its "str").
        dtype = values.dtype if type(values) is np.ndarray and values.dtype.kind == "O" else None
        name = meta["name"]
        try:
            hash(name)
        except TypeError:  # pandas refuses it; pickle sets it as pandas' own __setstate__ does
            s = pd.Series(values, index=index_from(meta["index"]), dtype=dtype, copy=False)
            object.__setattr__(s, "_name", name)
        else:
            s = pd.Series(values, index=index_from(meta["index"]), dtype=dtype, name=name, copy=False)
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
        return index_meta(index), []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> pd.Index:
        return index_from(meta)


# What freight.registry registers into its BUILTINS layer when it loads this module.
SERIALIZERS = (DataFrameSerializer(), SeriesSerializer(), IndexSerializer())
