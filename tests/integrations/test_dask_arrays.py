"""numpy arrays with freight's Dask family first: every numpy array stays on Dask's numpy handler,
which is zero copy both ways (as freight's frames are, at the same cost) and sends a broadcast
array as its base data with its strides instead of expanded. On a real LocalCluster of worker
processes, one per module."""

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


def test_every_numpy_array_goes_to_dask_and_arrives_uncopied() -> None:
    fd.install_local()
    a = np.arange(1 << 16, dtype="float64").reshape(256, 256)
    for view in (a, np.asfortranarray(a), a.T, a[3:9], a[::2], a[:, ::3]):
        with pytest.raises(NotImplementedError, match="Dask's own handler"):
            fd._family_dumps(view)
        # A comm passes its compression setting (off by default); dumps alone compresses with lz4
        # when it is installed, into new memory, and then nothing could arrive uncopied.
        frames = dumps({"x": to_serialize(view)}, serializers=fd.SERIALIZERS, context={"compression": None})
        received = [bytearray(f) for f in frames]  # what the TCP comm hands over: writable buffers
        back = loads(received, deserializers=fd.DESERIALIZERS)["x"]
        np.testing.assert_array_equal(back, view)
        if view.flags.c_contiguous or view.flags.f_contiguous:  # viewed where it was received
            assert any(np.shares_memory(back, np.frombuffer(r, np.uint8)) for r in received)
            assert back.flags.writeable
    # what the family still takes: numpy scalars, and arrays inside a container it encodes
    assert fd._family_dumps(np.float64(1.0))[0] == {"freight": 1}
    assert fd._family_dumps({"a": a})[0] == {"freight": 1}


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


def test_contiguous_arrays_keep_dasks_path_both_ways(client) -> None:
    a = np.random.default_rng(0).random(1 << 17)
    before = fd.stats()
    future = client.scatter(a, hash=False)
    np.testing.assert_array_equal(future.result(timeout=60), a)
    after = fd.stats()
    assert after["family_dumps"] == before["family_dumps"]
    assert after["family_loads"] == before["family_loads"]
