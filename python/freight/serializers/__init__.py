"""freight's serializers for third-party libraries, one module per library, each imported the
first time its library's objects or tags are seen (see ``freight.registry._LIBRARIES``)."""

from __future__ import annotations

from typing import Any


class Pickled:
    """Put in a serializer's metadata, the wrapped value is pickled in place (a "pickle island"),
    and the payload is marked as needing pickle. For values a serializer has no native form for
    (polars Object columns, pandas sparse arrays), including objects of the serializer's own
    type, which freight would otherwise hand back to the same serializer."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return (Pickled, (self.value,))
