"""Hostile metadata for freight's scipy.sparse serializer (declared ``safe = True``): forged index
structures must raise DeserializationError at load time, before scipy's kernels see them; they
crashed the interpreter (or corrupted its heap) before the fixes, so each case runs in a child."""

from __future__ import annotations

import pytest

from support.forging import run_isolated


@pytest.mark.parametrize(
    "change, use",
    [
        ('meta["indices"] = np.array([0, 2, 1000000], np.int32)', "m.toarray()"),
        ('meta["indices"] = np.array([0, 2, -1000000], np.int32)', "m.toarray()"),
        ('meta.update(kind="csc_matrix", shape=(3, 2), indices=np.array([0, 2, 1000000], np.int32))', "m @ np.ones(2)"),
    ],
    ids=["csr column beyond the shape", "csr negative column", "csc row beyond the shape"],
)
def test_scipy_compressed_indices_are_checked_not_a_segfault(change, use):
    run_isolated(
        f"""
        import scipy.sparse as sp
        from freight.serializers import scipy_sparse as fsp
        meta, _ = fsp.SparseSerializer().serialize(sp.csr_matrix(np.array([[1.0, 0, 2], [0, 3, 0]])))
        {change}
        refused, m = load_or_refuse(forge("scipy.sparse", meta))
        if refused:
            print("REFUSED"); sys.exit(0)
        print("LOADED", flush=True)
        {use}  # segfaults
        """
    )


# -- scipy.sparse: the fuzzing campaign's heap corruption ----------------------------------------


@pytest.mark.parametrize(
    "indptr",
    [
        # The crasher the mutation campaign found: scipy's check_format(full_check=True) prunes to
        # nnz = indptr[-1] = 0 first and then skips the order check, and its kernels wrote out of
        # bounds (glibc: "corrupted size vs. prev_size", at exit or in the garbage collector).
        [
            0,
            768,
            2048,
            3840,
            4096,
            5376,
            7168,
            8448,
            10240,
            11008,
            11776,
            12544,
            13568,
            15104,
            15104,
            16384,
            16896,
            17152,
            18176,
            19968,
            0,
        ],
        [0, 4, 2, 6, 8, 10, 12, 14, 16, 18, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 80],  # decreasing
        [0] * 20 + [90],  # past the indices
    ],
    ids=["pruned-to-zero", "decreasing", "past-the-end"],
)
def test_scipy_forged_indptr_is_refused_before_scipy_sees_it(indptr):
    run_isolated(
        f"""
        import scipy.sparse as sp
        m = sp.random(20, 20, density=0.2, format="csr", random_state=1)
        meta = {{"kind": "csr_matrix", "shape": (20, 20), "data": m.data, "indices": m.indices,
                 "indptr": np.array({indptr!r}, dtype=np.int32), "sorted": True}}
        refused, value = load_or_refuse(forge("scipy.sparse", meta))
        if refused:
            print("REFUSED")
        else:
            repr(value); value.sum(); value.toarray(); value.sum_duplicates()
            import gc; gc.collect()
            print("LOADED")
        """
    )


@pytest.mark.parametrize(
    "kind,meta",
    [
        ("csr", {"indices": "np.array([0, 25], dtype=np.int32)", "indptr": "np.array([0, 1, 2], dtype=np.int32)"}),
        ("csr", {"indices": "np.array([0, 1], dtype=np.uint8)", "indptr": "np.array([0, 1, 2], dtype=np.int32)"}),
        ("csr", {"indices": "np.array([0, 1], dtype='>i4')", "indptr": "np.array([0, 1, 2], dtype='>i4')"}),
        ("csr", {"data": "np.array([b'ab', b'cd'])"}),
        ("coo", {"coords": "(np.array([0, 40]), np.array([0, 1]))"}),
        ("coo", {"coords": "(np.array([0, 1]), np.array([0]))"}),
        ("dia", {"data": "np.ones((3, 20))", "offsets": "np.array([0, 1], dtype=np.int32)"}),
        ("dia", {"data": "np.ones((2, 20))", "offsets": "np.array([0, 2147483641], dtype=np.int32)"}),
        (
            "bsr",
            {
                "data": "np.ones((2, 3, 3))",
                "indices": "np.array([0, 1], dtype=np.int32)",
                "indptr": "np.array([0, 1, 2], dtype=np.int32)",
            },
        ),
    ],
    ids=[
        "index-out-of-range",
        "uint8-indices",
        "big-endian",
        "bytes-data",
        "coo-out-of-range",
        "coo-lengths",
        "dia-offsets",
        "dia-offset-overflow",
        "bsr-blocks-do-not-tile",
    ],
)
def test_scipy_forged_structures_are_refused(kind, meta):
    fields = {
        "data": "np.ones(2)",
        "indices": "np.array([0, 1], dtype=np.int32)",
        "indptr": "np.array([0, 1, 2], dtype=np.int32)",
        "coords": "(np.array([0, 1]), np.array([0, 1]))",
        "offsets": "np.array([0], dtype=np.int32)",
    }
    fields.update(meta)
    keys = {
        "csr": ("data", "indices", "indptr"),
        "bsr": ("data", "indices", "indptr"),
        "coo": ("data", "coords"),
        "dia": ("data", "offsets"),
    }[kind]
    body = ", ".join(f"{k!r}: {fields[k]}" for k in keys)
    run_isolated(
        f"""
        meta = {{"kind": "{kind}_matrix", "shape": (20, 20), {body}}}
        refused, value = load_or_refuse(forge("scipy.sparse", meta))
        print("REFUSED" if refused else "LOADED")
        """
    )
