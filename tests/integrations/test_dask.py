"""freight.integrations.dask on a real LocalCluster of worker processes (processes=True: in-process
workers would share the client's registrations and hide a missing one)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest

distributed = pytest.importorskip("distributed")  # a test dependency: make test installs it
from distributed import Client, LocalCluster  # noqa: E402

import freight  # noqa: E402
from freight.integrations import dask as fd  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))

import dask_tasks as tasks  # noqa: E402


@pytest.fixture(scope="module")
def client():
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_HERE, old) if p)
    try:
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", memory_limit="3GiB"
            ) as cluster,
            Client(cluster) as c,
        ):
            fd.install(c)
            yield c
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def _worker_stats(client) -> dict[str, dict[str, int]]:
    return client.run(tasks.freight_stats)


def _total(stats: dict[str, dict[str, int]], key: str) -> int:
    return sum(s[key] for s in stats.values())


def test_installed_on_client_scheduler_and_every_worker(client) -> None:
    assert tasks.has_family()
    assert all(client.run(tasks.has_family).values())
    assert client.run_on_scheduler(tasks.has_family)
    assert client._serializers[0] == "freight"
    assert len(set(client.run(tasks.pid).values())) == 2  # two real worker processes


def test_numpy_arrays_take_dasks_own_zero_copy_path(client) -> None:
    # numpy arrays are left to Dask's handler (as fast as freight's frames, and what workers use
    # between themselves); a container of them that the family takes still goes through freight
    before = fd.stats()
    arrays = [np.arange(n, dtype="float64") for n in (10, 1000, 300_000)]
    futures = client.scatter(arrays)
    results = client.gather(client.map(tasks.double, futures))
    for a, r in zip(arrays, results):
        np.testing.assert_array_equal(r, a * 2)
    assert fd.stats()["family_dumps"] == before["family_dumps"]
    assert fd.stats()["family_loads"] == before["family_loads"]
    # arrays a worker received are writable (views of the buffers Dask read them into)
    assert all(client.gather(client.map(tasks.writeable, futures)))
    bundle = {"a": arrays[2], "b": [arrays[1], "label"]}
    back = client.scatter([bundle], hash=False)[0].result(timeout=60)  # one value, not one per key
    np.testing.assert_array_equal(back["a"], arrays[2])
    assert back["b"][1] == "label"
    assert fd.stats()["family_dumps"] > before["family_dumps"]  # the dict went through freight


def _on_two_workers(client, make, concat, seeds=(1, 2), rows=60_000):
    workers = sorted(client.scheduler_info()["workers"])
    a = client.submit(make, seeds[0], rows, workers=[workers[0]], pure=False)
    b = client.submit(make, seeds[1], rows, workers=[workers[1]], pure=False)
    # concatenated on the first worker: the second frame moves worker to worker
    return client.submit(concat, a, b, workers=[workers[0]]).result(), (make(seeds[0], rows), make(seeds[1], rows))


def test_pandas_partitions_move_worker_to_worker_through_freight(client) -> None:
    before = _worker_stats(client)
    result, (a, b) = _on_two_workers(client, tasks.make_pandas, tasks.concat_pandas)
    pd.testing.assert_frame_equal(result, pd.concat([a, b], ignore_index=True))
    after = _worker_stats(client)
    assert _total(after, "type_dumps") > _total(before, "type_dumps")
    assert _total(after, "type_loads") > _total(before, "type_loads")


def test_polars_partitions_move_worker_to_worker_through_freight(client) -> None:
    before = _worker_stats(client)
    result, (a, b) = _on_two_workers(client, tasks.make_polars, tasks.concat_polars)
    assert result.equals(pl.concat([a, b]))
    after = _worker_stats(client)
    assert _total(after, "type_dumps") > _total(before, "type_dumps")


def test_small_tables_keep_dasks_own_path(client) -> None:
    before = _worker_stats(client)
    result, (a, b) = _on_two_workers(client, tasks.make_pandas, tasks.concat_pandas, rows=20)
    pd.testing.assert_frame_equal(result, pd.concat([a, b], ignore_index=True))
    after = _worker_stats(client)
    assert _total(after, "type_passed") > _total(before, "type_passed")


def test_torch_tensors_and_closures(client) -> None:
    workers = sorted(client.scheduler_info()["workers"])
    t = client.submit(tasks.make_tensor, 1_000_000, workers=[workers[0]])
    expected = tasks.tensor_sum(tasks.make_tensor(1_000_000))
    assert client.submit(tasks.tensor_sum, t, workers=[workers[1]]).result() == expected
    f = client.submit(tasks.make_scaler, 3.0, workers=[workers[0]])
    assert client.submit(tasks.call, f, 7, workers=[workers[1]]).result() == 21.0
    # a closure made on the client, sent as data
    g = client.scatter(tasks.make_scaler(2.0))
    assert client.submit(tasks.call, g, 5).result() == 10.0


def test_dataframe_groupby_and_shuffle(client) -> None:
    import dask.dataframe as dd

    df = tasks.make_pandas(7, 200_000)
    ddf = dd.from_pandas(df, npartitions=4)
    got = ddf.groupby("k").x.sum().compute().sort_index()
    pd.testing.assert_series_equal(got, df.groupby("k").x.sum().sort_index(), check_exact=False)
    before = _worker_stats(client)
    shuffled = ddf.shuffle("k", shuffle_method="tasks").compute()
    after = _worker_stats(client)

    # dask.dataframe turns str columns into its own string dtype: compare the values
    def canonical(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.astype({"s": object}).sort_values(["k", "s"]).reset_index(drop=True)

    pd.testing.assert_frame_equal(canonical(shuffled), canonical(df))
    assert _total(after, "type_dumps") > _total(before, "type_dumps")


def test_workers_that_join_later_get_freight(client) -> None:
    cluster = client.cluster
    cluster.scale(3)
    client.wait_for_workers(3, timeout=120)
    try:
        assert all(client.run(tasks.has_family).values())
        assert len(client.run(tasks.has_family)) == 3
    finally:
        cluster.scale(2)
        deadline = time.monotonic() + 60
        while len(client.scheduler_info()["workers"]) > 2 and time.monotonic() < deadline:
            time.sleep(0.2)


def test_bad_options_fail_on_the_client() -> None:
    with pytest.raises(TypeError):
        fd.install(object(), no_such_option=True)


def test_allow_pickle_false_on_workers_refuses_a_gadget(client, tmp_path: Path) -> None:
    canary = tmp_path / "canary"

    class Gadget:
        def __reduce__(self):
            return (open, (str(canary), "w"))

    fd.install(client, allow_pickle=False)
    try:
        # Scattered data goes through the family: the worker decodes it with allow_pickle=False.
        # hash=False: Dask's tokenize() would unpickle the gadget in the client itself (Dask's own
        # doing, in the process that made it; what matters is that no worker runs it).
        with pytest.raises(Exception) as info:  # noqa: PT011 - Dask wraps the worker's error
            future = client.scatter(Gadget(), hash=False)
            future.result(timeout=60)
        assert "UnsafePayloadError" in repr(info.value) or "pickle" in str(info.value)
        time.sleep(0.5)
        assert not canary.exists()
        # data without pickle still flows
        arr = np.arange(1000.0)
        assert np.array_equal(client.submit(tasks.double, client.scatter(arr)).result(), arr * 2)
    finally:
        fd.install(client)


def test_a_worker_without_freight_fails_with_a_clear_error(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "freight"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('freight is not installed on this worker (test)')\n")
    with LocalCluster(n_workers=0, processes=True, dashboard_address=":0") as cluster, Client(cluster) as c:
        env = dict(os.environ, PYTHONPATH=str(shadow.parent))
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address, "--nthreads", "1",
             "--no-nanny", "--no-dashboard"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            c.wait_for_workers(1, timeout=120)
            with pytest.raises(freight.FreightError, match="(?i)install freight"):
                fd.install(c)
        finally:
            worker.terminate()
            worker.wait(30)


def test_preload_installs_from_the_dask_config(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import dask
        from distributed import Client, LocalCluster
        import dask_tasks  # from PYTHONPATH
        with dask.config.set({"distributed.worker.preload": ["freight.integrations.dask"],
                              "freight": {"allow_pickle": False}}):
            with LocalCluster(n_workers=1, processes=True, dashboard_address=":0") as cluster, Client(cluster) as c:
                print(all(c.run(dask_tasks.has_family).values()))
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (_HERE, os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("True")


def test_installing_imports_none_of_the_libraries_it_registers_for() -> None:
    # torch alone took seconds and ~200 MiB in every worker when install imported it; now a
    # library's handlers are registered when Dask first looks up one of its types, after Dask's own
    script = textwrap.dedent(
        """
        import sys
        from distributed.protocol.serialize import dask_serialize, merge_and_deserialize, serialize_and_split
        from freight.integrations import dask as fd
        fd.install_local()
        print(sorted(m for m in ("torch", "polars", "pyarrow") if m in sys.modules))
        import torch
        fd.install_local()  # again, torch imported, its lazy registration not run yet
        dask_serialize.dispatch(torch.nn.Parameter)  # nothing lazy left to overwrite freight's
        print(dask_serialize.dispatch(torch.Tensor) in fd._own_handlers)
        big, small = torch.arange(1 << 19, dtype=torch.float64), torch.arange(4.0)
        header, _ = serialize_and_split(big, serializers=("dask", "pickle"))
        print(header["sub-header"]["freight"], fd.stats()["type_dumps"])
        header, frames = serialize_and_split(small, serializers=("dask", "pickle"))
        print(header["sub-header"]["freight"], "freight" not in header["sub-header"]["dask"])  # not wrapped twice
        back = merge_and_deserialize(header, [bytearray(f) for f in frames], deserializers=("dask", "pickle"))
        print(torch.equal(back, small))
        from distributed.protocol import torch as dask_torch  # Dask's handlers ran before freight's
        print(dask_serialize.dispatch(torch.nn.Parameter) is dask_torch.serialize_torch_Parameters)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split("\n")[:6] == ["[]", "True", "1 1", "0 True", "True", "True"]
