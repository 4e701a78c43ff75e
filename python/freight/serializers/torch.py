"""torch tensors: any dtype (bfloat16 and the float8 types travel as their raw bits), any shape
and strides (non-contiguous tensors made contiguous), ``requires_grad`` kept, sparse tensors
(COO, CSR, CSC, BSR, BSC) as their index and value tensors. CPU tensors are zero copy: their
data is a frame viewing the tensor's memory, and loads builds the tensor over the frame when
that memory is writable (a bytearray, a zero-copy load of one); torch has no read-only tensors,
so over read-only memory (bytes, a memory-mapped file) the tensor gets its own copy. A tensor
on another device (CUDA, MPS) is brought to the CPU and put back on its device when it loads in a
process that has that device; otherwise loading fails with advice, unless ``map_location`` below
says where to put such tensors. State dicts (dicts of tensors) need nothing more; whole modules
(``nn.Module``, ``nn.Parameter``) go through the pickle bridge with their tensors as frames.
Imported the first time a tensor is serialized or a ``torch.*`` payload is loaded
(``freight.registry`` registers its ``SERIALIZERS``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from freight._freight import compressed_indices_error
from freight.exceptions import DeserializationError
from freight.serializers import LibrarySerializer

#: Where to put tensors whose device this process does not have ("cpu", say); None: refuse.
map_location: str | None = None

# dtypes numpy has no equivalent for travel as raw bits of the same size.
_BITS: dict[torch.dtype, torch.dtype] = {torch.bfloat16: torch.int16}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    if hasattr(torch, _name):
        _BITS[getattr(torch, _name)] = torch.uint8

_DTYPES = {str(dt): dt for dt in vars(torch).values() if isinstance(dt, torch.dtype)}
_SPARSE = {
    torch.sparse_csr: "to_sparse_csr",
    torch.sparse_csc: "to_sparse_csc",
    torch.sparse_bsr: "to_sparse_bsr",
    torch.sparse_bsc: "to_sparse_bsc",
}
_BLOCKED = (torch.sparse_bsr, torch.sparse_bsc)


def _dense_meta(t: torch.Tensor) -> dict[str, Any]:
    x = t.detach()
    if x.device.type != "cpu":
        x = x.cpu()
    x = x.contiguous()
    bits = _BITS.get(x.dtype)
    return {
        "data": (x.view(bits) if bits is not None else x).numpy(),
        "dtype": str(t.dtype),
        "device": str(t.device),
        "requires_grad": bool(t.requires_grad),
    }


def _device(meta_device: str) -> str:
    if meta_device == "cpu":
        return "cpu"
    kind = meta_device.split(":")[0]
    available = {"cuda": torch.cuda.is_available, "mps": lambda: torch.backends.mps.is_available()}.get(kind)
    if available is not None and available():
        return meta_device
    if map_location is not None:
        return map_location
    raise DeserializationError(
        f"the payload holds a tensor on {meta_device}, which this process does not have; set "
        "freight.serializers.torch.map_location = 'cpu' to load such tensors on the CPU"
    )


def _dense_from(meta: dict[str, Any]) -> torch.Tensor:
    dtype = _DTYPES[meta["dtype"]]
    data = meta["data"]
    if not isinstance(data, np.ndarray):
        raise TypeError(f"tensor data must be an array, not {type(data).__name__}")
    if not data.flags.writeable:
        # torch has no read-only tensors: one over read-only memory (a zero-copy load of bytes, a
        # memory-mapped file) would let in-place ops write into it, or crash. Copy instead.
        data = data.copy()
    t = torch.from_numpy(data)
    carried = _BITS.get(dtype, dtype)  # what the data must be: the dtype, or its raw bits
    if t.dtype != carried:
        raise TypeError(f"a {dtype} tensor's data must be {carried}, not {t.dtype}")
    if carried is not dtype:
        t = t.view(dtype)
    return _place(t, meta)


def _place(t: torch.Tensor, meta: dict[str, Any]) -> torch.Tensor:
    """Puts a rebuilt tensor back on its device, with its requires_grad."""
    device = _device(meta["device"])
    if device != "cpu":
        t = t.to(device)
    if meta["requires_grad"]:
        t.requires_grad_(True)
    return t


_ROW_MAJOR = (torch.sparse_csr, torch.sparse_bsr)  # compressed rows; the others compress columns


def _compressed_meta(t: torch.Tensor) -> dict[str, Any]:
    """A 2-D CSR/CSC/BSR/BSC tensor as its own index arrays: the compressed pointers (one per
    row or column, plus one) travel in the payload, so what loading allocates is what the payload
    holds. Batched and hybrid ones travel as COO."""
    compressed, plain = (
        (t.crow_indices(), t.col_indices()) if t.layout in _ROW_MAJOR else (t.ccol_indices(), t.row_indices())
    )
    return {
        "layout": str(t.layout),
        "compressed": _dense_meta(compressed),
        "plain": _dense_meta(plain),
        "values": _dense_meta(t.values()),
        "size": tuple(int(d) for d in t.shape),
        "device": str(t.device),
        "requires_grad": bool(t.requires_grad),
    }


def _compressed_from(meta: dict[str, Any]) -> torch.Tensor:
    """Checks the index arrays in Rust (``freight_core::sparse``, as for scipy: pointers start at
    0, never decrease, end at the number of indices; every index in bounds) before torch sees
    them; torch's own ``check_invariants`` then checks what is torch's (sorted, distinct)."""
    layout = {str(k): k for k in _SPARSE}.get(meta["layout"])
    size = meta["size"]
    if layout is None or not (isinstance(size, tuple) and len(size) == 2 and all(type(d) is int for d in size)):
        raise DeserializationError(f"the payload holds a {meta['layout']!r} tensor of size {size!r}")
    compressed, plain, values = (_dense_from(meta[k]) for k in ("compressed", "plain", "values"))
    if compressed.dtype not in (torch.int32, torch.int64) or plain.dtype != compressed.dtype:
        raise DeserializationError("a compressed sparse tensor needs int32 or int64 index arrays of one dtype")
    if compressed.dim() != 1 or plain.dim() != 1 or values.dim() != (3 if layout in _BLOCKED else 1):
        raise DeserializationError("a compressed sparse tensor's index arrays and values have the wrong rank")
    rows, cols = size
    if layout in _BLOCKED:
        block = tuple(values.shape[1:])
        if 0 in block or rows % block[0] or cols % block[1]:
            raise DeserializationError(f"blocks {block} do not tile the size {size}")
        rows, cols = rows // block[0], cols // block[1]
    major, minor = (rows, cols) if layout in _ROW_MAJOR else (cols, rows)
    if values.shape[0] != plain.shape[0]:
        raise DeserializationError("a compressed sparse tensor needs one value (or block) per index")
    error = compressed_indices_error(
        compressed.numpy(), plain.numpy(), compressed.dtype == torch.int64, max(major, 0), max(minor, 0)
    )
    if error is not None or min(size) < 0:
        raise DeserializationError(f"the payload holds an invalid compressed sparse tensor: {error or size}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
        return torch.sparse_compressed_tensor(compressed, plain, values, size, layout=layout, check_invariants=True)


def _blocksize(value: Any) -> tuple[int, int]:
    """A BSR/BSC block size from a payload (torch checks that it is positive and tiles the size)."""
    if not (isinstance(value, tuple) and len(value) == 2 and all(type(d) is int for d in value)):
        raise DeserializationError(f"a blocked sparse tensor needs a block size of two ints, not {value!r}")
    return value


class TensorSerializer(LibrarySerializer):
    tag = "torch.Tensor"
    types = (torch.Tensor,)
    # nn.Parameter and other subclasses go through pickle, keeping their type (subclasses=False).
    errors = LibrarySerializer.errors + (RuntimeError,)

    def serialize(self, t: torch.Tensor) -> tuple[Any, list[Any]]:
        if t.layout == torch.strided:
            return _dense_meta(t), []
        if t.layout in _SPARSE and t.dim() == 2 and t.dense_dim() == 0:
            return _compressed_meta(t), []
        coo = t if t.layout == torch.sparse_coo else t.to_sparse_coo()
        meta = {
            "layout": str(t.layout),
            "indices": _dense_meta(coo._indices()),
            "values": _dense_meta(coo._values()),
            "size": tuple(coo.shape),
            "coalesced": bool(coo.is_coalesced()),
            "device": str(t.device),
            "requires_grad": bool(t.requires_grad),
        }
        if t.layout in (torch.sparse_bsr, torch.sparse_bsc):
            # The conversion back from COO needs the block size (the blocks' two sparse dims).
            end = t.values().dim() - t.dense_dim()
            meta["blocksize"] = tuple(int(d) for d in t.values().shape[end - 2 : end])
        return meta, []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        if "layout" not in meta:
            return _dense_from(meta)
        if "compressed" in meta:
            return _place(_compressed_from(meta), meta)
        if meta["indices"]["dtype"] != "torch.int64":
            # torch would convert other dtypes (floats truncated, NaN to the most negative int).
            raise DeserializationError(f"sparse tensor indices must be torch.int64, not {meta['indices']['dtype']}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
            # check_invariants: indices from a payload are checked, so a malformed one raises
            # instead of corrupting memory later.
            t = torch.sparse_coo_tensor(
                _dense_from(meta["indices"]),
                _dense_from(meta["values"]),
                meta["size"],
                is_coalesced=meta["coalesced"],
                check_invariants=True,
            )
            layout = {str(k): v for k, v in _SPARSE.items()}.get(meta["layout"])
            if layout is not None:
                blocked = meta["layout"] in ("torch.sparse_bsr", "torch.sparse_bsc")
                t = getattr(t, layout)(*([_blocksize(meta.get("blocksize"))] if blocked else []))
        return _place(t, meta)


# What freight.registry registers into its BUILTINS layer when it loads this module.
SERIALIZERS = (TensorSerializer(),)
