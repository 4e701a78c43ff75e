"""``loads(data, copy=True)``: nothing decoded refers to ``data`` afterwards (what a receive buffer
that is reused or freed needs, e.g. mpi4py's): every kind of value that can view its input
(numpy arrays, writable or read-only, pandas and Arrow columns, pickle-5 buffers, bytes frames)
stays unchanged when the input is overwritten."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import freight


class Tagged(np.ndarray):
    """An ndarray subclass: no native form, pickled with its data as an out-of-band buffer."""


def _values():
    ro = np.arange(50_000, dtype=np.int64)
    ro.flags.writeable = False
    return {
        "array": np.arange(100_000, dtype=np.float64),
        "read-only array": ro,
        "frame": pd.DataFrame({"i": np.arange(20_000), "f": np.linspace(0, 1, 20_000)}),
        "pickled subclass": np.arange(30_000, dtype=np.float32).view(Tagged),
        "bytes": b"\x01" * 200_000,
    }


@pytest.mark.parametrize("name", list(_values()))
@pytest.mark.parametrize("frames", [False, True], ids=["loads", "loads_frames"])
def test_copy_leaves_nothing_on_the_input(name, frames):
    value = _values()[name]
    if frames:
        parts = [bytearray(p) for p in freight.dumps_frames(value)]
        out = freight.loads_frames(parts, copy=True)
        for p in parts:
            p[:] = b"\xff" * len(p)
    else:
        data = bytearray(freight.dumps(value))
        out = freight.loads(data, copy=True)
        data[:] = b"\xff" * len(data)  # the buffer reused for the next message
    if isinstance(value, pd.DataFrame):
        pd.testing.assert_frame_equal(out, value)
    elif isinstance(value, np.ndarray):
        np.testing.assert_array_equal(np.asarray(out), np.asarray(value))
        assert type(out) is type(value)
    else:
        assert out == value


def test_without_copy_arrays_view_a_writable_input():
    """What copy=True is for: by default an array views a writable input (as pickle 5 does)."""
    data = bytearray(freight.dumps(np.arange(100_000, dtype=np.float64)))
    out = freight.loads(data)
    data[:] = b"\x00" * len(data)
    assert not out.any()


def test_copy_contradicts_zero_copy():
    with pytest.raises(freight.OptionError, match="copy=True and zero_copy=True contradict"):
        freight.loads(freight.dumps(np.arange(10)), copy=True, zero_copy=True)


@pytest.mark.parametrize("value", [("inc", 5), 6, {"a": [1.5, "x", b"y", None]}], ids=repr)
def test_copy_decodes_builtins_from_any_buffer(value):
    """Builtins from a borrowed buffer take the fast path (no bytes copy first) and own their
    memory: the buffer may change afterwards."""
    data = bytearray(freight.dumps(value))
    out = freight.loads(data, copy=True)
    data[:] = b"\x00" * len(data)
    assert out == value
