"""The comparison the pandas property tests use (tests/fidelity/test_fidelity_pandas_properties.py):
freight's round trip of a DataFrame, Series or Index against pickle's, stricter than pandas' own
where pandas' is loose (1 == 1.0 == True in object columns, -0.0 == 0.0, a label's type, the zone
of equal dtypes): classes, dtypes, values bit for bit, labels of every axis and level, ``freq``,
``attrs``, ``flags``."""

from __future__ import annotations

import decimal
import inspect
import pickle
from typing import Any

import numpy as np
import pandas as pd
import pandas._testing as tm

import freight
from support.fidelity import assert_same

# -- The comparison -------------------------------------------------------------------------------
# freight's result against pickle's, stricter than pandas' own where pandas' is loose (1 == 1.0 ==
# True in object columns, -0.0 == 0.0, a label's type, the zone of equal dtypes).

_STRICT = dict(check_exact=True, check_dtype=True, check_index_type=True, check_categorical=True)
# pandas 3 asks for it (and warns without it); pandas 2 has no such keyword. Checked below anyway.
_INDEX_FREQ = {"check_freq": True} if "check_freq" in inspect.signature(tm.assert_index_equal).parameters else {}


def assert_pandas_same(want: Any, got: Any, path: str = "obj") -> None:
    assert type(got) is type(want), f"{path}: type {type(got)} != {type(want)}"
    if isinstance(want, pd.DataFrame):
        tm.assert_frame_equal(
            _comparable(got), _comparable(want), check_column_type=True, check_freq=True, check_flags=True, **_STRICT
        )
        _index_same(want.index, got.index, f"{path}.index")
        _index_same(want.columns, got.columns, f"{path}.columns")
        for i in range(want.shape[1]):
            _array_same(want.iloc[:, i].array, got.iloc[:, i].array, f"{path}.iloc[:, {i}]")
    elif isinstance(want, pd.Series):
        tm.assert_series_equal(
            _comparable(got), _comparable(want), check_series_type=True, check_freq=True, check_flags=True, **_STRICT
        )
        _cell_same(want.name, got.name, f"{path}.name")
        _index_same(want.index, got.index, f"{path}.index")
        _array_same(want.array, got.array, f"{path}.array")
    else:
        _index_same(want, got, path)
    if not isinstance(want, pd.Index):
        assert got.attrs == want.attrs, f"{path}: attrs {got.attrs} != {want.attrs}"
        assert got.flags == want.flags, f"{path}: flags {got.flags} != {want.flags}"


def _comparable(obj: Any) -> Any:
    """What pandas' assertions compare: object cells, and the labels of an Arrow index, as their
    repr. pandas compares them with ``==``: a tuple holding NaN equals another only if both hold
    the same NaN object, which two loads never share, and an Arrow index holding NaN is unequal
    to itself (pickle's own two loads differ so). The values themselves are compared in
    _array_same (types, bits)."""
    if isinstance(obj, pd.MultiIndex) or not isinstance(obj, (pd.Index, pd.Series, pd.DataFrame)):
        return obj
    if isinstance(obj, pd.Index):
        if obj.dtype != object and not isinstance(obj.dtype, pd.ArrowDtype):
            return obj
        return pd.Index(np.array([repr(v) for v in obj], dtype=object), dtype=object, name=obj.name)
    out = obj.copy()
    if isinstance(obj, pd.Series):
        out = out.set_axis(_comparable(obj.index))
        return out if obj.dtype != object else pd.Series(_comparable(pd.Index(obj)), out.index, name=obj.name)
    out = out.set_axis(_comparable(obj.index), axis=0).set_axis(_comparable(obj.columns), axis=1)
    for i, dtype in enumerate(obj.dtypes):
        if isinstance(dtype, np.dtype) and dtype.kind == "O":
            out.isetitem(i, _comparable(pd.Index(obj.iloc[:, i])).to_numpy())
    return out


def _index_same(want: pd.Index, got: pd.Index, path: str) -> None:
    assert type(got) is type(want), f"{path}: type {type(got)} != {type(want)}"
    tm.assert_index_equal(
        _comparable(got), _comparable(want), exact=True, check_exact=True, check_categorical=True, **_INDEX_FREQ
    )
    _cell_same(list(want.names), list(got.names), f"{path}.names")
    assert getattr(got, "freq", None) == getattr(want, "freq", None), f"{path}: freq {got.freq} != {want.freq}"
    if isinstance(want, pd.RangeIndex):
        assert (got.start, got.stop, got.step) == (want.start, want.stop, want.step), f"{path}: range"
    elif isinstance(want, pd.MultiIndex):
        for i, (w, g) in enumerate(zip(want.levels, got.levels)):
            _index_same(w, g, f"{path}.levels[{i}]")
        for i, (w, g) in enumerate(zip(want.codes, got.codes)):
            assert np.array_equal(w, g), f"{path}.codes[{i}]"
    else:
        _array_same(want.array, got.array, f"{path}.array")


def _array_same(want: Any, got: Any, path: str) -> None:
    """One column's (or index's) values, beyond what pandas' equality looks at."""
    dtype = want.dtype
    assert type(got.dtype) is type(dtype) and got.dtype == dtype, f"{path}: dtype {got.dtype!r} != {dtype!r}"
    assert str(got.dtype) == str(dtype), f"{path}: dtype {got.dtype} != {dtype}"
    zone = _zone(dtype)  # equal dtypes may hold different zones (ZoneInfo("UTC"), timezone.utc)
    assert (type(_zone(got.dtype)), repr(_zone(got.dtype))) == (type(zone), repr(zone)), f"{path}: zone"
    if isinstance(dtype, pd.CategoricalDtype):
        _index_same(dtype.categories, got.dtype.categories, f"{path}.categories")
        assert dtype.ordered == got.dtype.ordered, f"{path}: ordered"
    elif isinstance(dtype, pd.SparseDtype):
        assert_same(want.fill_value, got.fill_value, f"{path}.fill_value")
        assert want.kind == got.kind, f"{path}: kind {got.kind} != {want.kind}"
        assert np.array_equal(want.sp_index.indices, got.sp_index.indices), f"{path}: sparse positions"
        _numpy_same(np.asarray(want.sp_values), np.asarray(got.sp_values), f"{path}.sp_values")
    elif isinstance(dtype, pd.IntervalDtype):
        _array_same(want.left, got.left, f"{path}.left")
        _array_same(want.right, got.right, f"{path}.right")
    elif isinstance(dtype, pd.ArrowDtype):
        assert_same(want._pa_array, got._pa_array, f"{path}._pa_array")
    elif isinstance(dtype, pd.StringDtype):
        for i, (w, g) in enumerate(zip(want, got)):
            _cell_same(w, g, f"{path}[{i}]")
    elif hasattr(want, "_mask"):  # nullable ints, floats, booleans: the values under no mask
        assert np.array_equal(want._mask, got._mask), f"{path}: mask"
        _numpy_same(want._data[~want._mask], got._data[~got._mask], f"{path}._data")
    else:
        _numpy_same(np.asarray(want), np.asarray(got), path)


def _zone(dtype: Any) -> Any:
    return getattr(getattr(dtype, "subtype", dtype), "tz", None)


def _numpy_same(want: np.ndarray, got: np.ndarray, path: str) -> None:
    assert got.dtype == want.dtype, f"{path}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind == "O":
        for i, (w, g) in enumerate(zip(want.tolist(), got.tolist())):
            _cell_same(w, g, f"{path}[{i}]")
    else:
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(), f"{path}: values"


def _cell_same(want: Any, got: Any, path: str) -> None:
    """An object cell: its type, and its value where ``==`` cannot tell (NaT and NA are never
    equal to themselves, nor a Decimal NaN)."""
    assert type(got) is type(want), f"{path}: type {type(got)} != {type(want)}"
    if want is pd.NaT or want is pd.NA:
        assert got is want, f"{path}: {got!r} is not {want!r}"
    elif isinstance(want, decimal.Decimal):
        assert want.as_tuple() == got.as_tuple(), f"{path}: {got!r} != {want!r}"
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (w, g) in enumerate(zip(want, got)):
            _cell_same(w, g, f"{path}[{i}]")
    else:
        assert_same(want, got, path)


def check(obj: Any) -> None:
    """Pickle's round trip first (a value it cannot round-trip is excluded from the strategies,
    with a comment there); then freight's, in one payload and in frames."""
    want = pickle.loads(pickle.dumps(obj, protocol=5))
    payload = freight.dumps(obj)
    assert_pandas_same(want, freight.loads(payload))
    assert_pandas_same(want, freight.loads(payload, zero_copy=True))  # over the payload's memory
    assert_pandas_same(want, freight.loads_frames(freight.dumps_frames(obj)))
