"""pandas values come back from freight as they come back from pickle: same classes, same dtype
for every column, index, column labels and MultiIndex level. The case that broke: object-dtype
strings, which pandas 3 would turn into its ``str`` dtype when freight rebuilt the Index or
Series from their values (pickle keeps ``object``)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

import freight


def _obj(values, **kwargs):
    return pd.Index(values, dtype=object, **kwargs)


def assert_like_pickle(value) -> None:
    got = freight.loads(freight.dumps(value))
    want = pickle.loads(pickle.dumps(value, protocol=5))
    _same(got, want)


def _same(got, want) -> None:
    assert type(got) is type(want)
    if isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want, check_exact=True, check_index_type=True, check_column_type=True)
        assert list(got.dtypes) == list(want.dtypes)
        _same(got.index, want.index)
        _same(got.columns, want.columns)
    elif isinstance(want, pd.Series):
        pd.testing.assert_series_equal(got, want, check_exact=True, check_index_type=True, check_series_type=True)
        assert got.dtype == want.dtype
        _same(got.index, want.index)
    elif isinstance(want, pd.MultiIndex):
        pd.testing.assert_index_equal(got, want, exact=True)
        for g, w in zip(got.levels, want.levels):
            _same(g, w)
    elif isinstance(want, pd.Index):
        pd.testing.assert_index_equal(got, want, exact=True)
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        if isinstance(want.dtype, pd.CategoricalDtype):
            _same(got.dtype.categories, want.dtype.categories)
    else:
        raise AssertionError(f"no comparison for {type(want).__name__}")


INDEXES = {
    "object strs": _obj(["a", "b"]),
    "object strs with None": _obj(["a", None, "c"]),
    "object strs, named": _obj(["x", "y"], name="key"),
    "many object strs": _obj([f"s{i}" for i in range(200)]),
    "object ints": _obj([1, 2, 3]),
    "object bools": _obj([True, False]),
    "object mixed": _obj([1, "a", 2.5, None]),
    "object Timestamps": _obj([pd.Timestamp("2024-01-01"), pd.Timestamp("2024-01-02")]),
    "empty object": _obj([]),
    "default strs": pd.Index(["a", "b"]),
    "string[python]": pd.Index(["a", None], dtype="string[python]"),
    "object categories": pd.CategoricalIndex(["a", "b", "a"], categories=_obj(["a", "b"])),
}


@pytest.mark.parametrize("index", INDEXES.values(), ids=INDEXES.keys())
def test_index(index) -> None:
    assert_like_pickle(index)


@pytest.mark.parametrize("index", INDEXES.values(), ids=INDEXES.keys())
def test_series_values_and_index(index) -> None:
    values = np.arange(len(index))
    assert_like_pickle(pd.Series(values, index=index, name="n"))
    if isinstance(index, pd.CategoricalIndex):
        return
    assert_like_pickle(pd.Series(index.to_numpy(), dtype=index.dtype, name=index.name))


@pytest.mark.parametrize("index", INDEXES.values(), ids=INDEXES.keys())
def test_dataframe_columns_index_and_labels(index) -> None:
    n = len(index)
    if isinstance(index, pd.CategoricalIndex):
        assert_like_pickle(pd.DataFrame({"v": np.arange(n)}, index=index))
        return
    column = pd.Series(index.to_numpy(), dtype=index.dtype)
    df = pd.DataFrame({"data": column, "n": np.arange(n)})
    df.index = index
    assert_like_pickle(df)
    if index.is_unique:  # as column labels
        assert_like_pickle(pd.DataFrame(np.zeros((2, n)), columns=index))


def test_multiindex_levels() -> None:
    levels = pd.MultiIndex.from_arrays(
        [_obj(["a", "a", "b"]), [1, 2, 1], pd.Index(["u", "v", "w"])], names=["o", "i", "s"]
    )
    assert_like_pickle(levels)
    assert_like_pickle(pd.Series([1.0, 2.0, 3.0], index=levels))
    assert_like_pickle(pd.DataFrame(np.ones((2, 3)), columns=levels))
    assert_like_pickle(pd.DataFrame({"v": [1, 2, 3]}, index=levels))


def test_categorical_column_with_object_categories() -> None:
    dtype = pd.CategoricalDtype(_obj(["lo", "hi"]), ordered=True)
    assert_like_pickle(pd.DataFrame({"c": pd.Categorical(["lo", "hi", None], dtype=dtype)}))
    assert_like_pickle(pd.Series(pd.Categorical(["hi"], dtype=dtype)))


def test_str_dtype_stays_str() -> None:
    # the other direction: a NaN-semantics string column is not turned into object
    s = pd.Series(pd.array(["a", None], dtype=pd.StringDtype("pyarrow", na_value=np.nan)))
    assert_like_pickle(s)
    assert_like_pickle(s.to_frame().set_index(0, drop=False))
