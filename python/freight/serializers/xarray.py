"""xarray DataArray and Dataset: variables, coordinates, dims, attrs and encoding, through
xarray's own ``to_dict(data="array", encoding=True)`` / ``from_dict``. Variable data stays numpy
arrays, which freight sends as frames (no pickle; attrs values freight cannot encode natively
are pickled in place). Imported the first time an xarray object is serialized or an
``xarray.*`` payload is loaded (``freight.registry`` registers
its ``SERIALIZERS``).

State kept on a cached accessor (``ds.my_accessor.value = "foo"``, after
``xr.register_dataset_accessor("my_accessor")``) lives in the object's ``_cache``, which
``to_dict`` does not see: an object whose accessors hold anything but the object itself is
pickled in place, which keeps that state and the accessor's reference to its object.
"""

from __future__ import annotations

from typing import Any

import xarray as xr

from freight.exceptions import DeserializationError
from freight.serializers import LibrarySerializer, Pickled


def _has_accessor_state(obj: Any) -> bool:
    """Whether a cached accessor of ``obj`` holds state that a new accessor would not have: any
    attribute other than a reference to ``obj`` itself (which every accessor's ``__init__``
    keeps). Plain objects have no ``_cache`` at all: one getattr."""
    cache = getattr(obj, "_cache", None)
    if not cache:
        return False
    for accessor in cache.values():
        state = getattr(accessor, "__dict__", None)
        if state is None:
            return True  # a __slots__ accessor: its state cannot be read here, keep it
        if any(value is not obj for value in state.values()):
            return True
    return False


class _XarraySerializer(LibrarySerializer):
    cls: Any = None

    def serialize(self, obj: Any) -> tuple[Any, list[Any]]:
        if _has_accessor_state(obj):
            return {"pickled": Pickled(obj)}, []
        return obj.to_dict(data="array", encoding=True), []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        if "pickled" in meta:
            obj = meta["pickled"]
            obj = obj.value if isinstance(obj, Pickled) else obj
            if type(obj) is not self.cls:
                raise DeserializationError(f"the payload holds a {type(obj).__name__} where {self.tag} belongs")
            return obj
        return self.cls.from_dict(meta)


class DataArraySerializer(_XarraySerializer):
    tag = "xarray.DataArray"
    types = (xr.DataArray,)
    cls = xr.DataArray


class DatasetSerializer(_XarraySerializer):
    tag = "xarray.Dataset"
    types = (xr.Dataset,)
    cls = xr.Dataset


# What freight.registry registers into its BUILTINS layer when it loads this module.
SERIALIZERS = (DataArraySerializer(), DatasetSerializer())
