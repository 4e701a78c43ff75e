"""The "freight" serialization family passes on to Dask's next family what it should not encode,
on a real LocalCluster of worker processes: a value freight fails on, whatever the exception;
types with their own ``dask_serialize`` handler (a user's, torch's); torch tensors with a
``.grad``, which Dask's handler sends and freight's does not.

The workers import this module (its folder is on their PYTHONPATH) for the classes and the
functions below, which run there."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")  # a test dependency: make test installs it
from distributed import Client, LocalCluster  # noqa: E402
from distributed.protocol.serialize import (  # noqa: E402
    dask_deserialize,
    dask_serialize,
    register_serialization_family,
)

from freight.integrations import dask as fd  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))


class Fussy:
    """Refuses pickling (its ``__getstate__`` raises ValueError, as a type holding a lock or a
    handle does); only the "probe" family below can send it."""

    def __init__(self, value: int):
        self.value = value

    def __getstate__(self):
        raise ValueError("a Fussy has no picklable state")


def _probe_dumps(x):
    if type(x) is not Fussy:
        raise NotImplementedError("the probe family sends Fussy objects only")
    return {"probe": True}, [str(x.value).encode()]


def _probe_loads(header, frames):
    return Fussy(int(bytes(frames[0])))


class Tagged:
    """A user type with its own Dask handler, which marks what it rebuilds."""

    def __init__(self, value: int, via: str = "constructor"):
        self.value, self.via = value, via


def _tagged_dumps(x):
    return {}, [str(x.value).encode()]


def _tagged_loads(header, frames):
    return Tagged(int(bytes(frames[0])), via="dask_serialize")


def register_handlers() -> bool:
    """The probe family and Tagged's handler, in the calling process (client and workers)."""
    register_serialization_family("probe", _probe_dumps, _probe_loads)
    dask_serialize.register(Tagged)(_tagged_dumps)
    dask_deserialize.register(Tagged)(_tagged_loads)
    return True


register_handlers()  # before any lookup of Tagged here, as a user's registration would be


# -- run on the workers ----------------------------------------------------------------------


def fussy_value(x: Fussy) -> int:
    return x.value + 1


def tagged_via(x: Tagged) -> tuple[int, str]:
    return x.value, x.via


def make_tensor_with_grad(n: int):
    import torch

    t = torch.ones(n, requires_grad=True)
    (t * 3).sum().backward()
    return t


def grad_of(t) -> list[float] | None:
    return None if t.grad is None else [float(t.grad[0]), float(t.grad[-1]), float(t.grad.sum())]


@pytest.fixture(scope="module")
def client():
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_HERE, old) if p)
    try:
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", memory_limit="2GiB"
            ) as cluster,
            Client(cluster) as c,
        ):
            fd.install(c)
            assert all(c.run(register_handlers).values())
            yield c
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def _use_serializers(client, serializers) -> None:
    client._serializers = serializers
    client.rpc.serializers = serializers
    client.scheduler.serializers = serializers


def test_a_value_freight_fails_on_reaches_the_next_family(client) -> None:
    with pytest.raises(NotImplementedError, match="ValueError: a Fussy has no picklable state") as info:
        fd._family_dumps(Fussy(1))
    assert isinstance(info.value.__cause__, ValueError)
    # `info` and the exception's frames form a cycle that holds freight's pickler: collect it on
    # this thread (the garbage collector may run on Dask's event loop thread otherwise, where
    # freight's single-threaded pickler objects must not be dropped)
    del info
    gc.collect()
    _use_serializers(client, ("freight", "probe", "dask", "pickle"))
    try:
        before = fd.stats()["family_dumps"]
        future = client.scatter(Fussy(41), hash=False)
        assert client.submit(fussy_value, future).result(timeout=60) == 42
        assert fd.stats()["family_dumps"] == before  # freight did not send it
        # what freight can encode still goes through it
        value = {"values": [1, 2, 3], "label": "x"}
        assert client.scatter([value], hash=False)[0].result(timeout=60) == value
        assert fd.stats()["family_dumps"] > before
    finally:
        _use_serializers(client, fd.SERIALIZERS)


def test_a_user_type_with_its_own_dask_serialize_uses_it(client) -> None:
    future = client.scatter(Tagged(7), hash=False)
    assert client.submit(tagged_via, future).result(timeout=60) == (7, "dask_serialize")
    # back on the client through the same handler
    assert client.gather(future).via == "dask_serialize"


def test_a_torch_tensor_keeps_its_grad(client) -> None:
    torch = pytest.importorskip("torch")
    small = make_tensor_with_grad(4)
    # client -> worker: the family passes it to Dask's handler
    future = client.scatter(small, hash=False)
    assert client.submit(grad_of, future).result(timeout=60) == [3.0, 3.0, 12.0]
    back = client.gather(future)
    assert isinstance(back, torch.Tensor) and back.requires_grad and back.grad is not None
    # worker -> worker, above min_bytes (4 MB): freight's per-type handler passes it on too
    workers = sorted(client.scheduler_info()["workers"])
    n = 1_000_000
    big = client.submit(make_tensor_with_grad, n, workers=[workers[0]], pure=False)
    assert client.submit(grad_of, big, workers=[workers[1]]).result(timeout=120) == [3.0, 3.0, 3.0 * n]
    # a tensor without a gradient still goes through freight
    before = fd.stats()["family_dumps"]
    plain = torch.arange(5.0)
    assert torch.equal(client.scatter(plain, hash=False).result(timeout=60), plain)
    assert fd.stats()["family_dumps"] > before


def test_what_the_family_leaves_to_dask() -> None:
    import pandas as pd
    import torch

    # freight's own encodings stay with freight
    for cls in (bytes, dict, pd.DataFrame, torch.Tensor, np.ma.MaskedArray):
        assert not fd._leaves_to_dask(cls), cls
    # Dask's handlers for types freight has no encoding of, and numpy arrays (Dask's is zero copy)
    for cls in (Tagged, torch.nn.Linear, np.ndarray, np.matrix):
        assert fd._leaves_to_dask(cls), cls
    with pytest.raises(NotImplementedError, match="Dask's own handler"):
        fd._family_dumps(Tagged(1))
    # no handler anywhere: freight encodes it
    assert fd._family_dumps({"a": [1, 2]})[0] == {"freight": 1}
