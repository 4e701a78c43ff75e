"""freight's serializers for third-party libraries, one module per library, each imported the
first time its library's objects or tags are seen (see ``freight.registry._LIBRARIES``). A
module defines its serializers and lists them in ``SERIALIZERS``; the registry imports it by name
and registers them into its BUILTINS layer. Serializer modules never import the registry."""

from __future__ import annotations

from typing import Any

# At module level: an import statement inside deserialize ran on every load, and costs ~7k
# instructions there (the import system's check of the module's spec raises and clears an
# AttributeError), 8% of a 10-row table's zero-copy load.
from freight.exceptions import DeserializationError


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


class LibrarySerializer:
    """Base of freight's serializers for third-party types: ``deserialize`` rebuilds through
    ``_rebuild(meta, frames)`` and reports what the library raises on bad input as a
    DeserializationError naming the tag."""

    tag: str = ""
    safe = True
    subclasses = False
    #: What the library raises on malformed metadata.
    errors: tuple[type[BaseException], ...] = (KeyError, TypeError, ValueError, IndexError, AttributeError)

    def deserialize(self, meta: Any, frames: list[memoryview]) -> Any:
        try:
            return self._rebuild(meta, frames)
        except (DeserializationError, *self.errors) as exc:
            from freight import _versions

            # Written by another version of the library: the error names both versions.
            crossing = _versions.failed_crossing(self.tag.split(".")[0], self.tag, exc)
            if crossing is not None:
                raise crossing from exc
            if isinstance(exc, DeserializationError):  # freight's own (the Rust Arrow path's)
                raise
            raise DeserializationError(f"the payload holds an invalid {self.tag}: {exc}") from exc

    def _rebuild(self, meta: Any, frames: list[memoryview]) -> Any:
        raise NotImplementedError
