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

import freight
from freight import carrier

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


def test_large_values_through_a_store(htex, tmp_path_factory):
    """With ``large_values_url``, an argument over the threshold is written to the store and the
    message carries a reference; the worker reads it (deleting it), and sends its large result
    back the same way, which the submitter reads and deletes: nothing is left behind."""
    from parsl.serialize import facade

    import freight.integrations.parsl as fp
    import freight.storage

    folder = tmp_path_factory.mktemp("parsl-values")
    url = f"file://{folder}"
    fp.install(large_values_url=url)
    try:
        arr = np.random.default_rng(1).random(400_000)  # 3.2 MB: over the 1 MiB default
        payload = facade.serialize((arr,))
        ref = carrier.Ref.from_bytes(payload[len(fp.IDENTIFIER) + 1 :])
        assert ref.location == url and ref.key.startswith("freight-parsl/") and len(payload) < 300
        np.testing.assert_array_equal(facade.deserialize(payload)[0], arr)  # read, and deleted
        with pytest.raises(freight.DeserializationError, match="is gone: it is read-once and was read already"):
            facade.deserialize(payload)
        futures = [htex.echo(arr * i) for i in range(3)]
        for i, f in enumerate(futures):
            np.testing.assert_array_equal(f.result(timeout=60), arr * i)
        df = pd.DataFrame({"i": np.arange(200_000), "s": [f"r{i % 97}" for i in range(200_000)]})
        pd.testing.assert_frame_equal(htex.echo(df).result(timeout=60), df)
        assert htex.echo(5).result(timeout=60) == 5  # small values stay in the message
        assert freight.storage.open(url).list("freight-parsl/") == []
    finally:
        fp.install()


def test_large_value_references_checked(htex):
    from parsl.serialize import facade

    import freight.integrations.parsl as fp

    passwd = carrier.Ref.build("store", "file:///etc", "passwd", carrier.READ_ONCE, 0, 10, [(None, 10)], None)
    with pytest.raises(freight.DeserializationError, match="outside the backend's namespace"):
        facade.deserialize(fp.IDENTIFIER + b"\n" + bytes(passwd))
    redis = carrier.Ref.build("redis", "redis://x/0", "freight-parsl/x", carrier.READ_ONCE, 0, 10, [(None, 10)], None)
    with pytest.raises(freight.DeserializationError, match="not freight's"):
        facade.deserialize(fp.IDENTIFIER + b"\n" + bytes(redis))
    for bad in ({"large_values_url": "memory://"}, {"large_values_url": "/tmp/x"}, {"large_values": -1}):
        with pytest.raises(freight.OptionError):
            fp.install(**bad)
    assert fp.installed()


def test_large_values_automatic_on_a_local_htex(htex):
    """The default (``large_values_url="auto"``): the module's HTEX runs its workers here, so large
    payloads go through a folder in /dev/shm, and come back the same way."""
    from parsl.serialize import facade

    import freight.integrations.parsl as fp

    fp.install()
    arr = np.random.default_rng(2).random(300_000)
    payload = facade.serialize((arr,))
    prefix = fp.IDENTIFIER + b"\nFREIGHT-REF"
    assert payload.startswith(prefix) and len(payload) < 300
    folder = carrier.Ref.from_bytes(payload[len(fp.IDENTIFIER) + 1 :]).location[len("file://") :]
    assert os.path.isdir(folder) and (folder.startswith("/dev/shm/") or not os.path.isdir("/dev/shm"))
    facade.deserialize(payload)
    np.testing.assert_array_equal(htex.echo(arr).result(timeout=60), arr)
    assert htex.echo(7).result(timeout=60) == 7
    fp.install(large_values_url=None)  # in the messages
    assert not facade.serialize((arr,)).startswith(prefix)
    np.testing.assert_array_equal(htex.echo(arr).result(timeout=60), arr)
    fp.install()


def test_large_values_stay_in_messages_for_remote_workers():
    """An executor whose workers may run elsewhere (another launcher) keeps payloads in the
    messages: a folder of this machine would not reach them."""
    from parsl.executors import HighThroughputExecutor
    from parsl.launchers import SrunLauncher
    from parsl.providers import LocalProvider

    from freight.integrations import _parsl_values

    class Kernel:  # what _workers_here reads of a DataFlowKernel
        def __init__(self, launcher):
            self.executors = {"htex": HighThroughputExecutor(provider=LocalProvider(launcher=launcher))}

    assert not _parsl_values._workers_here(Kernel(SrunLauncher()))
    from parsl.launchers import SingleNodeLauncher

    assert _parsl_values._workers_here(Kernel(SingleNodeLauncher()))


def test_large_results_leave_the_submitter_s_options_alone(htex):
    """A stored result read by the submitter does not replace its own options (threshold,
    automatic store): only a worker adopts the store its arguments came through."""
    from parsl.serialize import facade

    import freight.integrations.parsl as fp

    fp.install(large_values=8 << 20)
    try:
        big = np.random.default_rng(4).random(10 << 17)  # 10 MiB: stored, and so is the echo
        np.testing.assert_array_equal(htex.echo(big).result(timeout=60), big)
        medium = np.zeros(300_000)  # 2.4 MB: under this submitter's 8 MiB
        assert not facade.serialize((medium,)).startswith(fp.IDENTIFIER + b"\nFREIGHT-REF")
        assert fp._STATE["large"] == "auto" and fp._STATE["threshold"] == 8 << 20
    finally:
        fp.install()
