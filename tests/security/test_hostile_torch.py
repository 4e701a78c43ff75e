"""Hostile metadata for freight's torch serializer (declared ``safe = True``): forged sparse index
structures and dtypes must raise DeserializationError at load time, before torch's kernels see
them, and a tensor loaded over read-only memory must never write into it."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import freight
from support.forging import forge, run_isolated


def _read_only_tensor_payload() -> bytes:
    data = np.zeros(1 << 19, np.float32)  # 2 MiB
    data.flags.writeable = False  # one flag in the payload
    return forge("torch.Tensor", {"data": data, "dtype": "torch.float32", "device": "cpu", "requires_grad": False})


def test_torch_tensor_over_a_read_only_frame_does_not_write_into_the_callers_bytes():
    import torch

    blob = _read_only_tensor_payload()
    before = hashlib.sha256(blob).digest()
    t = freight.loads(blob, allow_pickle=False)  # zero_copy not asked for
    t.add_(1)  # an ordinary in-place update
    assert isinstance(t, torch.Tensor)
    assert hashlib.sha256(blob).digest() == before, (
        "an in-place op on the loaded tensor changed the immutable input bytes"
    )


def test_torch_tensor_loaded_from_a_mapped_file_can_be_updated_in_place_without_a_segfault(tmp_path):
    path = tmp_path / "tensor.frt"
    path.write_bytes(_read_only_tensor_payload())  # >= 1 MiB: freight.load maps it read-only
    run_isolated(
        f"""
        import torch
        t = freight.load({str(path)!r}, allow_pickle=False)
        t.add_(1)  # segfaults: the tensor views the read-only mapping
        print("OK" if float(t[0]) == 1.0 else "WRONG")
        """,
        expect="OK",
    )


def test_torch_data_must_match_the_declared_dtype():
    meta = {"data": np.arange(4, dtype=np.int64), "dtype": "torch.float32", "device": "cpu", "requires_grad": False}
    with pytest.raises(freight.DeserializationError, match="float32"):
        freight.loads(forge("torch.Tensor", meta), allow_pickle=False)
    bits = dict(meta, data=np.zeros(4, dtype=np.uint8), dtype="torch.bfloat16")  # bits of the wrong size
    with pytest.raises(freight.DeserializationError, match="bfloat16"):
        freight.loads(forge("torch.Tensor", bits), allow_pickle=False)


# -- payload-controlled sparse indices handed to torch ------------------------------------------
# Each case was crafted by reading the serializer's load path (not only by random mutation) and
# run under glibc's heap checks and AddressSanitizer (see fuzz/loads_mutations.py --asan); a child
# loads every case and prints REFUSED when loading refused them all (support.forging.print_refusals).

TORCH_CASES = """
import torch


def dense(a, dtype="torch.int64"):
    return {"data": np.asarray(a), "dtype": dtype, "device": "cpu", "requires_grad": False}


def sparse(layout="torch.sparse_coo", **change):
    meta = {"layout": layout, "indices": dense([[0, 1, 2], [0, 1, 2]]),
            "values": dense(np.ones(3, np.float32), "torch.float32"), "size": (4, 4), "coalesced": False,
            "device": "cpu", "requires_grad": False}
    meta.update(change)
    return meta


CASES = [(name, "torch.Tensor", meta, ()) for name, meta in [
    ("index-past-the-size", sparse(indices=dense([[0, 1, 9], [0, 1, 2]]))),
    ("negative-index", sparse(indices=dense([[0, -1, 2], [0, 1, 2]]))),
    ("int32-indices", sparse(indices=dense(np.array([[0, 1, 2]] * 2, np.int32), "torch.int32"))),
    ("float-indices-truncated", sparse(indices=dense([[0.0, 1.0, 3.99]] * 2, "torch.float64"))),
    ("nan-indices", sparse(indices=dense([[0.0, 1.0, np.nan]] * 2, "torch.float64"))),
    ("coalesced-lie", sparse(indices=dense([[2, 1, 1], [0, 1, 1]]), coalesced=True)),
    ("more-values-than-indices", sparse(values=dense(np.ones(5, np.float32), "torch.float32"))),
    ("negative-size", sparse(size=(-4, 4))),
    ("size-rank-short", sparse(size=(4,))),
    ("size-numel-overflow", sparse(size=(2**63 - 1, 2**63 - 1))),
    ("size-beyond-int64", sparse(size=(2**70, 4))),
    ("hybrid-values-without-dense-dim", sparse(values=dense(np.ones((3, 2), np.float32), "torch.float32"))),
    ("csr-index-past-the-size", sparse("torch.sparse_csr", indices=dense([[0, 1, 7], [0, 1, 2]]))),
    ("csr-of-3-sparse-dims", sparse("torch.sparse_csr", size=(4, 4, 4), indices=dense([[0, 1, 2]] * 3))),
    ("bsr-without-blocksize", sparse("torch.sparse_bsr")),
    ("bsr-blocksize-zero", sparse("torch.sparse_bsr", blocksize=(0, 0))),
    ("bsr-blocksize-not-tiling", sparse("torch.sparse_bsr", blocksize=(3, 3))),
    ("bsc-blocksize-beyond-int64", sparse("torch.sparse_bsc", blocksize=(2**70, 2))),
    ("bsr-blocksize-a-list", sparse("torch.sparse_bsr", blocksize="22")),
]]


def compressed(layout="torch.sparse_csr", pointers=(0, 1, 2, 2, 3), plain=(0, 1, 3), vals=None, size=(4, 4),
               dtypes=("torch.int64", "torch.int64")):
    np_dtypes = [getattr(np, d.split(".")[1]) for d in dtypes]
    return {"layout": layout, "compressed": dense(np.array(pointers, np_dtypes[0]), dtypes[0]),
            "plain": dense(np.array(plain, np_dtypes[1]), dtypes[1]),
            "values": vals or dense(np.ones(len(plain), np.float32), "torch.float32"),
            "size": size, "device": "cpu", "requires_grad": False}


CASES += [(name, "torch.Tensor", meta, ()) for name, meta in [
    # scipy's crasher shape: the last pointer 0 "prunes" the rest (checked in Rust first).
    ("pointers-pruned-to-zero", compressed(pointers=(0, 768, 2048, 3840, 0))),
    ("pointers-decreasing", compressed(pointers=(0, 2, 1, 2, 3))),
    ("pointers-past-the-indices", compressed(pointers=(0, 1, 2, 2, 9))),
    ("pointers-not-starting-at-0", compressed(pointers=(1, 1, 2, 2, 3))),
    ("too-few-pointers", compressed(pointers=(0, 1, 3))),
    # A size far beyond the pointers: converting COO would allocate one pointer per row.
    ("rows-beyond-the-pointers", compressed(size=(2**40, 4))),
    ("index-past-the-columns", compressed(plain=(0, 1, 4))),
    ("negative-index", compressed(plain=(0, -1, 3))),
    ("unsorted-within-a-row", compressed(pointers=(0, 2, 2, 2, 3), plain=(3, 1, 0))),
    ("repeated-within-a-row", compressed(pointers=(0, 2, 2, 2, 3), plain=(1, 1, 0))),
    ("index-dtypes-differ", compressed(dtypes=("torch.int32", "torch.int64"))),
    ("float-pointers", compressed(dtypes=("torch.float64", "torch.int64"))),
    ("values-for-fewer-indices", compressed(vals=dense(np.ones(2, np.float32), "torch.float32"))),
    ("negative-size", compressed(size=(-4, 4))),
    ("size-of-three-dims", compressed(size=(4, 4, 1))),
    ("size-beyond-int64", compressed(size=(2**70, 4))),
    ("csc-index-past-the-rows", compressed("torch.sparse_csc", plain=(0, 1, 7))),
    ("bsr-blocks-not-tiling", compressed("torch.sparse_bsr", pointers=(0, 1, 2), plain=(0, 1), size=(4, 4),
                                         vals=dense(np.ones((2, 3, 3), np.float32), "torch.float32"))),
    ("bsr-block-index-past-the-block-columns", compressed("torch.sparse_bsr", pointers=(0, 1, 2), plain=(0, 2),
                                                          vals=dense(np.ones((2, 2, 2), np.float32), "torch.float32"))),
    ("bsr-values-not-blocks", compressed("torch.sparse_bsr", pointers=(0, 1, 2), plain=(0, 1))),
    ("unknown-layout", compressed("torch.sparse_xyz")),
]]
"""


def test_torch_sparse_indices_from_a_payload_are_refused_before_torch_kernels_see_them():
    # COO tensors are built with check_invariants=True (bounds, coalescing, sizes); CSR/CSC/BSR/BSC
    # index arrays are checked in Rust (freight_core::sparse) and then by check_invariants.
    run_isolated(TORCH_CASES, "print_refusals(CASES)\n")


@pytest.mark.filterwarnings("ignore:Sparse (BSR|BSC|CSR|CSC) tensor support is in beta:UserWarning")
def test_torch_compressed_sparse_tensors_round_trip_with_their_block_size_and_index_dtype():
    import torch

    # Before the fix: loads failed ("to_sparse_bsr() missing 1 required positional arguments").
    int32 = torch.sparse_csr_tensor(torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([1, 0], dtype=torch.int32),
                                    torch.tensor([1.0, 2.0]), (2, 2), check_invariants=True)  # fmt: skip
    hybrid = torch.ones(3, 2, 4).to_sparse_csr(dense_dim=1)  # travels as COO
    blocked = [torch.eye(4).to_sparse_bsr((2, 2)), torch.arange(24.0).reshape(4, 6).to_sparse_bsc((2, 3))]
    for t in [*blocked, torch.eye(5).to_sparse_csr(), torch.zeros(0, 3).to_sparse_csc(), int32, hybrid]:
        out = freight.loads(freight.dumps(t), allow_pickle=False)
        assert out.layout == t.layout and out.values().shape == t.values().shape
        assert torch.equal(out.to_dense(), t.to_dense())
    assert int32.crow_indices().dtype == torch.int32
