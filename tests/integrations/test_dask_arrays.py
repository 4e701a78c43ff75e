"""numpy arrays with freight's Dask family first: contiguous arrays go through the family (views,
no copy, as Dask's own handler), arrays that are not one contiguous block (broadcast, strided)
stay on Dask's numpy handler, which sends a broadcast array as its base data with its strides
instead of expanded. On a real LocalCluster of worker processes, one per module."""

from __future__ import annotations

import operator

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")  # a test dependency: make test installs it
from distributed import Client, LocalCluster  # noqa: E402
from distributed.protocol import dumps, loads, to_serialize  # noqa: E402

from freight.integrations import dask as fd  # noqa: E402

ROW = np.arange(1000, dtype="float64")  # 8 KB
SHAPE = (10_000, 1000)  # broadcast to 80 MB


@pytest.fixture(scope="module")
def client():
    cluster_options = {"n_workers": 2, "threads_per_worker": 1, "processes": True, "dashboard_address": ":0"}
    with LocalCluster(memory_limit="2GiB", **cluster_options) as cluster, Client(cluster) as c:
        fd.install(c)
        yield c


def _frame_bytes(frames) -> int:
    return sum(memoryview(f).nbytes for f in frames)


def test_a_broadcast_array_is_sent_unexpanded_in_process() -> None:
    fd.install_local()
    wide = np.broadcast_to(ROW, SHAPE)
    before = fd.stats()["family_dumps"]
    frames = dumps({"x": to_serialize(wide)}, serializers=fd.SERIALIZERS)
    assert fd.stats()["family_dumps"] == before  # passed on to Dask's handler
    assert _frame_bytes(frames) < 2 * ROW.nbytes  # the row and headers, not 80 MB
    back = loads([bytearray(f) for f in frames], deserializers=fd.DESERIALIZERS)["x"]
    assert back.strides == wide.strides == (0, 8)
    np.testing.assert_array_equal(back, wide)


def test_strided_slices_go_to_dask_and_contiguous_arrays_to_the_family() -> None:
    fd.install_local()
    a = np.arange(4096, dtype="float64").reshape(64, 64)
    for view in (a[::2], a[:, ::3], a.T[::2]):
        assert fd._strided(view)
        with pytest.raises(NotImplementedError):
            fd._family_dumps(view)
    for whole in (a, np.asfortranarray(a), a.T, a[3:9], np.float64(1.0), b"bytes"):
        assert not fd._strided(whole)
    assert fd._family_dumps(a)[0] == {"freight": 1}


def test_a_broadcast_array_scattered_arrives_with_its_strides(client) -> None:
    wide = np.broadcast_to(ROW, SHAPE)
    before = fd.stats()["family_dumps"]
    future = client.scatter(wide, hash=False)
    assert fd.stats()["family_dumps"] == before  # the client sent it with Dask's handler
    assert client.submit(operator.attrgetter("strides"), future).result(timeout=60) == (0, 8)
    back = future.result(timeout=60)  # gathered back with the family first: passed to Dask again
    assert back.strides == (0, 8)
    np.testing.assert_array_equal(back, wide)


def test_a_broadcast_result_comes_back_unexpanded(client) -> None:
    loads_before = fd.stats()["family_loads"]
    result = client.submit(np.broadcast_to, ROW, SHAPE, pure=False).result(timeout=60)
    assert result.strides == (0, 8)
    np.testing.assert_array_equal(result, np.broadcast_to(ROW, SHAPE))
    assert fd.stats()["family_loads"] == loads_before  # the worker sent it with Dask's handler


def test_contiguous_arrays_still_go_through_the_family(client) -> None:
    a = np.random.default_rng(0).random(1 << 17)
    before = fd.stats()
    future = client.scatter(a, hash=False)
    np.testing.assert_array_equal(future.result(timeout=60), a)
    after = fd.stats()
    assert after["family_dumps"] > before["family_dumps"]
    assert after["family_loads"] > before["family_loads"]
