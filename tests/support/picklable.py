"""A value and a serializer defined at module level, so that pickle stores them by reference and
a child interpreter (with :func:`support.child_env`) imports them by name: the tests of a
``Freight`` pickled into another process (tests/core/test_freight_pickling.py)."""

from __future__ import annotations

import numpy as np


def sample():
    return {
        "array": np.arange(50_000, dtype=np.float64),
        "text": "x" * 70_000,
        "small": [1, 2.5, "three", None, (4, 5)],
    }


class Celsius:
    def __init__(self, degrees: float):
        self.degrees = degrees

    def __eq__(self, other):
        return type(other) is Celsius and other.degrees == self.degrees


class CelsiusSerializer:
    """Module-level, so it pickles by reference."""

    tag = "test.pickling.celsius"
    types = (Celsius,)

    def serialize(self, obj):
        return {"degrees": obj.degrees}, []

    def deserialize(self, meta, frames):
        return Celsius(meta["degrees"])
