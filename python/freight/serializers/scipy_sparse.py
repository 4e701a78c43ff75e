"""scipy.sparse matrices and arrays: csr, csc, coo, bsr, dia and lil, as their index and data
arrays (numpy frames, no pickle, safe to load). Imported the first time a scipy object is
serialized or a ``scipy.sparse`` payload is loaded (``freight.registry``
registers its ``SERIALIZERS``).

lil matrices travel in csr form (their own storage is Python lists) and come back as lil.
Sparse arrays may have other than two dimensions: coo_array any number, csr_array one (its
index arrays then describe one row).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from freight._freight import compressed_indices_error
from freight.exceptions import DeserializationError
from freight.serializers import LibrarySerializer

# (format, is the new sparse-array API) -> class; the wire names only these.
_CLASSES: dict[str, type] = {}
for _fmt in ("csr", "csc", "coo", "bsr", "dia", "lil"):
    for _suffix in ("matrix", "array"):
        _cls = getattr(sp, f"{_fmt}_{_suffix}", None)
        if _cls is not None:
            _CLASSES[f"{_fmt}_{_suffix}"] = _cls
_NAMES = {cls: name for name, cls in _CLASSES.items()}
# Dimensions other than 2 that sparse arrays take (an empty tuple: any number, for coo_array).
_NDIMS: dict[str, tuple[int, ...]] = {"coo_array": (), "csr_array": (1, 2)}
_MAXPRINT = getattr(sp.csr_matrix((1, 1)), "maxprint", 50)

# What writers send (scipy's own index and value dtypes); anything else is refused on load, so
# that scipy's C++ kernels only ever see the types they are compiled for.
_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
_DATA_KINDS = "biufc"


def _index_array(a: Any, what: str) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype not in _INDEX_DTYPES:
        raise DeserializationError(f"the payload holds an invalid scipy.sparse {what}: {_describe(a)}")
    return a


def _describe(a: Any) -> str:
    if isinstance(a, np.ndarray):
        return f"an array of dtype {a.dtype} and shape {a.shape}"
    return f"a {type(a).__name__}"


def _check_compressed(data: Any, indices: Any, indptr: Any, major: int, minor: int, block: tuple[int, ...]) -> None:
    """Checks what scipy's kernels index with, in Rust, before scipy sees it (scipy's own
    check_format skips the order of indptr when its last entry is 0, which let a forged payload
    corrupt the heap)."""
    indices = _index_array(indices, "indices array")
    indptr = _index_array(indptr, "indptr array")
    if indptr.dtype != indices.dtype:
        raise DeserializationError("the payload holds scipy.sparse index arrays of different dtypes")
    if not isinstance(data, np.ndarray) or data.dtype.kind not in _DATA_KINDS:
        raise DeserializationError(f"the payload holds invalid scipy.sparse values: {_describe(data)}")
    if data.shape != (len(indices), *block):
        raise DeserializationError(
            f"the payload holds scipy.sparse values of shape {data.shape} for {len(indices)} indices"
        )
    error = compressed_indices_error(
        np.ascontiguousarray(indptr), np.ascontiguousarray(indices), indices.dtype.itemsize == 8, major, minor
    )
    if error is not None:
        raise DeserializationError(f"the payload holds an invalid scipy.sparse structure: {error}")


class SparseSerializer(LibrarySerializer):
    tag = "scipy.sparse"
    types = tuple(_CLASSES.values())  # exact types: a subclass goes to pickle and keeps its type

    def serialize(self, m: Any) -> tuple[Any, list[Any]]:
        kind = _NAMES[type(m)]
        fmt = kind.split("_")[0]
        meta: dict[str, Any] = {"kind": kind, "shape": tuple(int(d) for d in m.shape)}
        if getattr(m, "maxprint", _MAXPRINT) != _MAXPRINT:
            meta["maxprint"] = int(m.maxprint)  # set by the user; pickle keeps it
        if fmt == "lil":
            m = m.tocsr()
            fmt = "csr"
        if fmt in ("csr", "csc", "bsr"):
            # "sorted" is not trusted on load (scipy recomputes it); earlier readers need it.
            meta.update(data=m.data, indices=m.indices, indptr=m.indptr, sorted=bool(m.has_sorted_indices))
        elif fmt == "coo":
            coords = getattr(m, "coords", None)
            meta.update(data=m.data, coords=tuple(coords) if coords is not None else (m.row, m.col))
        elif fmt == "dia":
            meta.update(data=m.data, offsets=m.offsets)
        return meta, []

    def _rebuild(self, meta: dict[str, Any], frames: list[memoryview]) -> Any:
        m = self._build(meta)
        maxprint = meta.get("maxprint")
        if isinstance(maxprint, int):
            m.maxprint = maxprint
        return m

    def _build(self, meta: dict[str, Any]) -> Any:
        cls = _CLASSES[meta["kind"]]
        fmt = meta["kind"].split("_")[0]
        shape = tuple(meta["shape"])
        # The dimensions scipy accepts for each kind: a shape it would refuse, or one the
        # checks below do not cover, never reaches its constructors.
        ndims = _NDIMS.get(meta["kind"], (2,))
        if (ndims and len(shape) not in ndims) or not shape or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise DeserializationError(f"the payload holds a scipy.sparse shape {shape!r} for a {meta['kind']}")
        if fmt in ("csr", "csc", "bsr", "lil"):
            rows, cols = shape if len(shape) == 2 else (1, shape[0])  # a 1-D csr_array is one row
            block: tuple[int, ...] = ()
            if fmt == "bsr":
                data = meta["data"]
                if not isinstance(data, np.ndarray) or data.ndim != 3 or 0 in data.shape[1:]:
                    raise DeserializationError(f"the payload holds invalid bsr blocks: {_describe(data)}")
                block = data.shape[1:]
                if rows % block[0] or cols % block[1]:
                    raise DeserializationError(f"bsr blocks {block} do not tile the shape {shape}")
                rows, cols = rows // block[0], cols // block[1]
            major, minor = (cols, rows) if fmt == "csc" else (rows, cols)
            _check_compressed(meta["data"], meta["indices"], meta["indptr"], major, minor, block)
            base = sp.csr_array if fmt == "lil" and meta["kind"].endswith("array") else sp.csr_matrix
            target = base if fmt == "lil" else cls
            m = target((meta["data"], meta["indices"], meta["indptr"]), shape=shape, copy=False)
            # scipy's compressed kernels index with these unchecked: a bad one would crash the
            # process later. Sortedness is recomputed by scipy when needed, never trusted.
            m.check_format(full_check=True)
            return cls(m) if fmt == "lil" else m
        data = meta["data"]
        if not isinstance(data, np.ndarray) or data.dtype.kind not in _DATA_KINDS:
            raise DeserializationError(f"the payload holds invalid scipy.sparse values: {_describe(data)}")
        if fmt == "coo":
            coords = tuple(meta["coords"])
            if len(coords) != len(shape) or data.ndim != 1:
                raise DeserializationError("the payload holds scipy.sparse coordinates that do not match its shape")
            for axis, (c, dim) in enumerate(zip(coords, shape)):
                c = _index_array(c, "coordinate array")
                if len(c) != len(data) or (len(c) and (int(c.min()) < 0 or int(c.max()) >= dim)):
                    raise DeserializationError(
                        f"the payload holds scipy.sparse coordinates out of range on axis {axis}"
                    )
            return cls((data, coords), shape=shape, copy=False)
        offsets = _index_array(meta["offsets"], "offsets array")
        if data.ndim != 2 or data.shape[0] != len(offsets):
            raise DeserializationError(f"the payload holds invalid dia values: {_describe(data)}")
        # scipy's dia kernels add offsets to the shape in the index type: an offset far outside
        # the matrix overflows there and reads out of bounds (found by the fuzzing campaign).
        if len(offsets) and (int(offsets.min()) <= -shape[0] or int(offsets.max()) >= shape[1]):
            raise DeserializationError(f"the payload holds dia offsets outside the shape {shape}")
        return cls((data, offsets), shape=shape, copy=False)  # dia


# What freight.registry registers into its BUILTINS layer when it loads this module.
SERIALIZERS = (SparseSerializer(),)
