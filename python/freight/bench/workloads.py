"""What ``freight bench`` serializes: each workload makes its data at a given size.

A workload's ``axis`` says what its sizes count: ``bytes`` of array data, table ``rows``,
``items`` of a list, or named ``case``s (small values, closures) that have no size. Sizes run
about two per decade; ``--quick`` takes every other one up to 64 MiB (or 100k rows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from freight.bench.harness import GiB, KiB, MiB, fmt_bytes, fmt_count

#: what a row or an item is taken to weigh where a size must be known before the data is made
#: (``--max-size``, and which sizes run in child processes: see runner.py)
BYTES_PER_ROW = 64
#: 1 KiB .. 1 GiB in steps of 4 (about two sizes per decade)
BYTE_SIZES = tuple(KiB << (2 * i) for i in range(11))
#: 10 .. 10M rows, 1-3-10 (two per decade)
ROW_SIZES = tuple(m * 10**e for e in range(1, 8) for m in (1, 3) if m * 10**e <= 10_000_000)
QUICK_MAX_BYTES = 64 * MiB
QUICK_MAX_ROWS = 100_000


@dataclass(frozen=True)
class Workload:
    name: str  # unique, e.g. "numpy-float64"
    group: str  # what --only selects, e.g. "numpy"
    kind: str  # which peers apply (see peers.py)
    axis: str  # "bytes" | "rows" | "items" | "case"
    sizes: Sequence[Any]
    make: Callable[[Any], Any]
    equal: Callable[[Any, Any], bool]
    nbytes: Callable[[Any], int]  # the data's own size, for throughput
    requires: tuple[str, ...] = ()
    description: str = ""

    def label(self, size: Any) -> str:
        if self.axis == "bytes":
            return fmt_bytes(size)
        if self.axis in ("rows", "items"):
            return f"{fmt_count(size)} {self.axis}"
        return str(size)

    def approx_bytes(self, size: Any) -> int:
        """The data's size in bytes, known without making it: the size itself for ``bytes``,
        ``BYTES_PER_ROW`` per row or item, 0 for named cases (small values and closures)."""
        if self.axis == "bytes":
            return int(size)
        if self.axis in ("rows", "items"):
            return int(size) * BYTES_PER_ROW
        return 0

    def sizes_for(self, quick: bool, max_bytes: int | None) -> list[Any]:
        """The sizes a run measures: all of them, or every other one up to the quick limits,
        and none above ``max_bytes`` (rows and items are capped at max_bytes / 64)."""
        sizes = list(self.sizes)
        if self.axis == "case":
            return sizes
        if quick:
            limit = QUICK_MAX_BYTES if self.axis == "bytes" else QUICK_MAX_ROWS
            sizes = [s for s in sizes if s <= limit][::2]
        if max_bytes is not None:
            limit = max_bytes if self.axis == "bytes" else max(10, max_bytes // BYTES_PER_ROW)
            sizes = [s for s in sizes if s <= limit] or sizes[:1]
        return sizes


# -- numpy ---------------------------------------------------------------------------------------


def _rng() -> Any:
    import numpy as np

    return np.random.default_rng(0)


def _np_float64(nbytes: int) -> Any:
    return _rng().random(nbytes // 8)


def _np_int64(nbytes: int) -> Any:
    return _rng().integers(-(2**40), 2**40, nbytes // 8, dtype="int64")


STRUCT_DTYPE = [("id", "<i8"), ("x", "<f4"), ("y", "<f4"), ("flag", "?"), ("code", "S7")]  # 24 bytes


def _np_structured(nbytes: int) -> Any:
    import numpy as np

    n = nbytes // 24
    rng = _rng()
    out = np.empty(n, dtype=STRUCT_DTYPE)
    out["id"] = np.arange(n)
    out["x"] = rng.random(n, dtype="float32")
    out["y"] = rng.random(n, dtype="float32")
    out["flag"] = out["id"] % 3 == 0
    out["code"] = b"abc"
    return out


def _np_equal(a: Any, b: Any) -> bool:
    import numpy as np

    return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def _np_nbytes(a: Any) -> int:
    return int(a.nbytes)


# -- tables --------------------------------------------------------------------------------------


def _pandas_mixed(rows: int) -> Any:
    """int64, float64, str, categorical and datetime columns, as in the tables issue."""
    import numpy as np
    import pandas as pd

    rng = _rng()
    return pd.DataFrame(
        {
            "i": rng.integers(0, 1 << 40, rows),
            "f": rng.random(rows),
            "s": [f"item-{i % 1000:04d}" for i in range(rows)],  # pandas 3: the default str dtype
            "c": pd.Categorical(rng.choice(["red", "green", "blue", "cyan"], rows)),
            "t": pd.date_range("2026-01-01", periods=rows, freq="s"),
            "b": np.arange(rows) % 2 == 0,
        }
    )


def _pandas_equal(a: Any, b: Any) -> bool:
    return a.equals(b) and list(a.dtypes) == list(b.dtypes)


def _pandas_nbytes(df: Any) -> int:
    return int(df.memory_usage(deep=True, index=True).sum())


def _three_columns(rows: int) -> dict[str, Any]:
    rng = _rng()
    return {
        "i": rng.integers(0, 1 << 40, rows),
        "f": rng.random(rows),
        "s": [f"item-{i % 1000:04d}" for i in range(rows)],
    }


def _polars_frame(rows: int) -> Any:
    import polars as pl

    return pl.DataFrame(_three_columns(rows))


def _polars_equal(a: Any, b: Any) -> bool:
    return a.schema == b.schema and a.equals(b)


def _polars_nbytes(df: Any) -> int:
    return int(df.estimated_size())


def _arrow_table(rows: int) -> Any:
    import pyarrow as pa

    return pa.table(_three_columns(rows))


def _arrow_equal(a: Any, b: Any) -> bool:
    return a.schema.equals(b.schema) and a.equals(b)


def _arrow_nbytes(t: Any) -> int:
    return int(t.nbytes)


# -- torch ---------------------------------------------------------------------------------------


def _torch_tensor(nbytes: int) -> Any:
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.rand(nbytes // 4, generator=g, dtype=torch.float32)


def _torch_state_dict(nbytes: int) -> Any:
    """Eight linear layers (weight and bias) whose parameters add up to about ``nbytes``."""
    import torch

    g = torch.Generator().manual_seed(0)
    width = max(2, int((nbytes / 4 / 8) ** 0.5))
    out = {}
    for i in range(8):
        out[f"layers.{i}.weight"] = torch.rand(width, width, generator=g)
        out[f"layers.{i}.bias"] = torch.rand(width, generator=g)
    return out


def _torch_equal(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_torch_equal(a[k], b[k]) for k in a)
    return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)


def _torch_nbytes(x: Any) -> int:
    if isinstance(x, dict):
        return sum(_torch_nbytes(v) for v in x.values())
    return int(x.numel() * x.element_size())


# -- builtins and functions ------------------------------------------------------------------------

SMALL_CASES = ("int", "float", "short str", "3-tuple", "10-key dict")


def _small_value(case: str) -> Any:
    return {
        "int": 12345,
        "float": 3.25,
        "short str": "hello, freight",
        "3-tuple": (1, "two", 3.0),
        "10-key dict": {f"key{i}": i for i in range(10)},
    }[case]


def records(n: int) -> list[dict[str, Any]]:
    """JSON-like dicts of five scalars (int, float, str, bool, None or int)."""
    return [
        {"id": i, "score": i * 0.5, "name": f"user-{i}", "active": i % 2 == 0, "parent": None if i % 3 else i - 1}
        for i in range(n)
    ]


def _records_nbytes(rs: list[dict[str, Any]]) -> int:
    import sys

    # the containers and the values they hold (shared small ints are counted as if not shared)
    return sum(sys.getsizeof(r) + sum(sys.getsizeof(v) for v in r.values()) for r in rs) + sys.getsizeof(rs)


def _small_nbytes(x: Any) -> int:
    import sys

    return sys.getsizeof(x)


CLOSURE_CASES = ("lambda", "closure, 100 ints", "closure, 1 MiB array")


def _closure(case: str) -> Callable[[int], Any]:
    # Made inside a function so that pickle cannot send them by reference: by value only.
    if case == "lambda":
        offset = 7
        return lambda x: x + offset
    if case == "closure, 100 ints":
        table = list(range(100))

        def lookup(i: int) -> int:
            return table[i % len(table)] * 2

        return lookup
    import numpy as np

    weights = np.arange(MiB // 8, dtype="float64")

    def scale(i: int) -> float:
        return float(weights[i % len(weights)] * 2)

    return scale


def _closure_equal(a: Any, b: Any) -> bool:
    return callable(b) and all(a(i) == b(i) for i in (0, 3, 99))


def _closure_nbytes(f: Any) -> int:
    import sys

    cells = getattr(f, "__closure__", None) or ()
    return sum(getattr(c.cell_contents, "nbytes", sys.getsizeof(c.cell_contents)) for c in cells)


# -- compressible arrays ---------------------------------------------------------------------------


def _compressible(nbytes: int) -> Any:
    """int64 values in [0, 1000): the compression benchmark's data (lz4 gets about 3:1)."""
    return _rng().integers(0, 1000, nbytes // 8, dtype="int64")


# -- the list --------------------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    """Equal, a tuple also to the list msgpack gives back for it (msgpack has no tuple)."""
    return a == b or (isinstance(a, tuple) and isinstance(b, list) and list(a) == b)


WORKLOADS: tuple[Workload, ...] = (
    Workload("numpy-float64", "numpy", "array", "bytes", BYTE_SIZES, _np_float64, _np_equal, _np_nbytes,
             ("numpy",), "uniform random float64"),
    Workload("numpy-int64", "numpy", "array", "bytes", BYTE_SIZES, _np_int64, _np_equal, _np_nbytes,
             ("numpy",), "random int64 in ±2**40"),
    Workload("numpy-structured", "numpy", "array", "bytes", BYTE_SIZES, _np_structured, _np_equal, _np_nbytes,
             ("numpy",), "records of int64, 2 float32, bool, 7-byte string (24 bytes)"),
    Workload("pandas", "pandas", "pandas", "rows", ROW_SIZES, _pandas_mixed, _pandas_equal, _pandas_nbytes,
             ("pandas",), "int64, float64, str, categorical, datetime64 and bool columns"),
    Workload("polars", "polars", "polars", "rows", ROW_SIZES, _polars_frame, _polars_equal, _polars_nbytes,
             ("polars",), "int64, float64 and str columns"),
    Workload("pyarrow", "pyarrow", "arrow", "rows", ROW_SIZES, _arrow_table, _arrow_equal, _arrow_nbytes,
             ("pyarrow",), "a Table of int64, float64 and string columns"),
    Workload("torch-tensor", "torch", "torch", "bytes", BYTE_SIZES, _torch_tensor, _torch_equal, _torch_nbytes,
             ("torch",), "a float32 CPU tensor"),
    Workload("torch-state-dict", "torch", "torch-dict", "bytes", BYTE_SIZES[2:], _torch_state_dict, _torch_equal,
             _torch_nbytes, ("torch",), "eight linear layers' weights and biases"),
    Workload("small-values", "builtins", "builtins", "case", SMALL_CASES, _small_value, _same, _small_nbytes,
             (), "one small Python value per call"),
    Workload("records", "builtins", "builtins", "items", tuple(s for s in ROW_SIZES if s <= 1_000_000), records,
             _same, _records_nbytes, (), "a list of JSON-like dicts of five scalars"),
    Workload("closures", "closures", "closure", "case", CLOSURE_CASES, _closure, _closure_equal, _closure_nbytes,
             ("numpy",), "functions made inside a function (pickle cannot send them by reference)"),
    Workload("compressible", "compression", "compress", "bytes", BYTE_SIZES[3:], _compressible, _np_equal,
             _np_nbytes, ("numpy",), "int64 in [0, 1000): compresses about 3:1 with lz4"),
)  # fmt: skip

GROUPS = tuple(dict.fromkeys(w.group for w in WORKLOADS))


def select(only: str | None) -> list[Workload]:
    """The workloads named by ``--only`` (groups or workload names, comma-separated)."""
    if not only:
        return list(WORKLOADS)
    wanted = {x.strip() for x in only.split(",") if x.strip()}
    known = set(GROUPS) | {w.name for w in WORKLOADS}
    unknown = sorted(wanted - known)
    if unknown:
        raise ValueError(f"unknown workload {', '.join(unknown)}: choose from {', '.join(sorted(known))}")
    return [w for w in WORKLOADS if w.group in wanted or w.name in wanted]


def workload_named(name: str) -> Workload:
    """The workload called ``name`` (how a child process is told which workload to make)."""
    for w in WORKLOADS:
        if w.name == name:
            return w
    raise KeyError(f"no workload named {name!r}")


__all__ = ["GiB", "GROUPS", "WORKLOADS", "Workload", "records", "select", "workload_named"]
