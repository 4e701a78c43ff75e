"""Standard-library types freight encodes through a serializer rather than natively:
``collections.OrderedDict`` (so that ``nn.Module.state_dict()`` and other ordered mappings load
without pickle), with its instance attributes (a state dict's ``_metadata``), and ``memoryview``
(format, shape and read-only flag kept; pickle refuses memoryviews, cloudpickle flattens them to
bytes). Imported the first time such an object is serialized or such a payload is loaded."""

from __future__ import annotations

import collections
from typing import Any

from freight._functions import FunctionSerializer
from freight.exceptions import SerializationError
from freight.serializers import LibrarySerializer


class OrderedDictSerializer(LibrarySerializer):
    tag = "collections.OrderedDict"
    types = (collections.OrderedDict,)

    def serialize(self, d: collections.OrderedDict) -> tuple[Any, list[Any]]:
        meta: dict[str, Any] = {"items": list(d.items())}
        attrs = vars(d)
        if attrs:
            meta["attrs"] = dict(attrs)
        return meta, []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        d = collections.OrderedDict(meta["items"])
        d.__dict__.update(meta.get("attrs", {}))
        return d


def _castable(fmt: str) -> bool:
    """Whether ``memoryview.cast`` can rebuild this format (single native formats only)."""
    try:
        memoryview(bytes(16)).cast("B").cast(fmt)
    except (ValueError, TypeError):
        return False
    return True


class MemoryViewSerializer(LibrarySerializer):
    """A memoryview comes back as a memoryview of the same format, shape and read-only flag,
    over its own copy of the bytes (what it viewed does not travel: pickle refuses memoryviews
    for that reason). Native single-item formats are rebuilt with ``cast``; others that numpy
    understands (byte orders, structs) travel as the numpy array that views the same memory."""

    tag = "builtins.memoryview"
    types = (memoryview,)

    def serialize(self, m: memoryview) -> tuple[Any, list[Any]]:
        if "O" in m.format:
            raise SerializationError(
                f"a memoryview of format {m.format!r} holds pointers to Python objects, which mean nothing in "
                "another process (pickle refuses it too); serialize the object it views instead (m.obj)"
            )
        if _castable(m.format) and (m.nbytes or m.ndim == 1):
            flat = m.cast("B") if m.c_contiguous else memoryview(m.tobytes())
            return ("cast", m.format, list(m.shape), m.readonly), [flat]
        try:
            import numpy as np

            arr = np.asarray(m)
            if memoryview(arr).format != m.format:
                raise ValueError(m.format)
        except (ImportError, ValueError, TypeError) as exc:
            raise SerializationError(
                f"freight cannot rebuild a memoryview of format {m.format!r}; serialize bytes(m) or the "
                f"object it views (m.obj) instead"
            ) from exc
        return ("numpy", np.array(arr) if not m.readonly else arr, m.readonly), []

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        if meta[0] == "numpy":
            _, arr, readonly = meta
            view = memoryview(arr)
            return view.toreadonly() if readonly else view
        _, fmt, shape, readonly = meta
        data = bytes(frames[0]) if readonly else bytearray(frames[0])
        if not data:  # cast refuses empty views: an empty slice of a one-item view instead
            one = bytes(memoryview(bytes(16)).cast("B").cast(fmt).itemsize)
            return memoryview(one if readonly else bytearray(one)).cast("B").cast(fmt)[:0]
        return memoryview(data).cast("B").cast(fmt, shape)


# What freight.registry registers into its BUILTINS layer when it loads this module.
SERIALIZERS = (OrderedDictSerializer(), MemoryViewSerializer(), FunctionSerializer())
