"""numpy dtypes on the wire. The array data itself is handled in Rust (buffer protocol, zero
copy); this module only describes and rebuilds dtypes, and is imported the first time an array
is encoded or decoded, never at ``import freight``.

Wire form of a dtype (a natively encodable value):

* a plain dtype: ``dtype.str`` (``'<f8'``, ``'<M8[ns]'``, ``'|S5'``, ``'>i4'``, ``'|V8'``);
* a sub-array dtype: ``("sub", base_wire, shape_tuple)``;
* a structured dtype: ``{"names": [...], "formats": [wire, ...], "offsets": [...],
  "itemsize": n, "aligned": bool, "titles": [...] or absent}``, which keeps padding and
  alignment exactly.

Object dtypes have no wire form: arrays holding Python objects go through pickle.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from freight.exceptions import DeserializationError

_TO_WIRE: dict[np.dtype, Any] = {}
_FROM_WIRE: dict[str, np.dtype] = {}


def dtype_to_wire(dtype: np.dtype) -> Any:
    """The wire form of ``dtype``, or None when it holds Python objects (needs pickle)."""
    try:
        return _TO_WIRE[dtype]
    except (KeyError, TypeError):
        pass
    wire = _to_wire(dtype)
    if len(_TO_WIRE) < 1024:
        try:
            _TO_WIRE[dtype] = wire
        except TypeError:
            pass
    return wire


def _to_wire(dtype: np.dtype) -> Any:
    if dtype.hasobject:
        return None
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
        arr = np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    else:
        arr = np.frombuffer(buffer, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    if not writeable and arr.flags.writeable:
        arr.flags.writeable = False
    return arr


def empty(dtype: np.dtype, shape: tuple[int, ...], fortran: bool) -> np.ndarray:
    """A fresh array for a copying decode (numpy asks for huge pages for large ones)."""
    return np.empty(shape, dtype=dtype, order="F" if fortran else "C")
