"""Lazy reads of damaged, truncated, replaced and deleted stored values (issue 31 §2), on every
backend of conftest.py (``store_location``): a flipped header byte is refused at open, a flipped
frame byte fails only the reads that use its block, a truncated object is refused at open, and an
object replaced or deleted after open is refused, never mixed (a local file stays mapped: the
version opened stays readable)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import freight
from support.lazy_store import SHA_BLOCK, XXH3_BLOCK
from support.lazy_store import flip as _flip
from support.lazy_store import layout as _layout
from support.lazy_store import lazy_store as _store
from support.lazy_store import raw as _raw

# -- tampering, truncation, replacement ------------------------------------------------------------


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_a_flipped_header_byte_is_refused_at_open(store_location, signed):
    store = _store(store_location, signed)
    store.save("v", {"a": np.arange(300_000, dtype="f8"), "name": "some string in the tree"})
    data = _raw(store, "v")
    header = _layout(data)
    tree_end = header.length - 8 - (32 if signed else 0)  # before the checksum (and signature)
    for offset in (tree_end - 3, 10, header.length - 1):
        store.put_bytes("t", bytes(_flip(bytearray(data), offset)))
        with pytest.raises(freight.IntegrityError):
            store.lazy("t")


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_a_flipped_frame_byte_fails_the_block_read_and_spares_the_others(store_location, signed):
    store = _store(store_location, signed)
    arr = np.arange(600_000, dtype="f8")  # 4.8 MB
    store.save("v", {"arr": arr, "small": np.arange(100)})
    data = _raw(store, "v")
    header = _layout(data)
    block = SHA_BLOCK if signed else XXH3_BLOCK
    start, _ = header.frames[0]
    bad_block = 5
    store.put_bytes("v", bytes(_flip(data, start + bad_block * block + 100)))
    lv = store.lazy("v")
    rows = block // 8
    np.testing.assert_array_equal(lv["arr"][: rows * 2], arr[: rows * 2])  # blocks 0-1: not touched
    np.testing.assert_array_equal(lv["arr"][-10:], arr[-10:])
    np.testing.assert_array_equal(lv["small"].load(), np.arange(100))
    with pytest.raises(freight.IntegrityError, match=f"block {bad_block} of frame 0"):
        lv["arr"][bad_block * rows + 3 : bad_block * rows + 4]
    with pytest.raises(freight.IntegrityError):
        lv["arr"].load()
    with pytest.raises(freight.IntegrityError):
        lv.load()
    with pytest.raises(freight.IntegrityError):
        store.load("v")


@pytest.mark.parametrize("rows", [100, 300_000], ids=["checksum", "block digests"])
def test_a_flipped_byte_in_a_column_fails_that_column_only(store_location, rows):
    """Columns read alone are checked as a whole load checks them (a frame of 800 bytes by its
    checksum, one of 2.4 MB by its 64 KiB block digests, on all cores): a flipped byte fails
    exactly the reads that use its column; ``verify=False`` is the explicit way around it."""
    store = _store(store_location)
    table = pa.table({"x": np.arange(rows, dtype="f8"), "y": np.arange(rows, dtype="f8") * 2})
    store.save("v", {"t": table})
    data = _raw(store, "v")
    start, end = _layout(data).frames[-1]  # column y's values
    store.put_bytes("v", bytes(_flip(data, (start + end) // 2)))
    lv = store.lazy("v")
    assert lv.columns(["x"], entry="t").column("x").equals(table.column("x"))
    with pytest.raises(freight.IntegrityError, match="frame 1"):
        lv.columns(["y"], entry="t")
    with pytest.raises(freight.IntegrityError):
        lv.columns(["y", "x"], entry="t")
    got = store.lazy("v", verify=False).columns(["y"], entry="t").column("y")
    assert len(got) == rows and not got.equals(table.column("y"))
    with pytest.raises(freight.IntegrityError):
        store.load("v")


def test_a_flipped_byte_in_a_small_frame_fails_that_entry_only(store_location):
    store = _store(store_location)
    store.save("v", {"a": np.arange(1000), "b": np.arange(1000, 2000), "c": b"z" * 100_000})
    data = _raw(store, "v")
    header = _layout(data)
    start, _ = header.frames[1]
    store.put_bytes("v", bytes(_flip(data, start + 17)))
    lv = store.lazy("v")
    np.testing.assert_array_equal(lv["a"].load(), np.arange(1000))
    assert lv["c"] == b"z" * 100_000
    with pytest.raises(freight.IntegrityError):
        lv["b"][0:2]  # one checksum over the frame: read whole, refused
    with pytest.raises(freight.IntegrityError):
        lv["b"].load()


def test_a_flipped_byte_in_a_compressed_block_fails_the_slice_that_uses_it(store_location):
    store = _store(store_location)
    rng = np.random.default_rng(0)
    arr = np.round(rng.normal(size=1_000_000), 1)
    store.save("v", {"arr": arr}, compression="lz4")
    data = _raw(store, "v")
    header = _layout(data)
    start, end = header.frames[0]
    store.put_bytes("v", bytes(_flip(data, end - 1000)))  # inside the last compressed block
    lv = store.lazy("v")
    np.testing.assert_array_equal(lv["arr"][10:20], arr[10:20])
    with pytest.raises(freight.IntegrityError, match="of frame 0"):
        lv["arr"][-5:]


def test_tampering_in_the_s3_servers_files(store_location):
    """The object edited where the server keeps it (same key, no new put through the API)."""
    if store_location.backend == "memory":
        pytest.skip("no files to edit")
    store = _store(store_location)
    arr = np.arange(600_000, dtype="f8")
    store.save("v", {"arr": arr})
    path = store_location.root / "v"
    data = bytearray(path.read_bytes())
    start, _ = _layout(data).frames[0]
    path.write_bytes(bytes(_flip(data, start + 3 * XXH3_BLOCK)))
    lv = store.lazy("v")
    np.testing.assert_array_equal(lv["arr"][:100], arr[:100])
    with pytest.raises(freight.IntegrityError, match="block 3 of frame 0"):
        lv["arr"].load()


@pytest.mark.parametrize("cut", [-100, -1, 100, 40, 10, 3, 0], ids=lambda c: f"cut{c}")
def test_truncated_objects_are_refused_at_open(store_location, cut):
    store = _store(store_location)
    store.save("v", {"a": np.arange(300_000, dtype="f8"), "name": "x" * 30})
    data = bytes(_raw(store, "v"))
    store.put_bytes("t", data[:cut])
    with pytest.raises(freight.DeserializationError, match="truncated|too short|magic") as info:
        store.lazy("t")
    if len(data[:cut]) > 6:
        assert "truncated" in str(info.value) or "too short" in str(info.value)


@pytest.mark.parametrize("replacement", ["same size", "smaller"])
def test_an_object_replaced_after_open_is_refused_never_mixed(store_location, replacement):
    # "smaller" on S3: the server answers 416 (the range lies past the new object) before it
    # checks the pinned etag; the store then sees the new version and says "replaced".
    rng = np.random.default_rng(3)
    store = _store(store_location)
    store.save("v", {"a": rng.random(300_000), "b": np.arange(1000.0), "s": "old"})
    old = store.load("v")
    lv = store.lazy("v")
    arr = lv["a"]
    assert lv["s"] == "old"  # in the header: already read
    if replacement == "same size":
        store.save("v", {"a": rng.random(300_000), "b": np.zeros(1000), "s": "new"})
    else:
        store.save("v", {"a": np.zeros(300_000), "b": np.zeros(1000), "s": "new"}, compression="auto")
    if store_location.backend == "file":
        # The file is mapped: the version opened stays readable, whole.
        np.testing.assert_array_equal(arr[10:20], old["a"][10:20])
        np.testing.assert_array_equal(lv["b"].load(), np.arange(1000.0))
        np.testing.assert_array_equal(lv.load()["a"], old["a"])
        assert store.lazy("v")["s"] == "new"
        return
    for read in (lambda: arr[10:20], lambda: arr.load(), lambda: lv["b"].load(), lambda: lv.load()):
        with pytest.raises(freight.StorageError, match="replaced while it was being read in parts"):
            read()
    assert store.lazy("v")["s"] == "new"
    np.testing.assert_array_equal(store.lazy("v")["b"].load(), np.zeros(1000))


def test_an_object_deleted_after_open_is_an_error(store_location):
    store = _store(store_location)
    store.save("v", {"a": np.arange(300_000, dtype="f8")})
    lv = store.lazy("v")
    store.delete("v")
    if store_location.backend == "file":
        np.testing.assert_array_equal(lv["a"][:3], [0.0, 1.0, 2.0])  # still mapped
        return
    with pytest.raises(freight.StorageError):
        lv["a"][:3]
