"""Small user types and serializers that the registry tests (tests/core/test_registry_*.py)
register: a vector through the full protocol, a dataclass that holds values."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


class Vector:
    def __init__(self, values):
        self.values = list(values)

    def __eq__(self, other):
        return type(other) is Vector and other.values == self.values

    def __repr__(self):
        return f"Vector({self.values})"


class VectorSerializer:
    """The full protocol: (meta, frames) out, deserialize(meta, frames) back."""

    tag = "tests.registry.vector"
    types = (Vector,)
    safe = True

    def __init__(self):
        self.encoded = 0
        self.decoded = 0
        self.frame_types: list[type] = []
        self.metas: list = []
        self.last_buffer = None

    def serialize(self, obj):
        self.encoded += 1
        data = np.asarray(obj.values, dtype=np.float64)
        self.last_buffer = data
        return {"n": len(obj.values), "kind": "vector"}, [data]

    def deserialize(self, meta, frames):
        self.decoded += 1
        self.metas.append(meta)
        self.frame_types.extend(type(f) for f in frames)
        values = np.frombuffer(frames[0], dtype=np.float64)
        assert values.size == meta["n"]
        return Vector(values.tolist())


@dataclasses.dataclass
class Wrapper:
    name: str
    inner: Any
    also: Any = None


def shares_memory(frame, arr) -> bool:
    """Whether ``frame`` (any buffer) views the memory of ``arr``."""
    try:
        view = np.frombuffer(frame, dtype=np.uint8)
    except (ValueError, TypeError, BufferError):
        view = np.asarray(memoryview(frame))
    return view.size > 0 and np.shares_memory(view, arr)
