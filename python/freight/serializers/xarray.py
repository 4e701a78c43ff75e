"""xarray DataArray and Dataset: variables, coordinates, dims, attrs and encoding, through
xarray's own ``to_dict(data="array", encoding=True)`` / ``from_dict``. Variable data stays numpy
arrays, which freight sends as frames (no pickle; attrs values freight cannot encode natively
are pickled in place). Imported the first time an xarray object is serialized or an
``xarray.*`` payload is loaded; registers into ``freight.registry.BUILTINS``.
"""

from __future__ import annotations

from typing import Any

import xarray as xr

from freight.registry import BUILTINS
from freight.serializers import LibrarySerializer


class _XarraySerializer(LibrarySerializer):
    cls: Any = None

    def serialize(self, obj: Any) -> tuple[Any, list[Any]]:
        return obj.to_dict(data="array", encoding=True), []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        return self.cls.from_dict(meta)


class DataArraySerializer(_XarraySerializer):
    tag = "xarray.DataArray"
    types = (xr.DataArray,)
    cls = xr.DataArray


class DatasetSerializer(_XarraySerializer):
    tag = "xarray.Dataset"
    types = (xr.Dataset,)
    cls = xr.Dataset


for _serializer in (DataArraySerializer(), DatasetSerializer()):
    BUILTINS.register(_serializer)
