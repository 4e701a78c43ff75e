"""numpy masked arrays (``numpy.ma.MaskedArray``, exact type): data and mask as numpy nodes
(frames, no pickle, safe to load), with the fill value and the hard-mask setting, which pickle
loses (numpy's own ``__reduce__`` does not record ``hardmask``). Imported the first time a numpy
type freight does not encode natively shows up, or a ``numpy.ma`` tag is loaded.

Everything else comes back as pickle brings it back, by the same steps: the mask keeps its
dtype (a structured array's mask is structured), the fill value is what numpy stored
(``_fill_value``: None, a 0-d array or a numpy scalar, of whatever dtype numpy kept: an int16
array's default is an int64 999999, which numpy itself casts on use) and is set back through
the ``fill_value`` setter, as ``MaskedArray.__setstate__`` does. A masked array whose data is an
ndarray subclass (``np.matrix``) has that data pickled in place, which keeps the subclass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from freight.exceptions import DeserializationError
from freight.serializers import LibrarySerializer, Pickled


def _fill_wire(fill: Any) -> tuple[Any, bool]:
    """(wire form, was a numpy scalar) of a masked array's stored ``_fill_value``. A numpy
    scalar travels as a 0-d array of its dtype (a native node: a Python value would lose the
    dtype, and numpy casts a numpy scalar where it refuses an out-of-range Python int); what
    holds Python objects is pickled in place."""
    if fill is None:
        return None, False
    if isinstance(fill, np.generic) and not fill.dtype.hasobject:
        return np.asarray(fill), True
    if type(fill) is np.ndarray and fill.ndim == 0 and not fill.dtype.hasobject:
        return fill, False
    return Pickled(fill), False


class MaskedArraySerializer(LibrarySerializer):
    tag = "numpy.ma.MaskedArray"
    types = (np.ma.MaskedArray,)

    def serialize(self, m: np.ma.MaskedArray) -> tuple[Any, list[Any]]:
        data = np.ma.getdata(m)  # a view of the data's own class (np.matrix: _baseclass)
        # The mask in the data's order, as pickle writes both (a C-ordered mask over Fortran
        # data comes back Fortran-ordered).
        mask = np.ma.getmaskarray(m)
        order = "F" if data.flags.fnc else "C"
        if not mask.flags[f"{order}_CONTIGUOUS"]:
            mask = mask.copy(order=order)
        fill, scalar = _fill_wire(m._fill_value)
        return {
            # Python objects cannot travel as raw data, nor an ndarray subclass as an array
            # node (it would come back a plain ndarray): those are pickled in place.
            "data": Pickled(data) if data.dtype.hasobject or type(data) is not np.ndarray else data,
            "mask": mask,
            "fill": fill,
            "fill_scalar": scalar,
            "hard": bool(m.hardmask),
        }, []

    def _rebuild(self, meta: dict[str, Any], frames: list[memoryview]) -> Any:
        data, mask = meta["data"], meta["mask"]
        if isinstance(data, Pickled):  # an object-dtype array or an ndarray subclass, pickled in place
            data = data.value
        if not isinstance(data, np.ndarray) or isinstance(data, np.ma.MaskedArray) or type(mask) is not np.ndarray:
            raise DeserializationError("the payload holds an invalid numpy masked array")
        if mask.dtype != np.ma.make_mask_descr(data.dtype):
            raise DeserializationError(
                f"the payload holds a masked array's mask of dtype {mask.dtype}, which does not fit its data of "
                f"dtype {data.dtype}: it is corrupt, or was not written by freight"
            )
        if mask.shape != data.shape:
            raise DeserializationError(f"a masked array's mask {mask.shape} does not match its data {data.shape}")
        # The constructor pickle's _mareconstruct uses, without a fill value: it is set after,
        # through the same setter as MaskedArray.__setstate__. The data's class (np.matrix)
        # becomes the _baseclass, as in pickle's.
        m = np.ma.MaskedArray.__new__(np.ma.MaskedArray, data, mask=mask, dtype=data.dtype)
        # The constructor copies a structured mask into C order; pickle's keeps the data's order.
        m._mask = mask
        # Whether the mask may be shared (the first write then copies it), as pickle's result
        # says: its constructor sees a mask of shape (0,) over data of shape (0,), except where
        # the data's class reshapes that (np.matrix makes it (1, 0)); a structured mask here
        # would say otherwise.
        m._sharedmask = type(data) is np.ndarray or np.ndarray.__new__(type(data), (0,), "b").shape == (0,)
        self._set_fill(m, meta)
        if meta["hard"]:
            m.harden_mask()
        return m

    @staticmethod
    def _set_fill(m: np.ma.MaskedArray, meta: dict[str, Any]) -> None:
        fill = meta.get("fill")
        if isinstance(fill, Pickled):
            fill = fill.value
        if "fill_scalar" not in meta:
            # Earlier payloads: a Python scalar or None. Those of small integer arrays hold the
            # default 999999, which no longer fits: the default is what they meant.
            try:
                m.fill_value = fill
            except (TypeError, OverflowError):
                m.fill_value = None
            return
        if fill is not None and not (isinstance(fill, np.ndarray) and fill.ndim == 0):
            raise DeserializationError(
                f"the payload holds a masked array whose fill value is a {type(fill).__name__}, not a 0-d "
                "array: it is corrupt, or was not written by freight"
            )
        if fill is not None and meta["fill_scalar"]:
            try:
                fill = fill[()]
            except SystemError as exc:  # 'U' bytes that no str can hold: no scalar ever had them
                raise DeserializationError(
                    f"the payload holds a masked array with a corrupt fill value: {exc}"
                ) from exc
        try:
            # numpy casts the stored fill to the data's dtype here and warns when it overflows
            # (a float16 array's default 1e20 becomes inf): the value pickle's load gives too.
            with np.errstate(over="ignore", invalid="ignore"):
                m.fill_value = fill
        except (TypeError, ValueError, OverflowError) as exc:
            if np.asarray(fill).dtype.kind not in "SU":
                raise DeserializationError(
                    f"the payload holds a masked array of dtype {m.dtype} with a fill value numpy refuses ({exc}): "
                    "it is corrupt, or was not written by freight"
                ) from exc
            # A text numpy stored itself and refuses to set back (its default for a datetime64
            # of a unit it has no default for is '?'; pickle's load fails there): kept as stored.
            m._fill_value = fill


# What freight.registry registers into its BUILTINS layer when it loads this module.
SERIALIZERS = (MaskedArraySerializer(),)
