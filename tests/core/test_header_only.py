"""``_freight.compressed_frames``: the header-only count behind the ``mmap=True`` warning, read by
freight-core's header parser (the Python package reads no flag bit or frame table by hand)."""

from __future__ import annotations

import numpy as np
import pytest

import freight
from freight._files import compressed_frames


def _codecs(payload: bytes) -> list[str]:
    return [frame["codec"] for frame in freight.inspect(payload)["frames"]]


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
@pytest.mark.parametrize("checksum", [False, True])
@pytest.mark.parametrize("key", [None, b"k" * 32])
def test_counts_what_inspect_reports(compression: str, checksum: bool, key: bytes | None) -> None:
    value = {"a": np.zeros(50_000), "b": np.arange(50_000), "tags": ("x", 1)}
    payload = freight.dumps(value, compression=compression, checksum=checksum, key=key)
    expected = sum(codec != "none" for codec in _codecs(payload))
    assert compressed_frames(payload) == expected
    assert expected == (0 if compression == "none" else 2)


def test_builtins_have_no_frames() -> None:
    assert compressed_frames(freight.dumps([1, "two", 3.0])) == 0


def test_reads_any_buffer_and_only_the_header() -> None:
    payload = freight.dumps(np.zeros(100_000), compression="lz4")
    # A corrupt frame does not matter: only the header is read.
    damaged = bytearray(payload)
    damaged[-10:] = b"\xff" * 10
    assert compressed_frames(memoryview(damaged)) == 1


@pytest.mark.parametrize("data", [b"", b"xx", b"\x89FRT", b"\x89FRT\x09", b"not a payload at all"])
def test_none_when_the_header_cannot_be_read(data: bytes) -> None:
    assert compressed_frames(data) is None


def test_none_for_a_truncated_header() -> None:
    payload = freight.dumps({"a": np.zeros(1000)}, compression="lz4")
    assert compressed_frames(payload[:12]) is None
