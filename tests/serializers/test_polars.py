"""polars through freight's built-in serializers: exact schemas (nested, categorical/enum,
decimal, temporal with tz), no pickle, LazyFrames as their plan (not safe: polars unpickles
UDFs), Object columns refused with a clear error, lazy loading and the missing-library error."""

from __future__ import annotations

import datetime as dt
import decimal

import polars as pl
import pytest

import freight
from support.library_checks import check_lazy_loading, loaded_without_pickle


def frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "i": [1, 2, None],
            "u8": pl.Series([1, 2, 3], dtype=pl.UInt8),
            "f": [1.5, None, 3.0],
            "b": [True, False, None],
            "s": ["a", None, "ccc"],
            "enum": pl.Series(["a", "b", "a"], dtype=pl.Enum(["a", "b"])),
            "cat": pl.Series(["x", "y", "x"], dtype=pl.Categorical),
            "dec": pl.Series([decimal.Decimal("1.10"), None, decimal.Decimal("-2.50")]),
            "date": [dt.date(2020, 1, 1), None, dt.date(2021, 6, 1)],
            "ts_tz": pl.Series([dt.datetime(2020, 1, 1)] * 3).dt.replace_time_zone("Europe/Paris"),
            "dur": pl.Series([dt.timedelta(seconds=1)] * 3),
            "list": [[1], [2, 3], None],
            "struct": [{"a": 1, "b": "x"}, {"a": 2, "b": None}, None],
            "array": pl.Series([[1, 2], [3, 4], [5, 6]], dtype=pl.Array(pl.Int64, 2)),
            "bin": [b"a", None, b"\x00"],
        }
    )


def test_frames_round_trip_with_their_exact_schema_and_no_pickle():
    df = frame()
    back, from_frames = loaded_without_pickle(df)
    assert back.schema == df.schema
    assert back.equals(df)
    assert from_frames.equals(df)


@pytest.mark.parametrize("column", frame().columns)
def test_each_column_as_a_series(column):
    s = frame()[column]
    back = freight.loads(freight.dumps(s), allow_pickle=False)
    assert back.name == s.name and back.dtype == s.dtype
    assert back.equals(s)


def test_empty_and_large_frames():
    empty = pl.DataFrame({"a": pl.Series([], dtype=pl.Int64)})
    assert freight.loads(freight.dumps(empty)).equals(empty)
    big = pl.DataFrame({"a": range(1_000_000), "b": [1.5] * 1_000_000})
    assert freight.loads(freight.dumps(big, compression="lz4")).equals(big)


def test_lazy_frames_travel_as_their_plan_and_need_pickle_permission():
    lazy = frame().lazy().filter(pl.col("i") > 1).with_columns((pl.col("i") * 2).alias("twice"))
    blob = freight.dumps({"query": lazy})
    assert "polars.LazyFrame" in freight.inspect(blob)["tags"]
    with pytest.raises(freight.UnsafePayloadError, match="polars.LazyFrame"):
        freight.loads(blob, allow_pickle=False)  # its plan may hold pickled Python functions
    back = freight.loads(blob)["query"]
    assert isinstance(back, pl.LazyFrame)
    assert back.collect().equals(lazy.collect())


def test_lazy_frames_with_python_functions_round_trip():
    lazy = pl.LazyFrame({"a": [1, 2, 3]}).with_columns(
        pl.col("a").map_batches(lambda s: s * 10, return_dtype=pl.Int64).alias("b")
    )
    assert freight.loads(freight.dumps(lazy)).collect().equals(lazy.collect())


def test_a_plan_polars_cannot_read_names_the_versions():
    from freight.serializers.polars import LazyFrameSerializer

    meta = {"plan": b"not a plan", "polars": "0.0.1"}
    with pytest.raises(freight.DeserializationError, match="written by polars 0.0.1"):
        LazyFrameSerializer().deserialize(meta, [])


def test_object_columns_are_refused_with_advice():
    # Neither Arrow nor polars' own pickling can serialize Object columns.
    df = pl.DataFrame({"o": pl.Series([object(), object()], dtype=pl.Object), "i": [1, 2]})
    with pytest.raises(freight.SerializationError, match="Object"):
        freight.dumps(df)


def test_lazy_loading_and_the_missing_library_error(tmp_path):
    assert check_lazy_loading(tmp_path, frame(), "polars", "polars", "x.shape") == str(frame().shape)
