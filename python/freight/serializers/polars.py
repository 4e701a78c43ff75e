"""polars DataFrame and Series, through Arrow (``to_arrow`` / ``from_arrow``, zero copy where
polars allows): nested list/struct/array columns, categorical/enum, decimal and temporal types
with time zones round-trip with their exact schema, and no pickle is involved. Columns of
polars' Object dtype have no Arrow form and polars cannot pickle them either: they are refused
with a clear error. A LazyFrame is refused with an error saying to collect it first: its plan can
hold Python functions. Imported the first time a polars object is serialized or a
``polars.*`` payload is loaded; registers into ``freight.registry.BUILTINS``.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from freight.exceptions import DeserializationError, SerializationError
from freight.registry import BUILTINS
from freight.serializers import LibrarySerializer


def _has_objects(dtypes: Any) -> bool:
    return any(dtype == pl.Object for dtype in dtypes)


def _refuse_objects() -> None:
    raise SerializationError(
        "polars columns of dtype Object hold arbitrary Python objects that neither Arrow nor polars "
        "itself can serialize; convert them (for example to strings or a struct) before serializing"
    )


class _PolarsSerializer(LibrarySerializer):
    errors = (Exception,)  # polars raises its own exception family


class DataFrameSerializer(_PolarsSerializer):
    tag = "polars.DataFrame"
    types = (pl.DataFrame,)

    def serialize(self, df: pl.DataFrame) -> tuple[Any, list[Any]]:
        if _has_objects(df.dtypes):
            _refuse_objects()
        return {"table": df.to_arrow()}, []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> pl.DataFrame:
        out = pl.from_arrow(meta["table"])
        assert isinstance(out, pl.DataFrame)
        return out


class SeriesSerializer(_PolarsSerializer):
    tag = "polars.Series"
    types = (pl.Series,)

    def serialize(self, s: pl.Series) -> tuple[Any, list[Any]]:
        if _has_objects([s.dtype]):
            _refuse_objects()
        # As a one-column table: its schema metadata keeps what a bare array loses (Enum).
        return {"table": s.to_frame().to_arrow()}, []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> pl.Series:
        out = pl.from_arrow(meta["table"])
        assert isinstance(out, pl.DataFrame)
        return out.to_series(0)


class LazyFrameSerializer(_PolarsSerializer):
    tag = "polars.LazyFrame"
    types = (pl.LazyFrame,)

    def serialize(self, lf: pl.LazyFrame) -> tuple[Any, list[Any]]:
        raise SerializationError(
            "freight does not serialize a polars LazyFrame (its plan can hold Python functions); "
            "collect it first: freight.dumps(lazy_frame.collect())"
        )

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        raise DeserializationError("a polars LazyFrame payload cannot be loaded")


for _serializer in (DataFrameSerializer(), SeriesSerializer(), LazyFrameSerializer()):
    BUILTINS.register(_serializer)
