"""scipy.sparse matrices and arrays: csr, csc, coo, bsr, dia and lil, as their index and data
arrays (numpy frames, no pickle, safe to load). Imported the first time a scipy object is
serialized or a ``scipy.sparse`` payload is loaded; registers into ``freight.registry.BUILTINS``.

lil matrices travel in csr form (their own storage is Python lists) and come back as lil.
"""

from __future__ import annotations

from typing import Any

import scipy.sparse as sp

from freight.registry import BUILTINS
from freight.serializers import LibrarySerializer

# (format, is the new sparse-array API) -> class; the wire names only these.
_CLASSES: dict[str, type] = {}
for _fmt in ("csr", "csc", "coo", "bsr", "dia", "lil"):
    for _suffix in ("matrix", "array"):
        _cls = getattr(sp, f"{_fmt}_{_suffix}", None)
        if _cls is not None:
            _CLASSES[f"{_fmt}_{_suffix}"] = _cls
_NAMES = {cls: name for name, cls in _CLASSES.items()}


class SparseSerializer(LibrarySerializer):
    tag = "scipy.sparse"
    types = tuple(_CLASSES.values())  # exact types: a subclass goes to pickle and keeps its type

    def serialize(self, m: Any) -> tuple[Any, list[Any]]:
        kind = _NAMES[type(m)]
        fmt = kind.split("_")[0]
        meta: dict[str, Any] = {"kind": kind, "shape": tuple(int(d) for d in m.shape)}
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
        cls = _CLASSES[meta["kind"]]
        fmt = meta["kind"].split("_")[0]
        shape = tuple(meta["shape"])
        if fmt in ("csr", "csc", "bsr", "lil"):
            base = sp.csr_array if fmt == "lil" and meta["kind"].endswith("array") else sp.csr_matrix
            target = base if fmt == "lil" else cls
            m = target((meta["data"], meta["indices"], meta["indptr"]), shape=shape, copy=False)
            # scipy's compressed kernels index with these unchecked: a bad one would crash the
            # process later. Sortedness is recomputed by scipy when needed, never trusted.
            m.check_format(full_check=True)
            return cls(m) if fmt == "lil" else m
        if fmt == "coo":
            return cls((meta["data"], tuple(meta["coords"])), shape=shape, copy=False)
        return cls((meta["data"], meta["offsets"]), shape=shape, copy=False)  # dia


BUILTINS.register(SparseSerializer())
