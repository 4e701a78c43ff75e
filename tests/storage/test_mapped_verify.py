"""Mapped and zero-copy loads check the checksums a payload carries, before returning anything.

``dump`` and ``Store.save`` write frame checksums; a byte flipped in the file must make
``load(mmap=True)`` and ``Store.load(mmap=True)`` raise ``IntegrityError``, as ``load()`` does,
rather than return other numbers. ``verify=False`` is the explicit way to skip the check (a
constant-time view of bytes the caller trusts).
"""

from __future__ import annotations

import numpy as np
import pytest

import freight
import freight.storage

ARRAY = np.arange(1_000_000, dtype=np.float64)  # 8 MB: one frame


def _flip_inside_the_array(path) -> None:
    data = bytearray(path.read_bytes())
    # The array's frame ends the file: the middle of the last ARRAY.nbytes bytes is inside it.
    position = len(data) - ARRAY.nbytes // 2
    assert data[position - 8 : position + 8] in ARRAY.tobytes()
    data[position] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.fixture
def damaged_file(tmp_path):
    path = tmp_path / "value.frt"
    freight.dump({"x": ARRAY}, path)
    frame = freight.inspect(path.read_bytes())["frames"][0]
    assert frame["digests"] == ("xxh3", 65536)  # checksummed: over 1 MiB, by 64 KiB blocks
    _flip_inside_the_array(path)
    return path


def test_load_mmap_refuses_a_damaged_file(damaged_file):
    with pytest.raises(freight.IntegrityError):
        freight.load(damaged_file)
    with pytest.raises(freight.IntegrityError):
        freight.load(damaged_file, mmap=True)
    with pytest.raises(freight.IntegrityError):
        freight.load(damaged_file, zero_copy=True)


def test_verify_false_is_the_explicit_constant_time_way(damaged_file):
    got = freight.load(damaged_file, mmap=True, verify=False)["x"]
    assert not got.flags.writeable  # still a view of the mapping
    assert np.flatnonzero(got != ARRAY).size == 1  # exactly the flipped element: nothing checked


def test_mapped_load_of_an_intact_file_is_a_checked_view(tmp_path):
    path = tmp_path / "value.frt"
    freight.dump({"x": ARRAY}, path)
    got = freight.load(path, mmap=True)["x"]
    assert not got.flags.writeable and not got.flags.owndata  # a view, not a copy
    assert (got == ARRAY).all()


def test_loads_zero_copy_verifies_checksummed_payloads():
    blob = bytearray(freight.dumps(ARRAY, checksum=True))
    blob[len(blob) - ARRAY.nbytes // 2] ^= 0x10
    with pytest.raises(freight.IntegrityError):
        freight.loads(bytes(blob), zero_copy=True)
    with pytest.raises(freight.IntegrityError):
        header = freight.dumps_frames(ARRAY, checksum=True)[0]
        freight.loads_frames([header, bytes(blob)[-ARRAY.nbytes :]], zero_copy=True)
    assert freight.loads(bytes(blob), zero_copy=True, verify=False).shape == ARRAY.shape


def test_store_load_mmap_refuses_a_damaged_value(tmp_path):
    store = freight.storage.open(str(tmp_path / "store"), compression="none")
    store.save("v", {"x": ARRAY})
    (path,) = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    _flip_inside_the_array(path)
    with pytest.raises(freight.IntegrityError):
        store.load("v")
    with pytest.raises(freight.IntegrityError):
        store.load("v", mmap=True)
    got = store.load("v", mmap=True, verify=False)["x"]
    assert np.flatnonzero(got != ARRAY).size == 1
