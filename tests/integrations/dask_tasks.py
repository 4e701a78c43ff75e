"""Task functions for test_dask.py, imported by the workers (the test puts this folder on their
PYTHONPATH), so that they pickle by reference."""

from __future__ import annotations

import os
from typing import Any

import numpy as np


def double(a: np.ndarray) -> np.ndarray:
    return a * 2


def make_pandas(seed: int, rows: int) -> Any:
    import pandas as pd

    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "k": rng.integers(0, 50, rows),
            "x": rng.random(rows),
            "s": [f"row-{i}" for i in range(rows)],
            "t": pd.date_range("2026-01-01", periods=rows, freq="s"),
        }
    )


def make_polars(seed: int, rows: int) -> Any:
    import polars as pl

    rng = np.random.default_rng(seed)
    return pl.DataFrame({"k": rng.integers(0, 50, rows), "x": rng.random(rows), "s": [f"r{i}" for i in range(rows)]})


def concat_pandas(a: Any, b: Any) -> Any:
    import pandas as pd

    return pd.concat([a, b], ignore_index=True)


def concat_polars(a: Any, b: Any) -> Any:
    import polars as pl

    return pl.concat([a, b])


def make_tensor(n: int) -> Any:
    import torch

    return torch.arange(n, dtype=torch.float32)


def tensor_sum(t: Any) -> float:
    return float(t.sum())


def make_scaler(factor: float) -> Any:
    weights = np.arange(100_000, dtype="float64")

    def scale(i: int) -> float:
        return float(weights[i] * factor)

    return scale


def call(f: Any, i: int) -> Any:
    return f(i)


def pid() -> int:
    return os.getpid()


def freight_stats() -> dict[str, int]:
    from freight.integrations import dask as fd

    return fd.stats()


def has_family() -> bool:
    from distributed.protocol.serialize import families

    return "freight" in families


def identity(x: Any) -> Any:
    return x


def writeable(a: np.ndarray) -> bool:
    return bool(a.flags.writeable)
