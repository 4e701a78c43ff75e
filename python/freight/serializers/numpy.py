"""numpy dtypes on the wire. The array data itself is handled in Rust (buffer protocol, zero
copy); this module only describes and rebuilds dtypes, and is imported the first time an array
is encoded or decoded, never at ``import freight``.

Wire form of a dtype (a natively encodable value):

* a plain dtype: ``dtype.str`` (``'<f8'``, ``'<M8[ns]'``, ``'|S5'``, ``'>i4'``, ``'|V8'``);
* a sub-array dtype: ``("sub", base_wire, shape_tuple)``;
* a structured dtype: ``{"names": [...], "formats": [wire, ...], "offsets": [...],
  "itemsize": n, "aligned": bool, "titles": [...] or absent}``, which keeps padding and
  alignment exactly.

Some dtypes have no wire form, and their arrays go through pickle, which keeps them exactly:
object dtypes (arrays holding Python objects), dtypes of a user-defined DType (numpy's
``_rational_tests.rational``, ``quaddtype``: their ``dtype.str`` is a plain ``'<V8'``, which
would come back as raw bytes), and dtypes carrying ``metadata`` (h5py's enum dtypes: neither
``dtype.str`` nor the structured form records it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from freight.exceptions import DeserializationError

# By dtype object (the dtype is kept, so its id is not reused), not by equality: dtypes that
# differ only in metadata or in being an aligned struct compare (and hash) equal, and must not
# share a wire form.
_TO_WIRE: dict[int, tuple[np.dtype, Any]] = {}
_FROM_WIRE: dict[str, np.dtype] = {}


# The DType classes of numpy's own kinds (Float64DType, BytesDType, VoidDType, ...). On numpy
# before 1.20 every dtype is a plain np.dtype, and user-defined ones are told apart by
# ``isbuiltin == 2`` only.
_BUILTIN_DTYPE_CLASSES = frozenset(type(np.dtype(code)) for code in np.typecodes["All"])


class _NoWire(Exception):
    """This dtype, or a part of it, has no wire form: its arrays go through pickle."""


def dtype_to_wire(dtype: np.dtype) -> Any:
    """The wire form of ``dtype``, or None when pickle must carry its arrays (see above)."""
    hit = _TO_WIRE.get(id(dtype))
    if hit is not None and hit[0] is dtype:
        return hit[1]
    try:
        wire = _to_wire(dtype)
    except _NoWire:
        wire = None
    if len(_TO_WIRE) < 1024:
        _TO_WIRE[id(dtype)] = (dtype, wire)
    return wire


def _to_wire(dtype: np.dtype) -> Any:
    if (
        dtype.hasobject
        or type(dtype) not in _BUILTIN_DTYPE_CLASSES
        or dtype.isbuiltin == 2
        or dtype.metadata is not None
    ):
        raise _NoWire
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return ("sub", _to_wire(base), tuple(int(d) for d in shape))
    if dtype.names is None:
        return dtype.str
    fields = dtype.fields
    wire: dict[str, Any] = {
        "names": list(dtype.names),
        "formats": [_to_wire(fields[name][0]) for name in dtype.names],
        "offsets": [int(fields[name][1]) for name in dtype.names],
        "itemsize": int(dtype.itemsize),
        "aligned": bool(dtype.isalignedstruct),
    }
    titles = [fields[name][2] if len(fields[name]) > 2 else None for name in dtype.names]
    if any(t is not None for t in titles):
        wire["titles"] = titles
    return wire


def dtype_from_wire(wire: Any) -> np.dtype:
    """Rebuilds a dtype from its wire form; refuses object dtypes (they would let a payload
    forge Python object pointers)."""
    if isinstance(wire, str):
        cached = _FROM_WIRE.get(wire)
        if cached is not None:
            return cached
    try:
        dtype = _from_wire(wire)
    except DeserializationError:
        raise
    except Exception as exc:
        raise DeserializationError(f"the payload describes an invalid numpy dtype {wire!r}: {exc}") from exc
    if dtype.hasobject:
        raise DeserializationError(f"the payload declares an object dtype ({wire!r}) for raw array data; refusing it")
    if isinstance(wire, str) and len(_FROM_WIRE) < 1024:
        _FROM_WIRE[wire] = dtype
    return dtype


def _from_wire(wire: Any) -> np.dtype:
    if isinstance(wire, str):
        return np.dtype(wire)
    if isinstance(wire, tuple) and len(wire) == 3 and wire[0] == "sub":
        return np.dtype((_from_wire(wire[1]), tuple(wire[2])))
    if isinstance(wire, dict):
        spec: dict[str, Any] = {
            "names": wire["names"],
            "formats": [_from_wire(f) for f in wire["formats"]],
            "offsets": wire["offsets"],
            "itemsize": wire["itemsize"],
        }
        if "titles" in wire:
            spec["titles"] = wire["titles"]
        return np.dtype(spec, align=bool(wire.get("aligned", False)))
    raise DeserializationError(f"unknown numpy dtype description {wire!r}")


def ascontiguous(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of a non-contiguous array (what ``dumps`` sends for a strided view)."""
    return np.ascontiguousarray(arr)


def from_frame(buffer: Any, dtype: np.dtype, shape: tuple[int, ...], fortran: bool, writeable: bool) -> np.ndarray:
    """An array viewing ``buffer`` (no copy)."""
    if dtype.itemsize == 0 or 0 in shape:
        arr = empty(dtype, shape, fortran)
    else:
        arr = np.frombuffer(buffer, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    if not writeable and arr.flags.writeable:
        arr.flags.writeable = False
    return arr


def empty(dtype: np.dtype, shape: tuple[int, ...], fortran: bool) -> np.ndarray:
    """A fresh array for a copying decode (the decoder keeps numpy's huge-page advice for large
    ones only when the kernel has free huge pages ready: freight-core's ``memory::prepare_decoded``)."""
    if dtype.itemsize == 0:
        return _zero_itemsize(dtype, shape, fortran)
    return np.empty(shape, dtype=dtype, order="F" if fortran else "C")


def _zero_itemsize(dtype: np.dtype, shape: tuple[int, ...], fortran: bool) -> np.ndarray:
    """An array of a zero-itemsize dtype ('S0', 'U0', 'V0', a struct of no fields). np.empty
    reads an unsized 'S0' / 'U0' as "size to be chosen" and makes 'S1' / 'U1' (the decoder then
    found 0 bytes for 10, and a zero-copy load returned uninitialised bytes). numpy's own
    unpickling keeps the size, and gives the flags pickle's result has (both orders contiguous);
    the view keeps the byte order, which unpickling drops from '>U0'."""
    arr = np.ndarray((0,), dtype=np.uint8)
    arr.__setstate__((1, tuple(shape), dtype, bool(fortran), b""))
    return arr.view(dtype)
