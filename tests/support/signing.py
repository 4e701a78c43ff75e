"""What the signing tests share: keys, a class whose unpickling leaves a trace, sample values
and where a signature and a frame's seal lie in a payload."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from support.wire import header_bounds

KEY = b"k" * 32
OLD_KEY = b"old-secret-0123456789abcdef-0123"
NEW_KEY = b"new-secret-0123456789abcdef-0123"
WRONG_KEY = b"not-the-key-0123456789abcdef-012"
SIG_LEN = 32
# The preamble (magic bytes and format version) is checked before the signature: a payload that
# is not freight, or from another format version, says so; see test_signing's test_tampered_preamble_is_refused.
PREAMBLE = 5


# Unpickling side effects: anything in here means a payload was decoded.
SIDE_EFFECTS: list[str] = []


def record_side_effect(tag: str) -> str:
    SIDE_EFFECTS.append(tag)
    return tag


class Sneaky:
    """Unpickles into a call of record_side_effect: decoding it leaves a trace."""

    def __init__(self, tag: str = "decoded"):
        self.tag = tag

    def __reduce__(self):
        return (record_side_effect, (self.tag,))


@pytest.fixture(autouse=True)
def _clear_side_effects():
    SIDE_EFFECTS.clear()
    yield
    SIDE_EFFECTS.clear()


def sample_objects():
    rng = np.random.default_rng(0)
    return {
        "builtins": {
            "a": [1, 2.5, "three", b"four", None, True, (5, 6), {7, 8}],
            "b": 2**100,
            "c": dt.date(2024, 1, 2),
        },
        "array": rng.integers(0, 1000, 50_000, dtype=np.int64),
        "mixed": {"array": rng.standard_normal(30_000), "text": "x" * 70_000, "blob": b"y" * 70_000, "small": [1, 2]},
    }


def assert_equal(got, want):
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            assert_equal(got[k], want[k])
    else:
        assert type(got) is type(want)
        assert got == want


def mac_range(blob) -> range:
    """Where the header signature lies: the 32 bytes after the header checksum."""
    end = header_bounds(blob)[1]
    return range(end, end + SIG_LEN)


def seal_len(frame) -> int:
    """Bytes of a frame table entry that seal the frame (checksum, or digest kind, block size
    and digests)."""
    n = 8 if frame["checksum"] is not None else 0
    if frame["digests"] is not None:
        kind, block = frame["digests"]
        n += 2 + -(-frame["stored_length"] // block) * (32 if kind == "sha256" else 8)
    return n
