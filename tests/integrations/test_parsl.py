"""freight.integrations.parsl: a real local HighThroughputExecutor (process workers) started once
for the module; apps taking and returning numpy arrays, DataFrames and closures, with freight the
first data serializer on both sides."""

from __future__ import annotations

import os
import sys

import numpy as np
import pandas as pd
import polars as pl
import pytest

pytest.importorskip("parsl")

pytestmark = pytest.mark.timeout(120)

_HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def htex(tmp_path_factory):
    import parsl
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    import freight.integrations.parsl as fp

    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PATH")}
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (_HERE, saved["PYTHONPATH"]) if p
    )  # workers import parsl_apps
    # HTEX starts interchange.py and process_worker_pool.py from PATH: the virtualenv's scripts
    os.environ["PATH"] = os.pathsep.join(p for p in (os.path.dirname(sys.executable), saved["PATH"]) if p)
    fp.install()
    config = Config(
        executors=[
            HighThroughputExecutor(
                label="htex",
                address="127.0.0.1",
                max_workers_per_node=2,
                cores_per_worker=1,
                provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1),
            )
        ],
        run_dir=str(tmp_path_factory.mktemp("parsl")),
        strategy="none",
        usage_tracking=0,
    )
    dfk = parsl.load(config)
    try:
        import parsl_apps

        yield parsl_apps
    finally:
        dfk.cleanup()
        parsl.clear()
        fp.uninstall()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_freight_is_tried_first(htex):
    from parsl.serialize import facade

    import freight.integrations.parsl as fp

    assert fp.installed()
    assert list(facade.methods_for_data)[0] == fp.IDENTIFIER
    payload = facade.serialize((np.arange(10),))
    assert payload.startswith(fp.IDENTIFIER + b"\n")
    assert facade.deserialize(payload)[0].tolist() == list(range(10))
    # functions still go through Parsl's code methods (dill, cached per function)
    assert not facade.serialize(len).startswith(fp.IDENTIFIER)


def test_numpy_arrays(htex):
    arr = np.random.default_rng(0).random((512, 1024))
    futures = [htex.echo(arr * i) for i in range(4)]
    for i, f in enumerate(futures):
        np.testing.assert_array_equal(f.result(timeout=60), arr * i)
    pid, installed, kind = htex.where(arr).result(timeout=60)
    assert pid != os.getpid() and installed and kind == "numpy.ndarray"  # decoded by freight, replies in kind


def test_dataframes(htex):
    df = pd.DataFrame(
        {"i": np.arange(20_000), "f": np.linspace(0, 1, 20_000), "s": [f"r{i % 97}" for i in range(20_000)]}
    )
    pf = pl.DataFrame({"a": np.arange(5000), "b": [f"x{i}" for i in range(5000)]})
    pd.testing.assert_frame_equal(htex.echo(df).result(timeout=60), df)
    assert htex.echo(pf).result(timeout=60).equals(pf)
    assert htex.where(value=df).result(timeout=60)[2] == "pandas.DataFrame"  # keyword arguments too


def test_closures(htex):
    weights = np.arange(4.0)

    def dot(x):  # a closure carrying an array: cloudpickled inside the freight payload
        return float(weights @ x)

    assert htex.call(dot, np.ones(4)).result(timeout=60) == 6.0
    scale = htex.make_scaler(2.5).result(timeout=60)  # a closure coming back (Parsl's code path)
    np.testing.assert_array_equal(scale(2), np.full(4, 5.0))


def test_errors_come_back(htex):
    with pytest.raises(ZeroDivisionError):
        htex.call(lambda x: 1 / x, 0).result(timeout=60)
