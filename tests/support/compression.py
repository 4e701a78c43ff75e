"""What the compression tests (tests/core/test_compression.py, tests/security/test_hostile_compression.py)
share: the writers' block size and a byte-exact array check."""

from __future__ import annotations

import numpy as np

BLOCK = 1 << 20  # the writers' compression block size, and the block-checksum threshold


def assert_array_same(got, want: np.ndarray) -> None:
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    # Byte-exact (NaN payloads and -0.0 included), then elementwise.
    assert got.tobytes() == want.tobytes()
    assert np.array_equal(got, want)
