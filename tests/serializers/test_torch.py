"""torch through freight's built-in serializer: every dtype (bfloat16, complex, float8), shapes
and strides, requires_grad, sparse layouts, zero copy, state dicts without pickle, modules and
Parameters through the pickle bridge, device handling, lazy loading and the missing library."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import freight
from support.library_checks import check_lazy_loading, loaded_without_pickle

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.complex64,
    torch.complex128,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
] + [getattr(torch, name) for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name)]


def sample(dtype: torch.dtype, shape=(3, 4)) -> torch.Tensor:
    base = torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape) / 7
    if dtype == torch.bool:
        return base > 0.5
    return base.to(dtype)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and a.device == b.device
        and torch.equal(
            a.view(torch.uint8) if a.element_size() == 1 and a.is_floating_point() else a,
            b.view(torch.uint8) if b.element_size() == 1 and b.is_floating_point() else b,
        )
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 4), (2, 3, 4)], ids=str)
def test_every_dtype_and_shape_round_trips_without_pickle(dtype, shape):
    t = sample(dtype, shape)
    assert all(same(back, t) for back in loaded_without_pickle(t))


def test_strides_and_requires_grad():
    t = torch.arange(24.0).reshape(4, 6)
    for view in (t.T, t[:, ::2], t.expand(2, 4, 6)):
        back = freight.loads(freight.dumps(view))
        assert torch.equal(back, view) and back.is_contiguous()
    g = torch.ones(3, requires_grad=True)
    back = freight.loads(freight.dumps(g))
    assert back.requires_grad and torch.equal(back.detach(), g.detach())


def test_cpu_tensors_are_zero_copy():
    t = torch.arange(1_000_000, dtype=torch.float32)
    frames = freight.dumps_frames(t)
    assert np.frombuffer(frames[-1], dtype=np.float32).__array_interface__["data"][0] == t.data_ptr()
    blob = bytearray(freight.dumps(t))
    back = freight.loads(blob)  # a writable input: the tensor views it
    start = np.frombuffer(blob, dtype=np.uint8).__array_interface__["data"][0]
    assert start <= back.data_ptr() < start + len(blob)
    assert torch.equal(back, t)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.filterwarnings("ignore:Sparse CSC tensor support is in beta")
@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
def test_sparse_tensors(layout):
    dense = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    t = {"coo": dense.to_sparse_coo(), "csr": dense.to_sparse_csr(), "csc": dense.to_sparse_csc()}[layout]
    back = freight.loads(freight.dumps(t), allow_pickle=False)
    assert back.layout == t.layout
    assert torch.equal(back.to_dense(), dense)


def test_state_dicts_need_no_pickle_and_modules_go_through_pickle():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    state = model.state_dict()
    blob = freight.dumps(state)
    assert not freight.inspect(blob)["needs_pickle"]
    back = freight.loads(blob, allow_pickle=False)
    assert list(back) == list(state) and all(torch.equal(back[k], state[k]) for k in state)
    whole = freight.loads(freight.dumps(model))
    x = torch.randn(2, 4)
    assert torch.equal(whole(x), model(x))
    param = torch.nn.Parameter(torch.ones(2))
    assert type(freight.loads(freight.dumps(param))) is torch.nn.Parameter


def test_malformed_sparse_indices_are_refused():
    from freight.serializers import torch as ft

    meta, _ = ft.TensorSerializer().serialize(torch.eye(3).to_sparse_coo())
    meta["indices"]["data"] = meta["indices"]["data"] + 100  # out of bounds
    with pytest.raises(freight.DeserializationError):
        ft.TensorSerializer().deserialize(meta, [])


def test_tensors_from_a_missing_device_fail_clearly_unless_mapped():
    from freight.serializers import torch as ft

    meta, _ = ft.TensorSerializer().serialize(torch.ones(2))
    meta = dict(meta, device="cuda:7" if not torch.cuda.is_available() else "mps")
    with pytest.raises(freight.DeserializationError, match="map_location"):
        ft.TensorSerializer().deserialize(meta, [])
    ft.map_location = "cpu"
    try:
        assert torch.equal(ft.TensorSerializer().deserialize(meta, []), torch.ones(2))
    finally:
        ft.map_location = None


def test_lazy_loading_and_the_missing_library_error(tmp_path):
    assert check_lazy_loading(tmp_path, {"w": torch.ones(3)}, "torch", "torch", 'x["w"].sum().item()') == "3.0"
