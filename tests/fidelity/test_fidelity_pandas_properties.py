"""Property tests over pandas objects: for DataFrames, Series and Index objects drawn as
``pandas._testing`` builds them (``support.pandas_strategies``: every extension and numpy dtype,
every kind of index, labels of any type, frames consolidated or column by column), every payload
``freight.dumps`` (and ``dumps_frames``) writes, ``freight.loads`` (``loads_frames``, zero-copy
too) reads, and gives what pickle's round trip gives (``support.pandas_fidelity``: classes,
dtypes with zones, values bit for bit, labels of every axis and level, ``freq``, ``attrs``,
``flags``). Then one test for each case the properties found. ``event`` lines show what was
drawn (``--hypothesis-show-statistics``).

Examples per property: ``FREIGHT_FIDELITY_EXAMPLES`` (default 40, as in
``test_fidelity_properties.py``); ``make fuzz`` sets it higher.
"""

from __future__ import annotations

import datetime
import os
import pickle
import zoneinfo
from typing import Any

import dateutil.tz
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

import freight
from support.forging import forge  # forge: metadata under a built-in tag
from support.pandas_fidelity import assert_pandas_same, check
from support.pandas_strategies import frames, indexes, series

EXAMPLES = int(os.environ.get("FREIGHT_FIDELITY_EXAMPLES", "40"))
# No deadline: behaviour is asserted, not time (a first draw imports pyarrow's kernels).
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]
fidelity = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=_HEALTH)


@fidelity
@given(df=frames())
def test_dataframes_come_back_as_pickle_brings_them_back(df):
    check(df)


@fidelity
@given(s=series())
def test_series_come_back_as_pickle_brings_them_back(s):
    check(s)


@fidelity
@given(ix=indexes())
def test_indexes_come_back_as_pickle_brings_them_back(ix):
    check(ix)


# -- What the properties found, one case each. -----------------------------------------------------


def _zoned(zone: Any, n: int = 3) -> pd.DatetimeIndex:
    # Across the US DST change of 2021-03-14.
    return pd.date_range("2021-03-14 05:00", periods=n, freq="h", unit="s", tz="UTC").tz_convert(zone)


def test_a_dateutil_zone_travels_by_name():
    # Its dtype's text names the zone's file (tzfile('/usr/share/zoneinfo/Europe/Berlin')), which
    # pandas does not parse: dumps wrote it and loads refused it, in a frame's block, a Series
    # and an Index alike. It goes as "dateutil/Europe/Berlin", and stays native.
    values = _zoned("dateutil/Europe/Berlin")
    for obj in (pd.DataFrame({"a": values, "b": values}), pd.Series(values), values):
        check(obj)
        assert not freight.inspect(freight.dumps(obj))["needs_pickle"]


def test_a_zone_no_text_names_is_pickled():
    # "datetime64[ns, XYZ]" (a fixed offset with a name) did not load back; a dateutil tzoffset
    # came back equal in pandas' eyes but as another zone.
    for zone in (datetime.timezone(datetime.timedelta(hours=2), "XYZ"), dateutil.tz.tzoffset("X", 3600)):
        values = _zoned(zone)
        for obj in (pd.DataFrame({"a": values, "b": values, "n": 1}), pd.Series(values), values):
            check(obj)


def test_zoneinfo_utc_is_not_datetime_utc():
    # Both dtypes write "datetime64[ns, UTC]" and compare equal (pandas compares zones by name),
    # so ZoneInfo("UTC") came back as datetime.timezone.utc, and the per-dtype caches answered
    # for one what they had found for the other.
    for zone in (datetime.timezone.utc, zoneinfo.ZoneInfo("UTC"), datetime.timezone.utc):
        values = _zoned(zone)
        for obj in (pd.Series(values), pd.DataFrame({"a": values}), pd.Series(pd.Categorical(values))):
            check(obj)


def test_intervals_of_zoned_datetimes():
    # pandas writes them to Arrow but its __from_arrow__ refuses them: a payload loads could not
    # read. They are pickled (a dtype travels through Arrow only if an empty column comes back).
    left = _zoned("US/Eastern")
    values = pd.arrays.IntervalArray.from_arrays(left, left + pd.Timedelta("1h"), closed="both")
    for obj in (pd.Series(values), pd.IntervalIndex(values), pd.DataFrame({"i": values}), pd.Series(values[:0])):
        check(obj)


def test_nan_in_a_nullable_float_column_is_not_na():
    # Through Arrow pandas reads a NaN value back as NA (is_nan_na); pickle keeps the two apart.
    # Values and mask travel as they are.
    values = pd.arrays.FloatingArray(np.array([np.nan, -0.0, 1.5, np.nan]), np.array([False, False, False, True]))
    for obj in (pd.Series(values), pd.DataFrame({"f": values}), pd.Index(values)):
        check(obj)
        assert not freight.inspect(freight.dumps(obj))["needs_pickle"]
    check(pd.Series(pd.array([1, None, -(2**63)], dtype="Int64")))
    check(pd.Series(pd.array([True, None], dtype="boolean")))


def test_a_sparse_object_column_keeps_its_timestamps():
    # pandas' SparseArray.from_indices infers a dtype from object values before casting them
    # back to object: a Timestamp came back as its nanoseconds (an int). Built as they are now.
    values = np.empty(3, dtype=object)
    values[:] = [None, pd.Timestamp(0), (1, "a")]
    sparse = pd.arrays.SparseArray(values, fill_value=None, dtype=pd.SparseDtype(object, None))
    for obj in (pd.Series(sparse), pd.DataFrame({"s": sparse, "n": 1})):
        check(obj)


@pytest.mark.parametrize(
    "values",
    [
        {"dtype": "Float64", "masked": np.array([1, 2]), "mask": np.zeros(2, bool)},  # int64 values
        {"dtype": "Int64", "masked": np.array([1, 2]), "mask": np.zeros(3, bool)},  # a mask too long
        {"dtype": "Int64", "masked": np.array([1, 2]), "mask": np.zeros(2, np.int8)},
        {"dtype": "Int64", "masked": np.array([[1, 2]]), "mask": np.zeros((1, 2), bool)},
        {"dtype": "category", "masked": np.array([1, 2]), "mask": np.zeros(2, bool)},
    ],
)
def test_forged_masked_columns_are_refused(values):
    meta = {"values": values, "index": {"range": (0, 2, 1), "name": None}, "name": None, "attrs": {}}
    with pytest.raises(freight.DeserializationError, match="pandas.Series"):
        freight.loads(forge("pandas.Series", {**meta, "allows_duplicate_labels": True}), allow_pickle=False)


def _differs(want: Any, got: Any) -> bool:
    try:
        assert_pandas_same(want, got)
    except AssertionError:
        return True
    return False


def test_the_comparison_notices_what_it_claims():
    # (A comparison that passed anything would make the properties pass.)
    s = pd.Series([1.0, 0.0], index=pd.Index([1, 2], name="k"), name="s")
    assert not _differs(s, s.copy())
    assert _differs(s, pd.Series([1.0, -0.0], index=s.index, name="s"))
    assert _differs(s, s.rename(index=float))
    assert _differs(s, s.rename(("s",)))
    assert not _differs(s.rename(pd.NA), s.rename(pd.NA)) and _differs(s.rename(pd.NA), s.rename(pd.NaT))
    obj = pd.Series([1, "a"], dtype=object)
    assert _differs(obj, pd.Series([1.0, "a"], dtype=object))
    assert _differs(obj, pd.Series([True, "a"], dtype=object))
    floats = pd.arrays.FloatingArray(np.array([np.nan]), np.array([False]))
    assert _differs(pd.Series(floats), pd.Series(pd.array([None], dtype="Float64")))
    utc = pd.Series(_zoned(datetime.timezone.utc))
    assert _differs(utc, pd.Series(_zoned(zoneinfo.ZoneInfo("UTC"))))
    daily = pd.date_range("2021", periods=3, freq="D")
    assert _differs(daily, pd.DatetimeIndex(list(daily)))
    with_attrs = s.copy()
    with_attrs.attrs["k"] = 1
    assert _differs(s, with_attrs)
    assert _differs(s, s.set_flags(allows_duplicate_labels=False))
    df = pd.DataFrame({"a": [1]})
    assert _differs(df, pd.DataFrame({"a": [1]}, columns=pd.Index(["a"], dtype=object)))
    assert _differs(df, df.rename_axis(columns="c"))
    cat = pd.Series(pd.Categorical(["a"], categories=pd.Index(["a"], dtype=object)))
    assert _differs(cat, pd.Series(pd.Categorical(["a"])))
    assert _differs(pd.RangeIndex(0, 4, 2), pd.Index([0, 2]))
    # Two loads of a tuple holding NaN hold two NaN objects: the same value all the same.
    tuples = pd.Series([(np.nan,), (1,)], index=pd.Index([(np.nan,), "a"], dtype=object))
    assert not _differs(pickle.loads(pickle.dumps(tuples)), pickle.loads(pickle.dumps(tuples)))
    assert _differs(tuples, pd.Series([(np.nan,), (1.0,)], index=tuples.index))
    arrow = pd.Index(pd.arrays.ArrowExtensionArray(pa.array([np.nan, 0.0])))
    assert not _differs(pickle.loads(pickle.dumps(arrow)), pickle.loads(pickle.dumps(arrow)))
    assert _differs(arrow, pd.Index(pd.arrays.ArrowExtensionArray(pa.array([np.nan, -0.0]))))
