"""pandas through freight's built-in serializers: every column dtype round-trips exactly, data
travels as frames, only object (and sparse) columns need pickle, indexes, names, attrs, flags;
hypothesis data frames; lazy loading and the missing-library error."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import pandas as hpd

import freight
from support.library_checks import check_lazy_loading

N = 6


def typed_columns() -> dict[str, object]:
    return {
        "int": np.arange(N),
        "uint8": np.arange(N, dtype=np.uint8),
        "float": np.linspace(0, 1, N),
        "float32": np.linspace(0, 1, N).astype(np.float32),
        "bool": np.arange(N) % 2 == 0,
        "datetime": pd.date_range("2020", periods=N),
        "datetime_tz": pd.date_range("2020", periods=N, tz="Europe/Paris"),
        "datetime_tz_ns_nat": pd.array(
            [pd.Timestamp("2020-03-29 01:30", tz="UTC"), pd.NaT, *pd.date_range("2021", periods=N - 2, tz="UTC")],
            dtype="datetime64[ns, America/New_York]",
        ),
        "timedelta": pd.to_timedelta(np.arange(N), unit="s"),
        "category": pd.Categorical(list("abcabc")),
        "ordered_category": pd.Categorical(list("abcabc"), categories=list("cba"), ordered=True),
        "Int64": pd.array([1, None, 3, 4, 5, 6], dtype="Int64"),
        "UInt16": pd.array([1, None, 3, 4, 5, 6], dtype="UInt16"),
        "Float64": pd.array([1.5, None, 3, 4, 5, 6], dtype="Float64"),
        "boolean": pd.array([True, None, False, True, True, False], dtype="boolean"),
        "str_default": ["a", None, "c", "d", "e", "f"],
        "string_python": pd.array(["a", None, "c", "d", "e", "f"], dtype="string[python]"),
        "string_pyarrow": pd.array(["a", None, "c", "d", "e", "f"], dtype="string[pyarrow]"),
        "period": pd.period_range("2020", periods=N, freq="D"),
        "interval": pd.arrays.IntervalArray.from_breaks(range(N + 1)),
        "arrow_int": pd.array([1, 2, None, 4, 5, 6], dtype="int64[pyarrow]"),
        "sparse_int_block": pd.arrays.SparseArray([0, 0, 1, 0, 2, 0], kind="block"),
        "sparse_float": pd.arrays.SparseArray([np.nan, 1.5, np.nan, np.nan, 2.5, np.nan]),
        "sparse_datetime": pd.arrays.SparseArray(pd.to_datetime(["2020", None, None, "2021", None, None])),
        "sparse_bool": pd.arrays.SparseArray([True, False, False, False, True, False], fill_value=False),
    }


@pytest.fixture
def typed_frame() -> pd.DataFrame:
    df = pd.DataFrame(typed_columns(), index=pd.Index(list("uvwxyz"), name="key"))
    df.attrs["source"] = "test"
    return df


def test_every_dtype_round_trips_exactly_without_pickle(typed_frame):
    blob = freight.dumps(typed_frame)
    info = freight.inspect(blob)
    assert not info["needs_pickle"]
    assert info["tags"][0] == "pandas.DataFrame"
    back = freight.loads(blob, allow_pickle=False)
    pd.testing.assert_frame_equal(back, typed_frame)
    assert [str(t) for t in back.dtypes] == [str(t) for t in typed_frame.dtypes]
    assert back.attrs == {"source": "test"}


def test_sparse_columns_travel_as_their_stored_values():
    s = pd.Series(pd.arrays.SparseArray.from_indices(np.arange(3.0), [5, 500_000, 999_999], 1_000_000, fill_value=0.0))
    blob = freight.dumps(s)
    assert len(blob) < 2_000  # the dense column would be 8 MB
    back = freight.loads(blob, allow_pickle=False)
    pd.testing.assert_series_equal(back, s)
    assert back.sparse.density == s.sparse.density


@pytest.mark.parametrize("indices", [[0, 9], [3, 1], [-1, 2]], ids=["beyond length", "not increasing", "negative"])
def test_malformed_sparse_positions_are_refused(indices):
    from freight.serializers.pandas import SeriesSerializer

    meta, _ = SeriesSerializer().serialize(pd.Series(pd.arrays.SparseArray([0, 1, 0, 2, 0])))
    meta["values"]["indices"] = np.array(indices, dtype=np.int32)
    with pytest.raises(freight.DeserializationError, match="pandas.Series"):
        SeriesSerializer().deserialize(meta, [])


def test_loaded_frames_accept_in_place_edits_as_pickled_ones_do(typed_frame):
    # pandas hands out read-only views of its columns; the loaded frame must still be editable.
    back = freight.loads(freight.dumps(typed_frame))
    for column in ("int", "float", "bool", "datetime", "datetime_tz", "category", "Int64", "string_pyarrow"):
        back.loc["u", column] = typed_frame.loc["w", column]
        assert back.loc["u", column] == typed_frame.loc["w", column]
    pd.testing.assert_frame_equal(back.iloc[1:], typed_frame.iloc[1:])


@pytest.mark.parametrize("name", list(typed_columns()))
def test_each_dtype_as_a_series(name):
    s = pd.Series(typed_columns()[name], name=name)
    back = freight.loads(freight.dumps(s), allow_pickle=False)
    pd.testing.assert_series_equal(back, s)


def test_numeric_data_travels_as_frames():
    df = pd.DataFrame({"a": np.arange(100_000), "b": np.random.default_rng(0).random(100_000)})
    frames = freight.dumps_frames(df)
    sizes = sorted(len(f) for f in frames[1:])
    assert 800_000 in sizes  # each column's data is a frame
    pd.testing.assert_frame_equal(freight.loads_frames(frames), df)


def test_only_object_columns_need_pickle(typed_frame):
    for extra in (
        {"obj": [1, "x", None, 2.5, (1, 2), {"k": 1}]},
        {"sparse_obj": pd.arrays.SparseArray(["a", None] * 3)},
    ):
        df = typed_frame.assign(**extra)
        blob = freight.dumps(df)
        assert freight.inspect(blob)["needs_pickle"]
        with pytest.raises(freight.UnsafePayloadError):
            freight.loads(blob, allow_pickle=False)
        pd.testing.assert_frame_equal(freight.loads(blob), df)


@pytest.mark.parametrize(
    "index",
    [
        pd.RangeIndex(0, 12, 2, name="r"),
        pd.MultiIndex.from_product([["a", "b"], [1, 2, 3]], names=["x", "y"]),
        pd.date_range("2020", periods=6, freq="D", tz="UTC", name="when"),
        pd.CategoricalIndex(list("abcabc")),
        pd.period_range("2020", periods=6, freq="M"),
        pd.interval_range(0, 6),
        pd.Index([1.5, 2.5, 3.5, 4.5, 5.5, 6.5]),
        pd.timedelta_range("1s", periods=6, freq="s"),
    ],
    ids=lambda i: type(i).__name__,
)
def test_index_kinds_round_trip_exactly(index):
    back = freight.loads(freight.dumps(index), allow_pickle=False)
    pd.testing.assert_index_equal(back, index, exact=True)
    assert getattr(back, "freq", None) == getattr(index, "freq", None)
    df = pd.DataFrame({"v": np.arange(len(index))}, index=index)
    pd.testing.assert_frame_equal(freight.loads(freight.dumps(df)), df)


def test_column_names_of_any_hashable_type_and_flags():
    df = pd.DataFrame({0: [1], 1.5: [2], None: [3], ("t", 1): [4]})
    pd.testing.assert_frame_equal(freight.loads(freight.dumps(df)), df)
    multi = pd.DataFrame(np.arange(6).reshape(2, 3), columns=pd.MultiIndex.from_tuples([("a", 1), ("a", 2), ("b", 1)]))
    pd.testing.assert_frame_equal(freight.loads(freight.dumps(multi)), multi)
    strict = pd.DataFrame({"a": [1]}).set_flags(allows_duplicate_labels=False)
    assert freight.loads(freight.dumps(strict)).flags.allows_duplicate_labels is False
    dup = pd.DataFrame([[1, 2]], columns=["a", "a"])
    pd.testing.assert_frame_equal(freight.loads(freight.dumps(dup)), dup)
    empty = pd.DataFrame()
    pd.testing.assert_frame_equal(freight.loads(freight.dumps(empty)), empty)


@dataclasses.dataclass
class Holder:
    frame: object
    again: object


def test_frames_nested_in_containers_and_pickled_objects(typed_frame):
    back = freight.loads(freight.dumps({"df": typed_frame, "n": 3}), allow_pickle=False)
    pd.testing.assert_frame_equal(back["df"], typed_frame)
    held = freight.loads(freight.dumps(Holder(typed_frame, typed_frame)))
    pd.testing.assert_frame_equal(held.frame, typed_frame)
    assert held.again is held.frame


@given(
    hpd.data_frames(
        [
            hpd.column("i", dtype=np.int64),
            hpd.column("f", dtype=np.float64),
            hpd.column("b", dtype=bool),
            hpd.column("t", dtype="datetime64[ns]"),
            hpd.column("s", elements=st.text(max_size=5)),
        ],
        index=hpd.range_indexes(max_size=20),
    )
)
def test_hypothesis_data_frames_round_trip(df):
    pd.testing.assert_frame_equal(freight.loads(freight.dumps(df)), df)


def test_lazy_loading_and_the_missing_library_error(tmp_path, typed_frame):
    assert check_lazy_loading(tmp_path, typed_frame, "pandas", "pandas", "x.shape") == str(typed_frame.shape)


def test_attrs_keep_shared_arrays_shared():
    arr = np.arange(3)
    df = pd.DataFrame({"a": [1, 2, 3]})
    df.attrs.update(first=arr, second=arr)
    back = freight.loads(freight.dumps(df), allow_pickle=False)
    assert back.attrs["first"] is back.attrs["second"]
