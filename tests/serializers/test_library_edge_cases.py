"""Edge cases of the library serializers found in review: Arrow string arrays whose null slots
hold arbitrary bytes, time zones that name files, caches that must not keep payload memory,
datetimes with dateutil/pytz zones inside a serializer's metadata (pickled in place), forged
payloads that make pandas columns and the index share one array, and pyarrow-backed pandas
columns whose dtype text pandas cannot parse back."""

from __future__ import annotations

import datetime
import decimal
import glob
import os
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import freight
from freight.serializers import pandas as fpd
from support.forging import bytes_retained_after_loading, forge  # forge: metadata under a built-in tag

# -- Arrow: the Rust string check refuses valid arrays ---------------------------------------


@pytest.mark.parametrize("wide", [False, True], ids=["string", "large_string"])
@pytest.mark.parametrize("via", ["dumps", "dumps_frames"])
def test_arrow_string_array_whose_null_slot_holds_non_utf8_bytes_round_trips(wide, via):
    import pyarrow.compute as pc

    binary = pa.array([b"ab", b"\xff\xfe", b"cd"], type=pa.large_binary() if wide else pa.binary())
    # if_else keeps the masked value's bytes under the null slot; the cast checks only valid
    # slots. Arrow's spec says a null slot's bytes are arbitrary.
    masked = pc.if_else(pa.array([True, False, True]), binary, pa.scalar(None, binary.type))
    arr = masked.cast(pa.large_string() if wide else pa.string())
    arr.validate(full=True)  # a valid Arrow array
    assert arr.to_pylist() == ["ab", None, "cd"]
    if via == "dumps":
        back = freight.loads(freight.dumps(arr), allow_pickle=False)
    else:
        back = freight.loads_frames(freight.dumps_frames(arr), allow_pickle=False)
    # Before the fix: DeserializationError "an Arrow string array has ... invalid UTF-8".
    assert back.equals(arr)


# -- pandas: dtype texts ---------------------------------------------------------------------


def _zone_file() -> str:
    candidates = glob.glob("/usr/share/zoneinfo/Europe/Paris")
    try:
        import tzdata

        candidates += glob.glob(os.path.join(os.path.dirname(tzdata.__file__), "zoneinfo", "Europe", "Paris"))
    except ImportError:
        pass
    if not candidates:
        pytest.skip("no TZif file to copy")
    return candidates[0]


def test_pandas_time_zone_path_behind_a_colon_is_refused(tmp_path):
    # dateutil strips a leading ":" and opens an absolute path as a tz file; "dateutil/:/x"
    # contains neither ".." nor "//", so _dtype_from lets it through.
    shutil.copy(_zone_file(), tmp_path / "zone")
    s = pd.Series(pd.date_range("2026", periods=2, tz="UTC"))
    meta, _ = fpd.SeriesSerializer().serialize(s)
    meta["values"]["tz"] = f"datetime64[us, dateutil/:{tmp_path}/zone]"
    # Before the fix it loads: the Series' tz is tzfile('<tmp_path>/zone'), read from the named file.
    with pytest.raises(freight.DeserializationError):
        freight.loads(forge("pandas.Series", meta), allow_pickle=False)


def test_pandas_dtype_text_cache_does_not_retain_payload_bytes():
    s = pd.Series(pd.array([1, None, 3], "Int64"))
    meta, _ = fpd.SeriesSerializer().serialize(s)
    blobs = []
    for _ in range(4):  # dtype texts of 4 MiB each, which pandas parses (pyarrow takes any tz)
        text = f"timestamp[s, {os.urandom(1 << 21).hex()}][pyarrow]"
        blobs.append(forge("pandas.Series", dict(meta, values=dict(meta["values"], dtype=text))))
    retained = bytes_retained_after_loading(blobs)
    # Before the fix ~16.8 MB stay referenced by the lru_cache of _parsed_dtype (up to 256 such keys).
    assert retained < 4 << 20, f"{retained / 1e6:.1f} MB of payload text retained after the loads"


# -- memo rollback inside serializer metadata --------------------------------------------------


def test_dataframe_attrs_holding_a_datetime_with_a_dateutil_tz_round_trip():
    import dateutil.tz

    df = pd.DataFrame({"a": [1, 2]})
    df.attrs["when"] = datetime.datetime(2020, 1, 1, tzinfo=dateutil.tz.gettz("Europe/Paris"))
    # Before the fix: SerializationError "cannot encode a datetime with this tzinfo inside a serializer's
    # metadata", although any other value freight has no encoding for (a Fraction, say) becomes a
    # pickle island there, and the same datetime outside the metadata is pickled.
    back = freight.loads(freight.dumps(df))
    assert back.attrs == df.attrs
    assert back.equals(df)


# -- pandas: columns and index decoded as one array --------------------------------------------


def test_pandas_columns_and_index_sharing_one_array_do_not_alias():
    arr = np.arange(3)
    meta = {
        "columns": {"range": (0, 2, 1), "name": None},
        "index": {"values": {"np": arr}, "name": None},
        "data": [{"np": arr}, {"np": arr}],  # one array object: written once, referenced after
        "attrs": {},
        "allows_duplicate_labels": True,
    }
    df = freight.loads(forge("pandas.DataFrame", meta), allow_pickle=False)
    df.iloc[0, 0] = 99
    # Each place has its own array: editing a column changes neither the other nor the index.
    assert df[1].tolist() == [0, 1, 2]
    assert list(df.index) == [0, 1, 2]


def test_pandas_series_values_and_index_sharing_one_array_do_not_alias():
    arr = np.arange(3)
    meta = {
        "values": {"np": arr},
        "index": {"values": {"np": arr}, "name": None},
        "name": None,
        "attrs": {},
        "allows_duplicate_labels": True,
    }
    s = freight.loads(forge("pandas.Series", meta), allow_pickle=False)
    s.iloc[0] = 5
    assert list(s.index) == [0, 1, 2]


# -- pandas: pyarrow-backed columns whose dtype text does not parse back ---------------------


@pytest.mark.parametrize(
    "arrow_type, values",
    [
        (pa.decimal128(10, 2), [decimal.Decimal("1.50"), None]),
        (pa.binary(3), [b"abc", None]),
    ],
    ids=["decimal128", "fixed_size_binary"],
)
def test_pandas_arrow_dtype_columns_whose_text_pandas_cannot_parse_dump(arrow_type, values):
    s = pd.Series(pd.array(values, dtype=pd.ArrowDtype(arrow_type)))
    # Before the fix dumps raises NotImplementedError from pandas_dtype("decimal128(10, 2)[pyarrow]"):
    # _values_meta catches TypeError/ValueError/ArrowException around _dtype_from, not that.
    back = freight.loads(freight.dumps(s))
    assert back.dtype == s.dtype and back.equals(s)
    df = pd.DataFrame({"c": s})
    assert freight.loads(freight.dumps(df)).equals(df)


def test_pandas_pyarrow_string_column_travels_without_pickle():
    # dtype_backend="pyarrow" (read_csv, read_parquet) gives ArrowDtype(pa.string()), whose text
    # "string[pyarrow]" parses to StringDtype("pyarrow"): the check in _values_meta fails and the
    # column is pickled, although the module promises that only object columns are.
    s = pd.Series(pd.array(["a", None, "c"], dtype=pd.ArrowDtype(pa.string())))
    blob = freight.dumps(s)
    back = freight.loads(blob, allow_pickle=False)  # before the fix: UnsafePayloadError
    assert back.dtype == s.dtype and back.equals(s)
