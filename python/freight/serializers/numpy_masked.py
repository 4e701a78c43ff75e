"""numpy masked arrays (``numpy.ma.MaskedArray``, exact type): data and mask as numpy nodes
(frames, no pickle, safe to load), with the fill value and the hard-mask setting, which pickle
loses (numpy's own ``__reduce__`` does not record ``hardmask``). Imported the first time a numpy
type freight does not encode natively shows up, or a ``numpy.ma`` tag is loaded."""

from __future__ import annotations

from typing import Any

import numpy as np

from freight.exceptions import DeserializationError
from freight.registry import BUILTINS
from freight.serializers import LibrarySerializer, Pickled


class MaskedArraySerializer(LibrarySerializer):
    tag = "numpy.ma.MaskedArray"
    types = (np.ma.MaskedArray,)

    def serialize(self, m: np.ma.MaskedArray) -> tuple[Any, list[Any]]:
        data = np.asarray(np.ma.getdata(m))
        fill = m.fill_value
        return {
            # Python objects cannot travel as raw data: an object-dtype array is pickled in place.
            "data": Pickled(data) if data.dtype.hasobject else data,
            "mask": np.ma.getmaskarray(m),
            "fill": fill.item() if isinstance(fill, np.generic) and fill.dtype.kind in "biufcSU" else None,
            "hard": bool(m.hardmask),
        }, []

    def _rebuild(self, meta: dict[str, Any], frames: list[memoryview]) -> Any:
        data, mask = meta["data"], meta["mask"]
        if isinstance(data, Pickled):  # an object-dtype array, pickled in place
            data = data.value
        if not isinstance(data, np.ndarray) or not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
            raise DeserializationError("the payload holds an invalid numpy masked array")
        if mask.shape != data.shape:
            raise DeserializationError(f"a masked array's mask {mask.shape} does not match its data {data.shape}")
        m = np.ma.MaskedArray(data, mask=mask, fill_value=meta.get("fill"), hard_mask=bool(meta["hard"]))
        return m


BUILTINS.register(MaskedArraySerializer())
