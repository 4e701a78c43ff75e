"""Hostile metadata for freight's pandas serializers (declared ``safe = True``): a forged payload
(``support.forging``: the real encoder, arbitrary metadata under the built-in tag) must raise
DeserializationError at load time; it must never crash the interpreter, now or at the first use
of what was loaded, nor load as a value that breaks later. Cases that crashed before their fix
run in a child interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import freight
from support.forging import forge, run_isolated


def test_pandas_tz_column_of_a_0d_array_is_refused_not_a_segfault_on_repr():
    run_isolated(
        """
        import pandas as pd
        meta = {
            "values": {"tz": "datetime64[us, UTC]", "utc": np.array(np.datetime64("2026-01-01", "us"))},
            "index": {"range": (0, 3, 1), "name": None},
            "name": None, "attrs": {}, "allows_duplicate_labels": True,
        }
        refused, s = load_or_refuse(forge("pandas.Series", meta))
        if refused:
            print("REFUSED"); sys.exit(0)
        print("LOADED", flush=True)
        repr(s)  # segfaults in DatetimeArray.__iter__
        """
    )


@pytest.mark.parametrize("tag", ["pandas.Series", "pandas.Index"])
def test_pandas_tz_values_must_be_one_dimensional(tag):
    import pandas as pd

    utc = pd.date_range("2026", periods=3).to_numpy().astype("M8[us]").reshape(3, 1)
    values = {"tz": "datetime64[us, UTC]", "utc": utc}
    if tag == "pandas.Series":
        meta = {
            "values": values,
            "index": {"range": (0, 3, 1), "name": None},
            "name": None,
            "attrs": {},
            "allows_duplicate_labels": True,
        }
    else:
        meta = {"values": values, "name": None}
    # Before the fix: a Series (or Index) of 1-tuples of Timestamps, object dtype.
    with pytest.raises(freight.DeserializationError):
        freight.loads(forge(tag, meta), allow_pickle=False)


def _sparse_series_meta(**values):
    meta = {
        "values": {
            "sparse": np.array([10, 20]),
            "indices": np.array([1, 3], np.int32),
            "length": 5,
            "fill": 0,
            "kind": "integer",
            "subtype": "int64",
        },
        "index": {"range": (0, 5, 1), "name": None},
        "name": None,
        "attrs": {},
        "allows_duplicate_labels": True,
    }
    meta["values"].update(values)
    return meta


@pytest.mark.parametrize(
    "values",
    [
        dict(kind="block", indices=np.array([3, 1], np.int32)),  # before the fix: [0, 0, 0, 10, 20]
        dict(kind="block", indices=np.array([1, 1], np.int32)),  # before the fix: [0, 10, 20, 0, 0]
        dict(kind="block", indices=np.array([-3, 1], np.int32)),  # before the fix: loads, then ValueError on repr
        dict(indices=np.array([2**32 + 1, 2**32 + 3], np.int64)),  # before the fix: wraps to [1, 3] silently
    ],
    ids=["block not increasing", "block duplicate", "block negative", "int64 positions wrapping in int32"],
)
def test_pandas_sparse_positions_are_checked_for_every_index_kind(values):
    import pandas  # noqa: F401

    with pytest.raises(freight.DeserializationError):
        freight.loads(forge("pandas.Series", _sparse_series_meta(**values)), allow_pickle=False)


def test_pandas_series_values_must_be_an_array_not_a_scalar_to_broadcast():
    # {"np": 5} with RangeIndex(0, 10**9) is a 148-byte payload that allocates 8 GB on load
    # (measured: 2.6 s, 7.9 GB max RSS); here with a small index.
    import pandas  # noqa: F401

    meta = {
        "values": {"np": 5},
        "index": {"range": (0, 3, 1), "name": None},
        "name": None,
        "attrs": {},
        "allows_duplicate_labels": True,
    }
    with pytest.raises(freight.DeserializationError):
        freight.loads(forge("pandas.Series", meta), allow_pickle=False)


def test_pandas_multiindex_codes_beyond_their_level_are_refused_not_truncated():
    import pandas  # noqa: F401

    meta = {
        "levels": [{"range": (0, 2, 1), "name": None}, {"range": (0, 2, 1), "name": None}],
        # before the fix: 2**40 is cast to int8 (0) before pandas checks it, so the 4th entry reads (0, 1)
        "codes": [np.array([0, 0, 1, 2**40], np.int64), np.array([0, 1, 0, 1], np.int8)],
        "names": [None, None],
    }
    with pytest.raises(freight.DeserializationError):
        freight.loads(forge("pandas.Index", meta), allow_pickle=False)


def test_pandas_time_zones_that_name_files_are_refused(tmp_path):
    import pandas as pd

    s = pd.Series(pd.date_range("2026", periods=2, tz="UTC"))
    meta, _ = freight.serializers.pandas.SeriesSerializer().serialize(s)
    meta["values"]["tz"] = f"datetime64[us, dateutil/{tmp_path}/zone]"
    with pytest.raises(freight.DeserializationError, match="file paths"):
        freight.loads(forge("pandas.Series", meta), allow_pickle=False)


# -- payload-controlled positions and codes handed to pandas' kernels -------------------------
# Each case was crafted by reading the serializer's load path (not only by random mutation) and
# run under glibc's heap checks and AddressSanitizer (see fuzz/loads_mutations.py --asan); a child
# loads every case and prints REFUSED when loading refused them all (support.forging.print_refusals).

PANDAS_CASES = """
import pandas as pd


def series(values, n=5):
    return {"values": values, "index": {"range": (0, n, 1), "name": None}, "name": None, "attrs": {},
            "allows_duplicate_labels": True}


def sparse(**change):
    values = {"sparse": np.array([10, 20]), "indices": np.array([1, 3], np.int32), "length": 5, "fill": 0,
              "kind": "integer", "subtype": "int64"}
    values.update(change)
    return series(values)


def categorical(codes):
    categories = {"values": {"np": np.array([1.5, 2.5])}, "name": None}
    return series({"codes": codes, "categories": categories, "ordered": False}, len(codes))


CASES = [(name, "pandas.Series", meta, ()) for name, meta in [
    ("sparse-position-past-the-length", sparse(indices=np.array([1, 5], np.int32))),
    ("block-position-far-past-the-length", sparse(indices=np.array([1, 500000], np.int32), kind="block")),
    ("sparse-negative-position", sparse(indices=np.array([-1, 3], np.int32))),
    ("sparse-uint64-position", sparse(indices=np.array([1, 2**64 - 1], np.uint64))),
    ("sparse-float-positions", sparse(indices=np.array([1.0, 3.0]))),
    ("sparse-2d-positions", sparse(indices=np.array([[1, 3]], np.int32))),
    ("sparse-more-values-than-positions", sparse(sparse=np.array([10, 20, 30]))),
    ("sparse-negative-length", sparse(length=-5)),
    ("sparse-length-beyond-int32", sparse(length=2**40)),
    ("sparse-length-beyond-int64", sparse(length=2**70)),
    ("sparse-values-of-another-dtype", sparse(sparse=np.array([1.5, np.nan]))),
    ("sparse-shorter-than-the-index", dict(sparse(), index={"range": (0, 50, 1), "name": None})),
    ("category-code-past-the-categories", categorical(np.array([0, 5], np.int8))),
    ("category-code-below-minus-one", categorical(np.array([0, -2], np.int8))),
    ("category-code-wrapping-in-int8", categorical(np.array([0, 2**40], np.int64))),
    ("category-code-uint64", categorical(np.array([0, 2**64 - 1], np.uint64))),
    ("category-float-codes", categorical(np.array([0.0, 1.0]))),
]]

# Extension columns rebuilt by the dtype's __from_arrow__, which reads the Arrow buffers in the
# dtype's own layout (pyarrow_array_to_numpy_and_mask): an array of another type is refused.
import pyarrow as pa

strings = pa.chunked_array([pa.array(["x" * 50, "y" * 70, "z", "w"])])
CASES += [(name, "pandas.Series", series({"dtype": dtype, "arrow": arrow}, 4), ()) for name, dtype, arrow in [
    ("period-over-string-buffers", "period[D]", strings),
    ("interval-over-strings", "interval[int64, right]", strings),
    ("Int64-over-strings", "Int64", strings),
    ("boolean-over-int8", "boolean", pa.chunked_array([pa.array([1, 2, 3, 4], pa.int8())])),
]]
"""


def test_pandas_sparse_positions_and_category_codes_are_refused_before_pandas_indexes_with_them():
    # pandas' Cython take/sparse kernels index with these unchecked; before the fix, the values of
    # another dtype were cast silently (NaN to -9223372036854775808).
    run_isolated(PANDAS_CASES, "print_refusals(CASES)\n")
