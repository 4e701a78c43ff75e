"""A stored value is exactly what ``freight.dumps`` writes with the store's options: one
encoding, laid out by freight-core (``EnvelopeWriter.parts``), streamed from the objects' own
memory, compressed and signed once."""

from __future__ import annotations

import numpy as np
import pytest

import freight

KEY = b"a long random secret for signing stored values"

VALUES = {
    "builtins": {"a": [1, 2.5, "x"], "b": None},
    "arrays": {"small": np.arange(10), "big": np.arange(300_000.0), "text": "x" * 100_000},
    "closure": (lambda k: lambda x: x + k)(3),
}


@pytest.mark.parametrize("name", VALUES)
@pytest.mark.parametrize("compression", [None, "lz4", "auto"])
@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_a_stored_value_is_the_dumps_layout(store, name, compression, signed):
    value = VALUES[name]
    codec = freight.Freight(key=KEY if signed else None)
    store.save("v", value, compression=compression or "none", **({"sign_key": KEY} if signed else {}))
    stored = bytes(store._native.get("v"))
    want = codec.dumps(value, checksum=True, compression=compression or "none")
    assert stored == want
    freight.verify(stored, key=KEY if signed else None)
    # At rest, every frame is sealed: a checksum, or block digests (over 1 MiB; every frame signed).
    assert all(f["checksum"] is not None or f["digests"] is not None for f in freight.inspect(stored)["frames"])
