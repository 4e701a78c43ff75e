"""polars DataFrame and Series, through freight's Rust Arrow path (see
``freight.serializers.arrow``): polars exports its columns through the Arrow PyCapsule interface
(no copy) and the walker writes their node, and polars imports the validated arrays back the
same way; no pyarrow is involved. Nested
list/struct/array columns, categorical/enum, decimal and temporal types with time zones
round-trip with their exact schema, and no pickle is involved. Frames with a dtype Arrow has no
type for (Int128) travel in polars' own IPC format instead (one copy). Payloads written before
the Rust path (a pyarrow table under ``"table"``) still load. Columns of
polars' Object dtype have no Arrow form and polars cannot pickle them either: they are refused
with a clear error. A LazyFrame travels as its query plan (polars' binary format); since polars
unpickles the Python functions a plan may hold, its serializer is not ``safe``. Imported the
first time a polars object is serialized or a ``polars.*`` payload is loaded
(``freight.registry`` registers its ``SERIALIZERS``).
"""

from __future__ import annotations

import io
from typing import Any

import polars as pl

from freight._freight import ArrowMeta, arrow_dumps, arrow_loads
from freight.exceptions import DeserializationError, ProducerVersionError, SerializationError
from freight.serializers import LibrarySerializer


def _has_objects(dtypes: Any) -> bool:
    # By dtype class: polars' dtype equality runs Python code per column (twice the cost).
    return pl.Object in {type(dtype) for dtype in dtypes}


def _refuse_objects() -> None:
    raise SerializationError(
        "polars columns of dtype Object hold arbitrary Python objects that neither Arrow nor polars "
        "itself can serialize; convert them (for example to strings or a struct) before serializing"
    )


class _Stream:
    """Hands a stream capsule to polars' constructors, which take objects exporting one."""

    __slots__ = ("capsule",)

    def __init__(self, capsule: Any):
        self.capsule = capsule

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.capsule


try:  # polars' own import of a stream, without the constructors' type checks (paid on every call)
    from polars._plr import PySeries as _PySeries
    from polars._utils.wrap import wrap_df as _wrap_df
    from polars._utils.wrap import wrap_s as _wrap_s

    def _frame_from(stream: _Stream) -> pl.DataFrame:
        return _wrap_df(_PySeries.from_arrow_c_stream(stream).struct_unnest())

    def _series_from(stream: _Stream) -> pl.Series:
        return _wrap_s(_PySeries.from_arrow_c_stream(stream))
except ImportError:  # pragma: no cover - other polars versions: the public constructors

    def _frame_from(stream: _Stream) -> pl.DataFrame:
        return pl.DataFrame(stream)

    def _series_from(stream: _Stream) -> pl.Series:
        return pl.Series(stream)


class _PolarsSerializer(LibrarySerializer):
    errors = (Exception,)  # polars raises its own exception family


def _exported(value: Any) -> tuple[Any, list[Any]]:
    try:
        return arrow_dumps(value)
    except SerializationError:
        # A dtype Arrow has no type for (polars' Int128): polars' own IPC format, one frame (a
        # copy). No pickle: polars reads it back with its own reader.
        frame = value.to_frame() if isinstance(value, pl.Series) else value
        sink = io.BytesIO()
        frame.write_ipc(sink, compat_level=pl.CompatLevel.newest())
        return {"ipc": 0}, [sink.getbuffer()]


def _from_ipc(meta: dict[str, Any], frames: list[memoryview]) -> pl.DataFrame:
    if meta["ipc"] != 0 or len(frames) != 1:
        raise ValueError("a polars IPC payload holds one frame")
    return pl.read_ipc(io.BytesIO(frames[0]))


def _no_objects(value: Any) -> bool:
    """Whether the walker may write ``value``'s Arrow node (``arrow_node``): polars exports an
    Object column as fixed_size_binary[8] holding its objects' addresses, so those frames and
    series go to ``serialize``, which refuses them."""
    return not _has_objects(value.dtypes if isinstance(value, pl.DataFrame) else (value.dtype,))


class DataFrameSerializer(_PolarsSerializer):
    tag = "polars.DataFrame"
    types = (pl.DataFrame,)
    arrow_node = staticmethod(_no_objects)
    #: the decoder hands Rust-form metadata over as one ArrowMeta, read straight from the payload
    arrow_meta = True

    def serialize(self, df: pl.DataFrame) -> tuple[Any, list[Any]]:
        if _has_objects(df.dtypes):
            _refuse_objects()
        return _exported(df)

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> pl.DataFrame:
        if isinstance(meta, (ArrowMeta, tuple)):
            return _frame_from(_Stream(arrow_loads(meta, frames, "stream")))
        if "ipc" in meta:
            return _from_ipc(meta, frames)
        return pl.DataFrame(meta["table"])  # a payload of an earlier version: a pyarrow table


class SeriesSerializer(_PolarsSerializer):
    tag = "polars.Series"
    types = (pl.Series,)
    arrow_node = staticmethod(_no_objects)
    arrow_meta = True

    def serialize(self, s: pl.Series) -> tuple[Any, list[Any]]:
        if _has_objects([s.dtype]):
            _refuse_objects()
        return _exported(s)

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> pl.Series:
        if isinstance(meta, (ArrowMeta, tuple)):
            return _series_from(_Stream(arrow_loads(meta, frames, "stream")))
        if "ipc" in meta:
            return _from_ipc(meta, frames).to_series(0)
        out = pl.from_arrow(meta["table"])  # a payload of an earlier version: a one-column table
        assert isinstance(out, pl.DataFrame)
        return out.to_series(0)


class LazyFrameSerializer(_PolarsSerializer):
    """A LazyFrame travels as its query plan in polars' own binary form (the data of in-memory
    sources included). Not ``safe``: polars pickles the Python functions a plan holds
    (``map_elements``, UDFs) and unpickles them on load, so ``allow_pickle=False`` refuses these
    payloads. polars' plan format is not stable across its versions: a payload from another
    version that fails to load says so."""

    tag = "polars.LazyFrame"
    types = (pl.LazyFrame,)
    safe = False

    def serialize(self, lf: pl.LazyFrame) -> tuple[Any, list[Any]]:
        try:
            plan = lf.serialize(format="binary")
        except Exception as exc:  # noqa: BLE001 - polars raises its own family
            raise SerializationError(
                f"polars cannot serialize this LazyFrame's plan ({exc}); collect it first: "
                "freight.dumps(lazy_frame.collect())"
            ) from exc
        return {"plan": plan, "polars": pl.__version__}, []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        try:
            return pl.LazyFrame.deserialize(io.BytesIO(meta["plan"]), format="binary")
        except Exception as exc:  # noqa: BLE001 - polars raises its own family
            written = meta.get("polars", "?")
            if written != pl.__version__:  # the usual reason: polars' plan format changes with its version
                raise ProducerVersionError(
                    f"polars cannot load this LazyFrame plan written by polars {written}: this process has "
                    f"polars {pl.__version__} ({exc}); plans are portable only between equal polars "
                    "versions: send the collected frame (lazy_frame.collect()), which crosses versions, or "
                    "install the writer's polars version here"
                ) from exc
            raise DeserializationError(f"polars cannot load this LazyFrame plan: {exc}") from exc


# What freight.registry registers into its BUILTINS layer when it loads this module.
SERIALIZERS = (DataFrameSerializer(), SeriesSerializer(), LazyFrameSerializer())
