"""Standard-library types freight encodes through a serializer rather than natively: for now
``collections.OrderedDict`` (so that ``nn.Module.state_dict()`` and other ordered mappings load
without pickle), with its instance attributes (a state dict's ``_metadata``). Imported the first
time an OrderedDict is serialized or such a payload is loaded."""

from __future__ import annotations

import collections
from typing import Any

from freight.registry import BUILTINS
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


BUILTINS.register(OrderedDictSerializer())
