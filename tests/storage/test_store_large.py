"""Large values (over the 16 MiB single-PUT limit: streamed as multipart uploads / staged files) on
each backend, create-only saves of them, info() on them, and mmap loads on a local folder."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest

import freight
import freight.storage as fs
from freight.exceptions import IntegrityError, KeyExistsError, KeyNotFoundError, StorageError

MiB = 1 << 20
SINGLE_PUT_MAX = 16 * MiB  # crates/freight-store/src/store.rs
KEY = b"k" * 32


@pytest.fixture(scope="module")
def big() -> np.ndarray:
    """40 MiB of float64, distinct in every element (a misplaced part would show)."""
    return np.arange(5 * MiB, dtype=np.float64) * 1.5 + 0.25


@pytest.fixture(scope="module")
def other_big() -> np.ndarray:
    return -np.arange(5 * MiB, dtype=np.float64)


def _no_staging_left(store_location, store) -> None:
    assert not any(".freight-staging-" in name for name in store.list())
    files = store_location.files()
    if files is not None:
        leftovers = [path for path in files if ".freight-staging-" in path or "#" in path]
        assert leftovers == [], leftovers


def test_large_value_round_trips(store_location, big):
    store = store_location.open()
    store.save("big", big, compression="none")
    out = store.load("big")
    assert out.dtype == big.dtype and out.shape == big.shape
    assert np.array_equal(out, big)
    info = store.info("big")
    assert info["size"] > 40 * MiB and [f["length"] for f in info["frames"]] == [big.nbytes]
    files = store_location.files()
    if files is not None:
        assert list(files.values()) == [info["size"]]
    assert store.list() == ["big"]
    _no_staging_left(store_location, store)


def test_large_values_of_several_frames_and_compressions(store_location, big):
    """Several frames with padding between them, parts that end mid-frame, a value just over the
    single-PUT limit, and a compressed value still over it."""
    store = store_location.open()
    rng = np.random.default_rng(3)
    several = {
        "a": big[: 3 * MiB],  # 24 MiB
        "b": np.asfortranarray(rng.integers(0, 1000, size=(1001, 1003), dtype=np.int32)),
        "c": "text between frames",
        "d": rng.bytes(5 * MiB + 7),
    }
    just_over = np.arange(SINGLE_PUT_MAX, dtype=np.uint8)  # header + 16 MiB > the limit
    noisy = rng.integers(0, 256, size=20 * MiB, dtype=np.uint8)  # incompressible: stays large
    store.save("several", several, compression="none")
    store.save("just-over", just_over, compression="none")
    # Under the limit with its header (the frame's 256 xxh3 block digests are 2 KiB of it).
    under = np.arange(SINGLE_PUT_MAX - 4096, dtype=np.uint8)
    store.save("exactly-at", under, compression="none")
    for compression in ("lz4", "zstd", "auto"):
        store.save(f"noisy-{compression}", noisy, compression=compression)
    out = store.load("several")
    assert out.keys() == several.keys()
    assert np.array_equal(out["a"], several["a"])
    assert out["b"].flags.f_contiguous and np.array_equal(out["b"], several["b"])
    assert out["c"] == several["c"] and out["d"] == several["d"]
    assert np.array_equal(store.load("just-over"), just_over)
    assert store.info("just-over")["size"] > SINGLE_PUT_MAX
    assert store.info("exactly-at")["size"] <= SINGLE_PUT_MAX
    assert np.array_equal(store.load("exactly-at"), under)
    for compression in ("lz4", "zstd", "auto"):
        assert store.info(f"noisy-{compression}")["size"] > SINGLE_PUT_MAX
        assert np.array_equal(store.load(f"noisy-{compression}"), noisy)
    _no_staging_left(store_location, store)


def test_large_if_absent(store_location, big, other_big):
    store = store_location.open()
    store.save("big", big, if_absent=True, compression="none")  # absent: stored
    assert np.array_equal(store.load("big"), big)
    with pytest.raises(KeyExistsError) as exc:
        store.save("big", other_big, if_absent=True, compression="none")
    assert isinstance(exc.value, FileExistsError) and isinstance(exc.value, StorageError)
    assert '"big"' in str(exc.value) and store.url in str(exc.value)
    assert np.array_equal(store.load("big"), big)  # the old value, intact
    store.save("small", 1)
    with pytest.raises(KeyExistsError):  # also when the value present is small
        store.save("small", other_big, if_absent=True, compression="none")
    assert store.load("small") == 1
    assert store.list() == ["big", "small"]
    _no_staging_left(store_location, store)
    store.save("big", other_big, compression="none")  # a plain save still replaces it
    assert np.array_equal(store.load("big"), other_big)
    _no_staging_left(store_location, store)


def test_small_if_absent(store):
    store.save("k", "first", if_absent=True)
    with pytest.raises(KeyExistsError):
        store.save("k", "second", if_absent=True)
    assert store.load("k") == "first"
    store.delete("k")
    store.save("k", "third", if_absent=True)
    assert store.load("k") == "third" and store.list() == ["k"]


def test_large_signed_value(store_location, big):
    signer = store_location.open(freight=freight.Freight(key=KEY))
    signer.save("big", {"x": big, "tag": "signed"}, compression="none")
    assert signer.info("big")["signed"] is True
    out = signer.load("big")
    assert np.array_equal(out["x"], big) and out["tag"] == "signed"
    with pytest.raises(IntegrityError):
        store_location.open(freight=freight.Freight(key=b"w" * 32)).load("big")


def test_info_of_a_large_value(store_location, big):
    store = store_location.open()
    value = {"x": big, "df_like": {"cols": ["a", "b"]}}
    store.save("big", value, compression="none")
    info = store.info("big")
    expected = freight.inspect(freight.dumps(value, compression="none", checksum=True))
    assert info["size"] == expected["total_length"] > 40 * MiB
    assert [f["length"] for f in info["frames"]] == [big.nbytes]
    # A small header: the tree, and 8 bytes of xxh3 digest per 64 KiB block of the frame.
    assert info["header_length"] == expected["header_length"] < 1024 + 8 * (big.nbytes // 65536 + 1)
    assert info["tags"] == [] and info["needs_pickle"] is False and info["signed"] is False
    files = store_location.files()
    if files is not None:
        assert list(files.values()) == [info["size"]]


def test_info_with_a_large_header(store):
    """A header longer than the first ranged read (64 KiB) is read in full."""
    value = {f"key-{i:06d}": i for i in range(20_000)}
    store.save("wide", value, compression="none")
    info = store.info("wide")
    assert info["header_length"] == freight.inspect(freight.dumps(value, checksum=True))["header_length"]
    assert store.load("wide") == value


# -- mmap -----------------------------------------------------------------------------------------


def _mappings_of(path: Path) -> list[tuple[int, int]]:
    """The address ranges at which this process maps ``path`` (Linux /proc/self/maps)."""
    target = os.path.realpath(path)
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].rstrip("\n") == target:
                start, end = (int(x, 16) for x in fields[0].split("-"))
                ranges.append((start, end))
    return ranges


def _inside(array: np.ndarray, ranges: list[tuple[int, int]]) -> bool:
    low = array.__array_interface__["data"][0]
    high = low + array.nbytes
    return any(start <= low and high <= end for start, end in ranges)


needs_proc_maps = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")


@pytest.fixture
def local(tmp_path):
    return fs.open(tmp_path / "store")


@needs_proc_maps
def test_mmap_arrays_view_the_stored_file(local, tmp_path, big):
    fortran = np.asfortranarray(big[: 1000 * 1000].reshape(1000, 1000))
    local.save("run/v", {"big": big, "fortran": fortran, "label": "x"}, compression="none")
    path = tmp_path / "store" / "run" / "v"
    assert _mappings_of(path) == []
    out = local.load("run/v", mmap=True)
    ranges = _mappings_of(path)
    assert ranges, "the file is not mapped"
    for name in ("big", "fortran"):
        array = out[name]
        assert _inside(array, ranges), name
        assert not array.flags.writeable
        with pytest.raises(ValueError):
            array[0] = 1.0
    assert out["fortran"].flags.f_contiguous and np.array_equal(out["fortran"], fortran)
    assert np.array_equal(out["big"], big) and out["label"] == "x"
    plain = local.load("run/v")  # without mmap: a copy in memory
    assert not _inside(plain["big"], ranges) and plain["big"].flags.writeable


@needs_proc_maps
def test_mmap_lives_as_long_as_the_arrays(local, tmp_path, big, other_big):
    local.save("v", big, compression="none")
    path = tmp_path / "store" / "v"
    mapped = local.load("v", mmap=True)
    again = local.load("v", mmap=True)
    assert _inside(mapped, _mappings_of(path)) and _inside(again, _mappings_of(path))
    # Replacing or deleting the value does not change what the arrays show (a new file).
    local.save("v", other_big, compression="none")
    assert np.array_equal(local.load("v"), other_big)
    assert np.array_equal(mapped, big)
    local.delete("v")
    assert np.array_equal(again, big)
    del again
    gc.collect()
    local.save("w", big[:1000], compression="none")
    assert np.array_equal(mapped, big)
    del mapped
    gc.collect()
    assert _mappings_of(path) == [] and not any(
        "(deleted)" in line and str(tmp_path) in line for line in Path("/proc/self/maps").read_text().splitlines()
    )


def test_mmap_of_small_compressed_and_signed_values(tmp_path):
    store = fs.open(tmp_path / "store", freight=freight.Freight(key=KEY))
    store.save("small", np.arange(5))
    store.save("scalar", 3)
    store.save("zstd", np.zeros(MiB), compression="zstd")
    assert np.array_equal(store.load("small", mmap=True), np.arange(5))
    assert store.load("scalar", mmap=True) == 3
    with pytest.warns(freight.FreightWarning, match='"zstd": 1 of its frames is compressed'):
        assert np.array_equal(store.load("zstd", mmap=True), np.zeros(MiB))  # a copy, said so
    path = tmp_path / "store" / "small"
    data = bytearray(path.read_bytes())
    data[-40] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError):  # the signature is checked on mapped loads too
        store.load("small", mmap=True)


def test_mmap_verify_catches_corruption(local, tmp_path):
    local.save("v", np.arange(10_000, dtype=np.int64), compression="none")
    path = tmp_path / "store" / "v"
    data = bytearray(path.read_bytes())
    data[-8] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError):
        local.load("v")
    with pytest.raises(IntegrityError):
        local.load("v", mmap=True, verify=True)


def test_mmap_of_a_missing_key(local):
    with pytest.raises(KeyNotFoundError):
        local.load("missing", mmap=True)


def test_mmap_only_on_a_local_store(store):
    store.save("v", np.arange(10))
    if store.backend == "file":
        assert np.array_equal(store.load("v", mmap=True), np.arange(10))
        return
    with pytest.raises(StorageError) as exc:
        store.load("v", mmap=True)
    message = str(exc.value)
    assert "file://" in message and "mmap=True" in message and store.url in message
    assert not isinstance(exc.value, KeyNotFoundError)
    with pytest.raises(StorageError, match="file://"):
        store.load("missing", mmap=True)
    assert np.array_equal(store.load("v"), np.arange(10))
