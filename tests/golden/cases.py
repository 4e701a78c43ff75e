"""The objects behind the golden payloads of tests/golden/v1/.

Each case is a function returning a fresh object; `generate.py` wrote `v1/<name>.frt` from it
once, and `tests/golden/test_golden.py` checks that every build still decodes each file to an
object equal to what the function returns now. Never change a case: add a new one instead.
"""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import fractions
import pathlib
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

CASES: dict[str, Callable[[], Any]] = {}


def case(func: Callable[[], Any]) -> Callable[[], Any]:
    CASES[func.__name__] = func
    return func


class Point:
    """A user type with a registered serializer (full protocol)."""

    def __init__(self, x: float, y: float):
        self.x, self.y = x, y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)


class PointSerializer:
    tag = "golden.Point"
    types = (Point,)
    safe = True

    def serialize(self, p: Point) -> tuple[Any, list[Any]]:
        return [p.x, p.y], [np.array([p.x, p.y]).tobytes()]

    def deserialize(self, meta: Any, frames: list[memoryview]) -> Point:
        x, y = np.frombuffer(frames[0], dtype=np.float64)
        assert [x, y] == meta
        return Point(float(x), float(y))


@case
def scalars() -> Any:
    return [None, True, False, 0, 1, -1, 2**63 - 1, -(2**63), 2**200, -(3**150), 1.5, -0.0, float("inf"), 1 + 2j]


@case
def strings_and_bytes() -> Any:
    return ["", "ascii", "héllo wörld ✓ 😀", "lone \ud800 surrogate", b"", b"\x00\xff" * 10, bytearray(b"mutable")]


@case
def nested_containers() -> Any:
    shared = [1, 2, 3]
    cyclic: list[Any] = ["self"]
    cyclic.append(cyclic)
    return {
        "list": [1, [2, [3, [4]]]],
        "tuple": (1, (2, 3), ()),
        "set": {1, 2, 3},
        "frozenset": frozenset({"a"}),
        "keys": {1: "int", 1.5: "float", (1, 2): "tuple", frozenset({3}): "fs", None: "none"},
        "shared": [shared, shared],
        "cyclic": cyclic,
    }


@case
def stdlib_scalars() -> Any:
    return [
        dt.datetime(2024, 2, 29, 23, 59, 58, 999999),
        dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc),
        dt.datetime(2021, 11, 7, 1, 30, fold=1, tzinfo=dt.timezone(dt.timedelta(hours=-5), "EST")),
        dt.date(1, 1, 1),
        dt.time(12, 30, 15, 500, tzinfo=dt.timezone(dt.timedelta(minutes=330))),
        dt.timedelta(days=-3, seconds=5, microseconds=7),
        decimal.Decimal("1.10"),
        decimal.Decimal("-0E+3"),
        decimal.Decimal("NaN"),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        pathlib.PurePosixPath("/tmp/a b/c.txt"),
        pathlib.PureWindowsPath("C:/Users/x"),
    ]


@case
def numpy_arrays() -> Any:
    return {
        "f8": np.arange(12, dtype=np.float64).reshape(3, 4),
        "i4_fortran": np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
        "i2_big_endian": np.arange(5, dtype=">i2"),
        "f2": np.array([1.5, -2.0], dtype=np.float16),
        "c16": np.array([1 + 2j], dtype=np.complex128),
        "bool": np.array([True, False, True]),
        "datetime": np.array(["2024-01-01T00:00:00", "NaT"], dtype="M8[ns]"),
        "timedelta": np.array([1, 2], dtype="m8[s]"),
        "unicode": np.array(["a", "bcd"], dtype="<U3"),
        "bytes": np.array([b"x", b"yz"], dtype="S2"),
        "structured": np.array(
            [(1, 2.5), (3, 4.5)], dtype=np.dtype({"names": ["a", "b"], "formats": ["u1", "<f8"], "align": True})
        ),
        "zero_d": np.array(7.0),
        "empty": np.zeros((0, 3), dtype=np.int64),
        "readonly": _readonly(np.arange(4, dtype=np.uint8)),
    }


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


@case
def large_bytes_frame() -> Any:
    return {"blob": bytes(range(256)) * 512, "text": "freight " * 10000}


@case
def pickle_island() -> Any:
    # Types with no native encoding go through pickle; the array inside still becomes a frame.
    return collections.OrderedDict(
        [
            ("fraction", fractions.Fraction(3, 4)),
            ("counter", collections.Counter("abracadabra")),
            ("array", np.arange(3.0)),
        ]
    )


@case
def pickle_islands() -> Any:
    # Objects with no native encoding are pickled where they are met (Pickle nodes of flavour 2,
    # one pickler for the payload), the rest stays native: the second and third halves are
    # references into the first island's pickle memo.
    half = fractions.Fraction(1, 2)
    return {
        "half": half,
        "again": [half, (half,)],
        "counter": collections.Counter("abracadabra"),
        "array": np.arange(3.0),
    }


@case
def registered_serializer() -> Any:
    return {"points": [Point(1.0, 2.0), Point(-3.5, 0.25)]}


# Cases added after format 1.0: their files exist from the set of the version that added them on
# (`generate.py` writes them into every set it writes; `test_golden` checks them like the others).
LATER_CASES: dict[str, Callable[[], Any]] = {}


def later_case(func: Callable[[], Any]) -> Callable[[], Any]:
    LATER_CASES[func.__name__] = func
    return func


@later_case
def digested_frames() -> Any:
    """Format 1.2: a frame of more than 1 MiB, stored or compressed (random bytes, then zeros:
    zstd keeps it above 1 MiB), so that a checksummed payload seals it with xxh3 block digests
    and a signed one with several SHA-256 blocks; and a small frame beside it, which keeps its
    plain checksum."""
    noise = np.random.default_rng(20261128).integers(0, 256, 1_060_000, dtype=np.uint8)
    return {"big": np.concatenate([noise, np.zeros(40_000, dtype=np.uint8)]), "small": np.arange(10, dtype=np.int16)}
