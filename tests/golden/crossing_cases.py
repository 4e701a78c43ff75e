"""The values freight promises to carry between library generations (numpy 1.26 <-> 2, pandas
2.2 <-> 3, pyarrow 17 <-> current, polars 1 <-> 2), in both directions; see docs/ARCHITECTURE.md,
"Version crossings". Imported by ``crossing.py`` under either environment (``.venv`` or
``.venv-old``), so it uses only what both generations have, and builds values with explicit
dtypes where the two generations' defaults differ.

Each case builds a value; :func:`describe` turns a value into plain text, lists and dicts that
mean the same under both generations (the promise: same type, same values, the same dtype up to
the names the generations give it), so the reader compares what it loaded with what the writer
described. A case a generation cannot build raises :class:`Unavailable` there. ``refused``
says, from the writer's and the reader's versions, which library makes the reader refuse it
(with a ``ProducerVersionError`` naming that library and both versions), or None.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa

Versions = dict[str, str]


class Unavailable(Exception):
    """This generation of the library cannot build the case."""


class Case:
    def __init__(self, make: Callable[[], Any], refused: Callable[[Versions, Versions], str | None] | None):
        self.make, self.refused = make, refused


CASES: dict[str, Case] = {}


def major(version: str) -> int:
    return int(version.split(".")[0])


def minor(version: str) -> tuple[int, int]:
    parts = version.split(".")
    return int(parts[0]), int(parts[1])


def case(refused: Callable[[Versions, Versions], str | None] | None = None) -> Callable[[Callable[[], Any]], Any]:
    def add(make: Callable[[], Any]) -> Callable[[], Any]:
        CASES[make.__name__] = Case(make, refused)
        return make

    return add


def needs(library: str, version: tuple[int, int]) -> Callable[[Versions, Versions], str | None]:
    """Refused by readers whose ``library`` is older than ``version`` (a dtype it lacks)."""
    return lambda writer, reader: library if minor(reader[library]) < version else None


def same_version(library: str) -> Callable[[Versions, Versions], str | None]:
    """Refused unless the reader has the writer's very version (a format that library keeps
    only within one version)."""
    return lambda writer, reader: library if writer[library] != reader[library] else None


# -- numpy ------------------------------------------------------------------------------------


@case()
def np_numbers():
    return {
        "f8": np.arange(12, dtype=np.float64).reshape(3, 4),
        "i4_fortran": np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
        "i2_big_endian": np.arange(5, dtype=">i2"),
        "f2": np.array([1.5, -2.0, np.nan], dtype=np.float16),
        "c16": np.array([1 + 2j], dtype=np.complex128),
        "bool": np.array([True, False, True]),
        "u8_readonly": _readonly(np.arange(4, dtype=np.uint8)),
        "zero_d": np.array(7.0),
        "empty": np.zeros((0, 3), dtype=np.int64),
    }


@case()
def np_text_and_time():
    return {
        "datetime": np.array(["2024-01-01T00:00:00", "NaT"], dtype="M8[ns]"),
        "timedelta": np.array([1, 2], dtype="m8[s]"),
        "unicode": np.array(["a", "bcd", "é✓"], dtype="<U3"),
        "bytes": np.array([b"x", b"yz"], dtype="S2"),
        "structured": np.array(
            [(1, 2.5), (3, 4.5)], dtype=np.dtype({"names": ["a", "b"], "formats": ["u1", "<f8"], "align": True})
        ),
    }


@case()
def np_object_array():
    # Pickled in place (a pickle island): numpy 2 pickles name numpy._core, which 1.26 aliases.
    return np.array(["a", 1, None, 2.5], dtype=object)


@case()
def np_scalars():
    return [np.float64(1.5), np.int8(-3), np.bool_(True), np.datetime64("2024-02-29", "D")]


@case(refused=needs("numpy", (2, 0)))
def np_stringdtype():
    dtypes = getattr(np, "dtypes", None)
    if not hasattr(dtypes, "StringDType"):
        raise Unavailable("numpy < 2 has no StringDType")
    return np.array(["a", "bc", "é"], dtype=dtypes.StringDType())


# -- pandas -----------------------------------------------------------------------------------


def _str_nan_dtype() -> Any:
    """pandas' NaN-semantics string dtype: ``str`` in pandas 3, ``string[pyarrow_numpy]`` in 2.2
    (what ``future.infer_string`` makes)."""
    try:
        return pd.StringDtype("pyarrow", na_value=np.nan)
    except TypeError:  # pandas 2.2: no na_value
        return pd.StringDtype("pyarrow_numpy")


@case()
def pd_numbers_with_string_labels():
    # Default labels: object in pandas 2.2, "str" in pandas 3.
    return pd.DataFrame(
        {"ints": np.arange(3, dtype=np.int64), "floats": [1.5, np.nan, -0.0], "flags": [True, False, True]},
        index=pd.Index(["x", "y", "z"], name="key"),
    )


@case()
def pd_default_strings():
    # Default string data: an object column in pandas 2.2, a "str" one in pandas 3.
    return pd.DataFrame({"name": ["ann", None, "bob"], "n": np.array([1, 2, 3], dtype=np.int64)})


@case()
def pd_object_strings():
    labels = pd.Index(["a", "b", "c"], dtype=object, name="obj")
    return {
        "index": labels,
        "series": pd.Series(["p", "q", None], dtype=object, index=labels, name="s"),
        "frame": pd.DataFrame({"col": pd.Series(["u", "v", "w"], dtype=object)}, index=labels),
        "multi": pd.MultiIndex.from_arrays([labels, np.arange(3, dtype=np.int64)], names=["l", "n"]),
    }


@case()
def pd_str_nan_pyarrow():
    return pd.Series(pd.array(["a", None, "c"], dtype=_str_nan_dtype()), name="s")


@case(refused=needs("pandas", (2, 3)))
def pd_str_nan_python():
    try:
        dtype = pd.StringDtype("python", na_value=np.nan)
    except TypeError:
        raise Unavailable("pandas < 2.3 has no python storage with NaN semantics") from None
    return pd.Series(pd.array(["a", None, "c"], dtype=dtype))


@case()
def pd_string_na():
    return pd.DataFrame(
        {
            "python": pd.array(["a", None, "c"], dtype=pd.StringDtype("python")),
            "pyarrow": pd.array(["a", None, "é"], dtype=pd.StringDtype("pyarrow")),
        }
    )


@case()
def pd_series_and_index_of_strings():
    return [pd.Series(["a", "b", None], name="letters"), pd.Index(["u", "v"], name="i"), pd.Index(list("abc") * 40)]


@case()
def pd_multiindex():
    index = pd.MultiIndex.from_arrays(
        [["a", "a", "b"], np.array([1, 2, 1], dtype=np.int64)], names=["letter", "number"]
    )
    return pd.DataFrame({"v": [1.0, 2.0, 3.0]}, index=index)


@case()
def pd_categorical():
    cat = pd.Categorical(["lo", "hi", None, "lo"], categories=["lo", "hi"], ordered=True)
    return pd.DataFrame({"c": cat}, index=pd.CategoricalIndex(["a", "b", "a", "c"]))


@case()
def pd_nullable():
    return pd.DataFrame(
        {
            "Int64": pd.array([1, None, 3], dtype="Int64"),
            "boolean": pd.array([True, None, False], dtype="boolean"),
            "Float64": pd.array([1.5, None, 2.0], dtype="Float64"),
            "UInt8": pd.array([1, 2, None], dtype="UInt8"),
        }
    )


@case()
def pd_datetimes():
    naive = np.array(["2024-01-01T10:00", "NaT", "2024-03-31T02:30"], dtype="M8[ns]")
    return pd.DataFrame(
        {
            "naive": naive,
            "utc": pd.Series(naive).dt.tz_localize("UTC"),
            "paris": pd.Series(naive).dt.tz_localize("UTC").dt.tz_convert("Europe/Paris"),
            "delta": np.array([1, -2, 3], dtype="m8[s]").astype("m8[ns]"),
        },
        index=pd.date_range("2024-01-01", periods=3, freq="D", unit="ns"),
    )


@case()
def pd_period_interval():
    return pd.DataFrame(
        {
            "period": pd.period_range("2024-01", periods=3, freq="M"),
            "interval": pd.IntervalIndex.from_breaks(np.array([0, 1, 2, 3], dtype=np.int64)),
        }
    )


@case()
def pd_arrow_dtypes():
    return pd.DataFrame(
        {
            "i": pd.array([1, None, 3], dtype=pd.ArrowDtype(pa.int64())),
            "s": pd.array(["a", None, "c"], dtype=pd.ArrowDtype(pa.string())),
            "l": pd.array([[1, 2], None, []], dtype=pd.ArrowDtype(pa.list_(pa.int64()))),
            "ts": pd.array(
                [dt.datetime(2024, 1, 1), None, dt.datetime(2024, 1, 2)], dtype=pd.ArrowDtype(pa.timestamp("us", "UTC"))
            ),
        }
    )


@case()
def pd_sparse():
    return pd.Series(pd.arrays.SparseArray([0.0, 0.0, 1.5, 0.0, np.nan]), name="sparse")


@case()
def pd_object_mixed():
    return pd.DataFrame({"o": pd.Series([1, "two", None, decimal.Decimal("3.5")], dtype=object)})


@case()
def pd_object_pandas_scalars():
    # pickled in place, by pandas' own reducers
    values = [pd.Timestamp("2024-01-01", tz="UTC"), pd.Timedelta(5, "s"), pd.Period("2024-01", "M"), pd.NA]
    return pd.Series(values + [pd.Interval(0, 1), np.float64(1.5)], dtype=object)


@case()
def pd_object_nat():
    # pandas 2 and 3 pickle NaT through differently named functions (freight aliases them)
    return pd.Series([pd.NaT, "x"], dtype=object)


@case()
def pd_empty_and_attrs():
    df = pd.DataFrame({"a": np.array([], dtype=np.float64)})
    df.attrs["source"] = "sensor"
    return [df, pd.Series([], dtype=np.int64), pd.RangeIndex(2, 20, 3, name="r")]


# -- pyarrow ----------------------------------------------------------------------------------


def _table() -> pa.Table:
    return pa.table(
        {
            "i": pa.array([1, None, 3], pa.int64()),
            "s": pa.array(["a", "é", None], pa.string()),
            "ls": pa.array(["x", None, "z"], pa.large_string()),
            "b": pa.array([b"\x00", b"", None], pa.binary()),
            "list": pa.array([[1, 2], [], None], pa.list_(pa.int32())),
            "struct": pa.array([{"x": 1, "y": "a"}, None, {"x": 3, "y": None}]),
            "dict": pa.array(["lo", "hi", "lo"]).dictionary_encode(),
            "ts": pa.array([0, None, 10**12], pa.timestamp("ns", "Europe/Paris")),
            "dec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.50")], pa.decimal128(9, 2)),
            "date": pa.array([dt.date(2024, 2, 29), None, dt.date(1970, 1, 1)], pa.date32()),
            "null": pa.nulls(3),
        },
        metadata={"origin": "crossing"},
    )


@case()
def pa_table():
    return _table()


@case()
def pa_chunked_and_arrays():
    return {
        "chunked": pa.chunked_array([pa.array([1, 2]), pa.array([3])]),
        "array": pa.array([1.5, None]),
        "batch": _table().to_batches()[0],
        "view": pa.array(["short", "a string longer than twelve bytes", None], pa.string_view()),
    }


@case(refused=needs("pyarrow", (19, 0)))
def pa_decimal32():
    if not hasattr(pa, "decimal32"):
        raise Unavailable("pyarrow < 19 has no decimal32")
    return pa.table({"d": pa.array([decimal.Decimal("1.25"), None], pa.decimal32(5, 2))})


# -- polars -----------------------------------------------------------------------------------


@case()
def pl_frame():
    return pl.DataFrame(
        {
            "i": pl.Series([1, None, 3], dtype=pl.Int64),
            "f": [1.5, None, float("nan")],
            "s": ["a", None, "é"],
            "b": [True, False, None],
            "list": [[1, 2], [], None],
            "struct": [{"x": 1, "y": "a"}, {"x": 2, "y": None}, None],
            "date": [dt.date(2024, 2, 29), None, dt.date(1970, 1, 1)],
            "ts": pl.Series([dt.datetime(2024, 1, 1), None, dt.datetime(2024, 6, 1)]).dt.replace_time_zone("UTC"),
            "dur": [dt.timedelta(seconds=1), None, dt.timedelta(days=-1)],
            "dec": pl.Series([decimal.Decimal("1.25"), None, decimal.Decimal("3.50")], dtype=pl.Decimal(9, 2)),
            "bin": [b"\x00", None, b"xyz"],
        }
    )


@case()
def pl_categories():
    return pl.DataFrame(
        {
            "cat": pl.Series(["lo", "hi", None, "lo"], dtype=pl.Categorical),
            "enum": pl.Series(["lo", "hi", "hi", None], dtype=pl.Enum(["lo", "hi"])),
        }
    )


@case()
def pl_series():
    return [
        pl.Series("n", [1, 2, 3], dtype=pl.UInt16),
        pl.Series("s", ["a", None]),
        pl.Series("e", [], dtype=pl.Float32),
    ]


@case()
def pl_int128():
    # No Arrow type: polars' own IPC format.
    return pl.DataFrame({"big": pl.Series([2**100, -(2**90), None], dtype=pl.Int128)})


@case(refused=same_version("polars"))
def pl_lazy():
    return pl.LazyFrame({"a": [1, 2, 3]}).filter(pl.col("a") > 1)


# -- describing values ------------------------------------------------------------------------


def describe(value: Any) -> Any:
    """The value as plain data that both generations write the same way when they hold the same
    value (see the module)."""
    if isinstance(value, dict):
        return {"dict": {str(k): describe(v) for k, v in value.items()}}
    if isinstance(value, list):
        return {"list": [describe(v) for v in value]}
    if isinstance(value, np.ndarray):
        return _ndarray(value)
    if isinstance(value, pd.DataFrame):
        return {
            "DataFrame": {
                "index": describe(value.index),
                "columns": describe(value.columns),
                "data": [_values(value.iloc[:, i]) for i in range(value.shape[1])],
                "attrs": {k: token(v) for k, v in value.attrs.items()},
            }
        }
    if isinstance(value, pd.Series):
        return {"Series": {"name": token(value.name), "index": describe(value.index), "values": _values(value)}}
    if isinstance(value, pd.MultiIndex):
        return {
            "MultiIndex": {
                "levels": [describe(level) for level in value.levels],
                "codes": [[int(c) for c in codes] for codes in value.codes],
                "names": [token(n) for n in value.names],
            }
        }
    if isinstance(value, pd.RangeIndex):
        return {"RangeIndex": [value.start, value.stop, value.step, token(value.name)]}
    if isinstance(value, pd.Index):
        return {
            type(value).__name__: {
                "name": token(value.name),
                "values": _values(value),
                "freq": getattr(value, "freqstr", None),
            }
        }
    if isinstance(value, (pa.Table, pa.RecordBatch)):
        return {
            type(value).__name__: {
                "schema": [_field(f) for f in value.schema],
                "metadata": {k.decode(): v.decode() for k, v in (value.schema.metadata or {}).items()},
                "columns": [_arrow_values(c) for c in value.columns],
            }
        }
    if isinstance(value, pa.ChunkedArray):
        return {"ChunkedArray": [str(value.type), [_arrow_values(c) for c in value.chunks]]}
    if isinstance(value, pa.Array):
        return {"Array": [str(value.type), _arrow_values(value)]}
    if isinstance(value, pl.DataFrame):
        return {"polars.DataFrame": [[name, _pl_dtype(t)] for name, t in value.schema.items()] + [_pl_rows(value)]}
    if isinstance(value, pl.Series):
        return {"polars.Series": [value.name, _pl_dtype(value.dtype), [token(v) for v in value.to_list()]]}
    if isinstance(value, pl.LazyFrame):
        return {"polars.LazyFrame": describe(value.collect())}
    return token(value)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _ndarray(a: np.ndarray) -> Any:
    if a.dtype.kind == "O":
        return {"ndarray[object]": [list(a.shape), [token(v) for v in a.ravel().tolist()]]}
    if a.dtype.kind == "T":  # numpy 2's StringDType: only the writer describes it
        return {"ndarray[StringDType]": [list(a.shape), [token(v) for v in a.tolist()]]}
    return {
        "ndarray": [
            a.dtype.str if a.dtype.fields is None else repr(a.dtype.descr),
            list(a.shape),
            bool(a.flags.f_contiguous and not a.flags.c_contiguous),
            bool(a.flags.writeable),
            repr(a.tolist()),
        ]
    }


def dtype_key(dtype: Any) -> Any:
    """A pandas dtype by what it means: the NaN-semantics pyarrow string dtype is ``str`` in
    pandas 3 and ``string[pyarrow_numpy]`` in pandas 2.2, one key here."""
    if isinstance(dtype, pd.StringDtype):
        storage = dtype.storage
        nan = storage == "pyarrow_numpy" or dtype.na_value is not pd.NA
        return f"string[{'pyarrow' if storage == 'pyarrow_numpy' else storage}, {'NaN' if nan else 'NA'}]"
    if isinstance(dtype, pd.CategoricalDtype):
        return {"category": describe(dtype.categories), "ordered": bool(dtype.ordered)}
    return str(dtype)


def _values(values: pd.Series | pd.Index) -> Any:
    return [dtype_key(values.dtype), [token(v) for v in values.tolist()]]


def _field(field: pa.Field) -> Any:
    return [field.name, str(field.type), field.nullable]


def _arrow_values(array: Any) -> Any:
    return [token(v) for v in array.to_pylist()]


def _pl_dtype(dtype: Any) -> str:
    # The class name: polars 1 and 2 print the parameters of Categorical differently.
    if isinstance(dtype, pl.Enum):
        return f"Enum{list(dtype.categories)}"
    return str(dtype) if not isinstance(dtype, pl.Categorical) else "Categorical"


def _pl_rows(df: pl.DataFrame) -> Any:
    return [[token(v) for v in row] for row in df.rows()]


def token(v: Any) -> Any:
    """A scalar as text that keeps its kind (NaN, None, NA and NaT stay apart) and its value."""
    if v is None:
        return "None"
    if v is pd.NA:
        return "NA"
    if v is pd.NaT:
        return "NaT"
    if isinstance(v, (bool, np.bool_)):
        return f"bool:{bool(v)}"
    if isinstance(v, (int, np.integer)):
        return f"int:{int(v)}"
    if isinstance(v, (float, np.floating)):
        return "float:nan" if math.isnan(v) else f"float:{float(v)!r}"
    if isinstance(v, (complex, np.complexfloating)):
        return f"complex:{complex(v)!r}"
    if isinstance(v, str):
        return f"str:{v}"
    if isinstance(v, bytes):
        return f"bytes:{v.hex()}"
    if isinstance(v, decimal.Decimal):
        return f"decimal:{v}"
    if isinstance(v, np.datetime64):
        return f"datetime64:{v}"
    if isinstance(v, pd.Timestamp):
        return f"timestamp:{v.isoformat()}@{v.tz}"
    if isinstance(v, dt.datetime):
        return f"datetime:{v.isoformat()}"
    if isinstance(v, (dt.date, dt.time)):
        return f"{type(v).__name__}:{v.isoformat()}"
    if isinstance(v, (pd.Timedelta, dt.timedelta)):
        return f"timedelta:{pd.Timedelta(v)}"
    if isinstance(v, pd.Period):
        return f"period:{v}"
    if isinstance(v, pd.Interval):
        return f"interval:{v}"
    if isinstance(v, (list, tuple)):
        return [token(x) for x in v]
    if isinstance(v, dict):
        return {str(k): token(x) for k, x in v.items()}
    return f"{type(v).__name__}:{v!r}"
