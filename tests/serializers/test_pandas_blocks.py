"""pandas DataFrames block by block (``freight.serializers.pandas_blocks``): every dtype and block
layout round-trips (interleaved and unconsolidated blocks, duplicate and MultiIndex labels, empty
frames), loaded frames are editable in place without edits leaking between columns, payloads of
the per-column form (earlier versions) still load, and forged block metadata is refused."""

from __future__ import annotations

import base64
import zlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import freight
from freight.serializers import pandas_blocks
from support.forging import forge  # forge: metadata under a built-in tag

N = 5
UNITS = ("s", "ms", "us", "ns")


def every_dtype() -> dict[str, object]:
    columns: dict[str, object] = {}
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        columns[name] = np.arange(N, dtype=name)
    for name in ("float16", "float32", "float64", "complex64", "complex128"):
        columns[name] = (np.arange(N) * 1.5).astype(name)
    columns["bool"] = np.arange(N) % 2 == 0
    for unit in UNITS:
        columns[f"M8[{unit}]"] = pd.array(pd.date_range("2020", periods=N, unit=unit)).astype(f"M8[{unit}]")
        columns[f"m8[{unit}]"] = pd.to_timedelta(np.arange(N), unit="s").astype(f"m8[{unit}]")
        columns[f"tz[{unit}]"] = pd.date_range("2020-03-29", periods=N, freq="h", tz="Europe/Paris", unit=unit)
    columns.update(
        {
            "nat": pd.to_datetime(["2020", None, "2021", None, "2022"]),
            "category": pd.Categorical(list("abcab")),
            "ordered": pd.Categorical(list("abcab"), categories=list("cba"), ordered=True),
            "int_category": pd.Categorical([10, 20, 10, 30, 20]),
            "str": ["a", None, "c", "d", "e"],
            "str_na": pd.array(["a", None, "c", "d", "e"], dtype=pd.StringDtype("pyarrow")),
            "str_python": pd.array(["a", None, "c", "d", "e"], dtype=pd.StringDtype("python")),
            "str_python_nan": pd.array(["a", None, "c", "d", "e"], dtype=pd.StringDtype("python", na_value=np.nan)),
            "Int8": pd.array([1, None, 3, 4, 5], dtype="Int8"),
            "UInt64": pd.array([1, None, 3, 4, 5], dtype="UInt64"),
            "Float32": pd.array([1.5, None, 3, 4, 5], dtype="Float32"),
            "boolean": pd.array([True, None, False, True, False], dtype="boolean"),
            "period": pd.period_range("2020", periods=N, freq="D"),
            "period_month": pd.period_range("2020", periods=N, freq="M"),
            "interval": pd.arrays.IntervalArray.from_breaks(range(N + 1)),
            "sparse": pd.arrays.SparseArray([0, 0, 1, 0, 2]),
            "arrow_int": pd.array([1, 2, None, 4, 5], dtype="int64[pyarrow]"),
            "arrow_str": pd.array(["x", None, "z", "w", "v"], dtype=pd.ArrowDtype(pa.string())),
            "arrow_ts": pd.array(pd.date_range("2020", periods=N), dtype=pd.ArrowDtype(pa.timestamp("ms", "UTC"))),
            "arrow_list": pd.array([[1], [], None, [2, 3], [4]], dtype=pd.ArrowDtype(pa.list_(pa.int64()))),
        }
    )
    return columns


def round_trip(df: pd.DataFrame, **options) -> pd.DataFrame:
    back = freight.loads(freight.dumps(df), **options)
    pd.testing.assert_frame_equal(back, df)
    assert list(back.dtypes) == list(df.dtypes)
    return back


def test_the_block_form_is_written():
    meta, _ = freight.serializers.pandas.DataFrameSerializer().serialize(pd.DataFrame(every_dtype()))
    assert "blocks" in meta and "data" not in meta
    assert "attrs" not in meta and "allows_duplicate_labels" not in meta  # defaults are left out


def test_every_dtype_round_trips_without_pickle():
    df = pd.DataFrame(every_dtype(), index=pd.Index(list("vwxyz"), name="key"))
    blob = freight.dumps(df)
    assert not freight.inspect(blob)["needs_pickle"]
    back = round_trip(df, allow_pickle=False)
    assert [type(b.values) for b in back._mgr.blocks] == [type(b.values) for b in df._mgr.blocks]


def test_object_blocks_are_pickle_islands():
    df = pd.DataFrame({"a": np.arange(3), "o": [1, "x", None], "p": [(1,), {"k": 2}, 3.5]})
    blob = freight.dumps(df)
    assert freight.inspect(blob)["needs_pickle"]
    with pytest.raises(freight.UnsafePayloadError):
        freight.loads(blob, allow_pickle=False)
    round_trip(df)


def test_interleaved_placements_keep_their_blocks():
    df = pd.DataFrame({"i0": [1, 2], "f0": [0.5, 1.5], "i1": [3, 4], "s": ["a", "b"], "f1": [2.5, 3.5], "i2": [5, 6]})
    placements = sorted(b.mgr_locs.as_array.tolist() for b in df._mgr.blocks)
    assert [0, 2, 5] in placements  # one int64 block over three columns, not next to each other
    back = round_trip(df)
    assert sorted(b.mgr_locs.as_array.tolist() for b in back._mgr.blocks) == placements


def test_unconsolidated_frames_after_inserts_and_deletes():
    df = pd.DataFrame(np.arange(12).reshape(3, 4), columns=list("abcd"))
    df["e"] = np.arange(3)
    df.insert(1, "z", np.arange(3) * 2)
    df["t"] = pd.date_range("2020", periods=3)
    df["u"] = pd.date_range("2021", periods=3)
    del df["c"]
    df = df[["t", "e", "a", "u", "z", "b", "d"]]
    assert len(df._mgr.blocks) > 2
    round_trip(df)


@pytest.mark.parametrize(
    "columns",
    [
        pd.Index(["a", "b", "a", "c", "a"]),
        pd.MultiIndex.from_tuples([("x", 1), ("x", 2), ("y", 1), ("y", 2), ("x", 1)], names=["k", "n"]),
        pd.RangeIndex(10, 0, -2),
        pd.Index([1.5, 2.5, 3.5, 4.5, 5.5]),
    ],
    ids=["duplicate", "multi", "range", "float"],
)
def test_column_labels(columns):
    df = pd.DataFrame(
        {0: np.arange(3), 1: [0.5, 1.5, 2.5], 2: ["a", "b", "c"], 3: np.arange(3), 4: pd.Categorical(list("xyx"))}
    )
    df.columns = columns
    round_trip(df)


@pytest.mark.parametrize(
    "df",
    [
        pd.DataFrame(),
        pd.DataFrame(index=pd.RangeIndex(4)),
        pd.DataFrame(index=pd.Index(list("ab"), name="k")),
        pd.DataFrame({k: v[:0] for k, v in every_dtype().items() if not isinstance(v, list)}),
        pd.DataFrame({"a": np.arange(3)}).iloc[:0],
    ],
    ids=["0x0", "rows-only", "str-index-only", "0-rows-every-dtype", "0-rows-sliced"],
)
def test_empty_frames(df):
    round_trip(df, allow_pickle=False)


def test_strided_fortran_and_big_endian_blocks():
    wide = pd.DataFrame(np.arange(40.0).reshape(8, 5), columns=list("abcde"))  # one Fortran-ordered block
    wide["big"] = np.arange(8, dtype=">i4")
    round_trip(wide)
    round_trip(wide.iloc[::3, ::2])  # views with strides
    round_trip(wide.T)


def test_zero_copy_loads():
    df = pd.DataFrame(every_dtype())
    back = freight.loads(freight.dumps(df), zero_copy=True, allow_pickle=False)
    pd.testing.assert_frame_equal(back, df)


def test_attrs_and_flags():
    df = pd.DataFrame({"a": [1, 2]}).set_flags(allows_duplicate_labels=False)
    df.attrs["source"] = {"run": 3}
    back = round_trip(df)
    assert back.attrs == {"source": {"run": 3}} and back.flags.allows_duplicate_labels is False


def test_loaded_frames_are_editable_and_edits_stay_in_their_column():
    ro = np.arange(12.0).reshape(4, 3)
    ro.flags.writeable = False
    df = pd.DataFrame(ro, columns=list("abc"))  # one block over a read-only array
    df["t"] = pd.date_range("2020", periods=4)
    df["u"] = pd.date_range("2021", periods=4)
    df["z"] = pd.date_range("2020", periods=4, tz="UTC")
    df["c2"] = pd.Categorical(list("xyxy"))
    df = df.copy()  # consolidates t and u into one 2-D block
    back = freight.loads(freight.dumps(df))
    back.iloc[0, 0] = -1.0
    back.loc[1, "b"] = -2.0
    back.loc[0, "t"] = pd.Timestamp("1999-01-01")
    back.loc[0, "z"] = pd.Timestamp("1999-01-01", tz="UTC")
    back.loc[0, "c2"] = "y"
    assert back["a"].tolist() == [-1.0, 3.0, 6.0, 9.0] and back["b"].tolist() == [1.0, -2.0, 7.0, 10.0]
    assert back["c"].tolist() == [2.0, 5.0, 8.0, 11.0]
    assert back["u"].equals(df["u"]) and back.loc[0, "t"] == pd.Timestamp("1999-01-01")
    assert back.loc[0, "z"] == pd.Timestamp("1999-01-01", tz="UTC") and back["c2"].tolist() == list("yyxy")
    pd.testing.assert_frame_equal(back.iloc[1:, 2:], df.iloc[1:, 2:])
    assert df.iloc[0, 0] == 0.0 and df.loc[1, "b"] == 4.0  # the original is untouched


def test_the_pandas_2_path_builds_the_same_frame(monkeypatch):
    df = pd.DataFrame(every_dtype())
    blob = freight.dumps(df)
    monkeypatch.setattr(pandas_blocks, "_from_blocks", None)
    back = freight.loads(blob)
    pd.testing.assert_frame_equal(back, df)


def test_an_unknown_block_layout_falls_back_to_the_per_column_form(monkeypatch):
    monkeypatch.setattr(pandas_blocks, "_blocks_wire", lambda df: None)
    df = pd.DataFrame(every_dtype())
    meta, _ = freight.serializers.pandas.DataFrameSerializer().serialize(df)
    assert "data" in meta and "blocks" not in meta
    round_trip(df)


# -- labels: few strings travel as a list, and their Index or CategoricalDtype is cached ----------


def test_labels_loaded_twice_are_independent():
    df = pd.DataFrame({"a": [1, 2], "b": pd.Categorical(["x", "y"])})
    blob = freight.dumps(df)
    first, second = freight.loads(blob), freight.loads(blob)
    assert first.columns is not second.columns
    first.columns.name = "renamed"
    first.index.name = "rows"
    assert second.columns.name is None and second.index.name is None
    assert freight.loads(blob).columns.name is None
    first.loc[0, "b"] = "y"
    assert second["b"].tolist() == ["x", "y"]
    pd.testing.assert_frame_equal(second, df)


@pytest.mark.parametrize("width", [3, 64, 65, 500])
def test_string_labels_and_categories_of_any_size(width):
    labels = [f"col-{i}" for i in range(width - 2)] + ["", "é✓ 𝄞"]
    df = pd.DataFrame(np.arange(2 * width).reshape(2, width), columns=pd.Index(labels, name="names"))
    df["cat"] = pd.Categorical(["col-0", ""], categories=labels[::-1], ordered=True)
    df["s"] = pd.array(["x", None], dtype=pd.StringDtype("pyarrow"))
    round_trip(df, allow_pickle=False)
    round_trip(df, allow_pickle=False)  # the second time from the caches


def test_labels_with_missing_values_and_both_missing_value_kinds():
    for dtype in (pd.StringDtype("pyarrow"), pd.StringDtype("pyarrow", na_value=np.nan)):
        columns = pd.Index(["a", None, "c"], dtype=dtype)
        df = pd.DataFrame([[1, 2, 3]], columns=columns, index=pd.Index(["r"], dtype=dtype))
        back = round_trip(df, allow_pickle=False)
        pd.testing.assert_index_equal(back.columns, columns, exact=True)


@pytest.mark.parametrize("dtype", ["int8", "uint64", "float32", "float64", "bool", "complex128"])
def test_numeric_indexes_keep_their_exact_type(dtype):
    index = pd.Index(np.array([0, 1], dtype=dtype), name="n")
    back = round_trip(pd.DataFrame({"v": [1, 2]}, index=index), allow_pickle=False)
    pd.testing.assert_index_equal(back.index, index, exact=True)


# -- payloads of earlier versions: one entry per column under "data" ---------------------------

# freight.dumps of V1_FRAME by the per-column serializer (zlib, base64): int, float, categorical,
# datetime, tz-aware, bool, sparse and timedelta columns, an Int64 index and attrs.
V1_PAYLOAD = (
    "eNqlUkFo01AYfi9J87ruYA0meqjVy/CiM8Uypm6siBY8iKIeBC3jtXntQtMk5CVTx2AW3MGbgyHiPIg3UeZB"
    "dHhyOyjITiLIBGUyL4KIQxCHqPgnbYd4Wrv/8v3vf9/3/u//k2v502exvCjhpEttg/Leo9SneY/WGJYbldiB"
    "3kxvphujHeX309ncs/oCpIXU2vT86pMJSJee3/qxIg2lMRIPSn++zvbMVDFKTir3/WTuW0hwtS+H5g4vP4L0"
    "eLzn+tLJ1U/AHZub3DWSfzuLUfzhjcdvzqUrdYykl913yzunvrvAXXyaHdT11w+0DNKUmEZIybGCms0VQSMx"
    "j9oVtlUUkZgU4SzZYBhB3bQNdilkyKPUChhXsEYE29U1Ig6Y/QIWkSppBFdBYsCgybiCVaKrcbjBURoSyyFR"
    "UER4r+QYjIfFcTMDRSglStRnFccz4XFBldf1gqRK4IA4nsE8ZrReIwMn+s8HvADiWOhL8MdICloz36yxvixc"
    "7d19LPAcl+0/RT2TF6BX4Jd0NQkKuWVpvBh2J4oMg3GXepxpUVMchw4ws1liXGsMmYVqF9AsZlf8EREUUtm0"
    "LBG8SVWgRgKYgHmQ8aDoX3ZZuDe/L7tuudaynIAVUN/3oj3K3Am8EoMZRjMa2U4ty7nIh43AtcxwJ8MWLTKL"
    "C+jjTevdVP0M2lAkmritiWnUWeAmCh2pPww1cK2FE2037jD+n7/tyP1ciM/EELrzajkVIrr3W49wg3G7/JmE"
    "/F+DXZH+grqnHT3e5ALI5tbX4ff+Z31HtkR45Wrjz5t/sS/Cv/sIrWU="
)


def v1_frame() -> pd.DataFrame:
    df = pd.DataFrame(
        {
            0: np.arange(3),
            1: [0.5, 1.5, np.nan],
            2: pd.Categorical([10, 20, 10]),
            3: pd.date_range("2020", periods=3),
            4: pd.date_range("2020", periods=3, tz="Europe/Paris"),
            5: [True, False, True],
            6: pd.arrays.SparseArray([0, 0, 7]),
            7: pd.to_timedelta([1, 2, 3], unit="s"),
        },
        index=pd.Index([10, 20, 30], name="k"),
    )
    df.attrs["source"] = "v1"
    return df


def test_a_payload_of_the_per_column_form_still_loads():
    back = freight.loads(zlib.decompress(base64.b64decode(V1_PAYLOAD)), allow_pickle=False)
    pd.testing.assert_frame_equal(back, v1_frame())
    assert back.attrs == {"source": "v1"}
    back.iloc[0, 0] = 99  # editable, as it was
    assert back.iloc[0, 0] == 99


def test_the_per_column_form_of_every_dtype_still_loads():
    df = pd.DataFrame(every_dtype(), index=pd.Index(list("vwxyz"), name="key"))
    df.attrs["k"] = 1
    back = freight.loads(forge("pandas.DataFrame", pandas_blocks.columns_meta(df)), allow_pickle=False)
    pd.testing.assert_frame_equal(back, df)
    assert back.attrs == {"k": 1}


def test_labels_and_strings_written_through_arrow_by_earlier_versions_still_load():
    def arrow(*strs):
        return {"dtype": ("string", "pyarrow", False), "arrow": pa.chunked_array([pa.array(strs, pa.large_string())])}

    meta = {
        "columns": {"values": arrow("s", "c"), "name": None},
        "index": {"range": (0, 2, 1), "name": None},
        "data": [
            arrow("x", None),
            {
                "codes": np.array([1, 0], np.int8),
                "categories": {"values": arrow("p", "q"), "name": None},
                "ordered": False,
            },
        ],
        "attrs": {},
        "allows_duplicate_labels": True,
    }
    back = freight.loads(forge("pandas.DataFrame", meta), allow_pickle=False)
    expected = pd.DataFrame({"s": pd.array(["x", None], dtype="str"), "c": pd.Categorical(["q", "p"], ["p", "q"])})
    pd.testing.assert_frame_equal(back, expected)


# -- forged block metadata ----------------------------------------------------------------------


def frame_meta(blocks, rows=3, width=2, **extra):
    meta = {
        "index": {"range": (0, rows, 1), "name": None},
        "columns": {"range": (0, width, 1), "name": None},
        "blocks": blocks,
    }
    meta.update(extra)
    return meta


def ints(*shape, dtype=np.int64):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


def codes_block(codes, categories, strs=None):
    values = {"dtype": ("string", "pyarrow", False)}
    values.update({"arrow": categories} if strs is None else {"strs": strs})
    return {"codes": np.asarray(codes, dtype=np.int8), "categories": {"values": values, "name": None}, "ordered": False}


FORGED = {
    "placement-past-the-columns": [(ints(1, 3), 0), (ints(1, 3), 2)],
    "negative-placement": [(ints(1, 3), 0), (ints(1, 3), -1)],
    "negative-placement-array": [(ints(2, 3), np.array([0, -1]))],
    "uint64-placement-wrapping": [(ints(2, 3), np.array([0, 2**64 - 1], dtype=np.uint64))],
    "placement-array-past-the-columns": [(ints(2, 3), np.array([0, 2]))],
    "duplicated-placement": [(ints(1, 3), 0), (ints(1, 3), 0)],
    "duplicated-within-an-array": [(ints(2, 3), np.array([1, 1]))],
    "missing-column": [(ints(1, 3), 0)],
    "extra-block": [(ints(2, 3), np.array([0, 1])), (ints(1, 3), 1)],
    "float-placement": [(ints(2, 3), np.array([0.0, 1.0]))],
    "bool-placement": [(ints(1, 3), True), (ints(1, 3), 0)],
    "2d-placement": [(ints(2, 3), np.array([[0, 1]]))],
    "block-of-more-columns-than-placed": [(ints(2, 3), 0), (ints(1, 3), 1)],
    "block-longer-than-the-index": [(ints(2, 4), np.array([0, 1]))],
    "block-shorter-than-the-index": [(ints(2, 2), np.array([0, 1]))],
    "1d-array-for-a-block": [(ints(3), 0), (ints(3), 1)],
    "3d-array-for-a-block": [(ints(2, 1, 3), np.array([0, 1]))],
    "0d-array-for-a-block": [(np.asarray(5), 0), (ints(1, 3), 1)],
    "bytes-block": [(np.array([[b"a", b"b", b"c"]] * 2), np.array([0, 1]))],
    "unicode-block": [(np.array([["a", "b", "c"]] * 2), np.array([0, 1]))],
    "structured-block": [(np.zeros((2, 3), dtype="i4,f8"), np.array([0, 1]))],
    "datetime-of-days": [(ints(2, 3).astype("M8[D]"), np.array([0, 1]))],
    "big-endian-datetime": [(ints(2, 3).astype(">M8[ns]"), np.array([0, 1]))],
    "masked-array-block": [(np.ma.masked_array(ints(2, 3), mask=ints(2, 3) % 2), np.array([0, 1]))],
    "tz-values-of-another-unit": [({"tz": "datetime64[ns, UTC]", "utc": ints(2, 3).astype("M8[s]")}, np.array([0, 1]))],
    "tz-values-1d": [({"tz": "datetime64[ns, UTC]", "utc": ints(3).astype("M8[ns]")}, 0), (ints(1, 3), 1)],
    "tz-not-a-tz-dtype": [({"tz": "int64", "utc": ints(2, 3).astype("M8[ns]")}, np.array([0, 1]))],
    "extension-block-over-two-columns": [({"np": ints(3)}, np.array([0, 1]))],
    "numpy-values-as-an-extension-column": [({"np": ints(3)}, 0), (ints(1, 3), 1)],
    "extension-column-too-long": [
        ({"codes": ints(4, dtype=np.int8) % 2, "categories": {"range": (0, 2, 1), "name": None}, "ordered": False}, 0),
        (ints(1, 3), 1),
    ],
    "duplicate-categories": [
        (codes_block([0, 1, 0], pa.chunked_array([pa.array(["a", "a"], pa.large_string())])), 0),
        (ints(1, 3), 1),
    ],
    "null-category": [
        (codes_block([0, 1, 0], pa.chunked_array([pa.array(["a", None], pa.large_string())])), 0),
        (ints(1, 3), 1),
    ],
    "category-code-past-the-categories": [
        (codes_block([0, 2, 0], pa.chunked_array([pa.array(["a", "b"])])), 0),
        (ints(1, 3), 1),
    ],
    "strs-holding-bytes": [({"dtype": ("string", "pyarrow", False), "strs": ["a", b"\xff", "c"]}, 0), (ints(1, 3), 1)],
    "strs-holding-an-int": [({"dtype": ("string", "pyarrow", False), "strs": ["a", 1, "c"]}, 0), (ints(1, 3), 1)],
    "strs-not-a-list": [({"dtype": ("string", "pyarrow", False), "strs": ("a", "b", "c")}, 0), (ints(1, 3), 1)],
    "strs-of-another-dtype": [({"dtype": "int64", "strs": ["a", "b", "c"]}, 0), (ints(1, 3), 1)],
    "strs-too-short": [({"dtype": ("string", "pyarrow", False), "strs": ["a", "b"]}, 0), (ints(1, 3), 1)],
    "duplicate-small-categories": [(codes_block([0, 1, 0], None, strs=["a", "a"]), 0), (ints(1, 3), 1)],
    "null-small-category": [(codes_block([0, 1, 0], None, strs=["a", None]), 0), (ints(1, 3), 1)],
    "small-categories-not-ordered-by-a-bool": [
        (dict(codes_block([0, 1, 0], None, strs=["a", "b"]), ordered="yes"), 0),
        (ints(1, 3), 1),
    ],
    "duplicate-labels-not-allowed": (
        [(ints(2, 3), np.array([0, 1]))],
        {
            "columns": {"values": {"dtype": ("string", "pyarrow", False), "strs": ["a", "a"]}, "name": None},
            "allows_duplicate_labels": False,
        },
    ),
    "unhashable-label-index-name": (
        [(ints(2, 3), np.array([0, 1]))],
        {"columns": {"values": {"dtype": ("string", "pyarrow", False), "strs": ["a", "b"]}, "name": {}}},
    ),
    "blocks-not-a-list": {"a": 1},
    "block-not-a-pair": [(ints(2, 3),)],
    "unhashable-index-name": ([(ints(2, 3), np.array([0, 1]))], {"index": {"range": (0, 3, 1), "name": [1]}}),
    "float-range": ([(ints(2, 3), np.array([0, 1]))], {"index": {"range": (0, 3.5, 1), "name": None}}),
}


@pytest.mark.parametrize("case", list(FORGED))
def test_forged_blocks_are_refused(case):
    blocks, extra = FORGED[case] if isinstance(FORGED[case], tuple) else (FORGED[case], {})
    for _ in range(2):  # the second time too: label caches keep no refused labels
        with pytest.raises(freight.DeserializationError, match="pandas.DataFrame"):
            freight.loads(forge("pandas.DataFrame", frame_meta(blocks, **extra)), allow_pickle=False)


def test_the_same_array_in_two_places_is_not_shared():
    # The encoder writes one array object once and refers to it after: a forged payload can hand
    # one array to two blocks, two categoricals' codes, or a categorical's codes and the index.
    arr = ints(1, 3)
    codes = np.zeros(3, dtype=np.int8)
    utc = ints(1, 3).astype("M8[ns]")
    categories = pa.chunked_array([pa.array(["a", "b"], pa.large_string())])
    blocks = [
        (arr, 0),
        (arr, 1),
        (codes_block(codes, categories), 2),
        (codes_block(codes, categories), 3),
        ({"tz": "datetime64[ns, UTC]", "utc": utc}, 4),
        ({"tz": "datetime64[ns, UTC]", "utc": utc}, 5),
    ]
    blocks[2][0]["codes"] = blocks[3][0]["codes"] = codes
    meta = frame_meta(blocks, width=6, index={"values": {"np": codes}, "name": None})
    df = freight.loads(forge("pandas.DataFrame", meta), allow_pickle=False)
    df.iloc[0, 0] = 99
    df.iloc[0, 2] = "b"
    df.iloc[0, 4] = pd.Timestamp("2000", tz="UTC")
    assert df[1].tolist() == [0, 1, 2] and df[3].tolist() == ["a"] * 3 and list(df.index) == [0, 0, 0]
    assert df[5].tolist() == list(pd.to_datetime([0, 1, 2], utc=True))
    assert df[0].tolist() == [99, 1, 2] and df[2].tolist() == ["b", "a", "a"]
