"""Issue 23, "two names for one idea": ``freight.load(path, mmap=True)`` means what
``Store.load(key, mmap=True)`` means (map the file, arrays as read-only views of it); a mapped
load of compressed frames, which cannot be viewed, says so with a ``FreightWarning``. The header
reader behind that warning agrees with ``freight.inspect``."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import freight
import freight.storage as fs
from freight import _files as files

KEY = b"k" * 32


def test_load_with_mmap_views_the_file_whatever_its_size(tmp_path):
    arr = np.arange(100.0)  # far below the 1 MiB from which load maps a file anyway
    path = tmp_path / "a.frt"
    freight.dump(arr, path)
    view = freight.load(path, mmap=True)
    assert np.array_equal(view, arr) and not view.flags.writeable and not view.flags.owndata
    copy = freight.load(path, mmap=True, zero_copy=False)  # an explicit option wins, as on a store
    assert np.array_equal(copy, arr) and copy.flags.writeable
    f = freight.Freight()
    assert not f.load(path, mmap=True).flags.writeable


def test_load_with_mmap_of_a_file_object(tmp_path):
    path = tmp_path / "a.frt"
    freight.dump(np.arange(10), path)
    with open(path, "rb") as fh:
        assert np.array_equal(freight.load(fh, mmap=True), np.arange(10))
    with pytest.raises(freight.StorageError, match="has no file descriptor; pass a path"):
        freight.load(io.BytesIO(path.read_bytes()), mmap=True)


def test_mmap_of_an_empty_file_is_not_a_payload(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(freight.DeserializationError, match="not a freight payload"):
        freight.load(tmp_path / "empty", mmap=True)


def test_a_mapped_load_of_a_compressed_file_warns(tmp_path):
    path = tmp_path / "z.frt"
    freight.dump({"z": np.zeros(100_000), "n": 3}, path, compression="zstd")
    with pytest.warns(freight.FreightWarning) as record:
        value = freight.load(path, mmap=True)
    assert np.array_equal(value["z"], np.zeros(100_000))
    assert str(record[0].message) == (
        f"{path}: 1 of its frames is compressed, and mmap=True cannot view compressed data: it was "
        "decompressed into new memory (a writable copy, not a view of the file); write it with "
        'dump(obj, path, compression="none") to load it mapped'
    )
    assert record[0].filename == __file__  # points at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        freight.load(path)  # not mapped: nothing to say


def test_a_mapped_store_load_of_a_compressed_value_warns_naming_the_key(tmp_path):
    store = fs.open(tmp_path / "store")  # compression="auto": compresses large frames that shrink
    compressible = np.zeros(1 << 18)  # 2 MiB
    store.save("run-3/grid", compressible)
    assert store.info("run-3/grid")["size"] < compressible.nbytes
    with pytest.warns(freight.FreightWarning, match=r'"run-3/grid": 1 of its frames is compressed') as record:
        assert np.array_equal(store.load("run-3/grid", mmap=True), compressible)
    assert 'save it with compression="none" (or open the store with compression=None)' in str(record[0].message)
    store.save("run-3/grid", compressible, compression="none")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        view = store.load("run-3/grid", mmap=True)
    assert np.array_equal(view, compressible) and not view.flags.writeable and not view.flags.owndata


@pytest.mark.parametrize(
    "make",
    [
        lambda: freight.dumps(1),
        lambda: freight.dumps([np.arange(10), np.arange(5.0)]),
        lambda: freight.dumps(np.zeros(300_000), compression="lz4", checksum=True),
        lambda: freight.dumps({"a": np.zeros(300_000), "b": np.arange(300_000)}, compression="zstd"),
        lambda: freight.dumps({"a": np.zeros(300_000), "f": lambda: 1}, compression="lz4", key=KEY),
        lambda: freight.dumps(np.frombuffer(np.random.default_rng(0).bytes(1 << 16), np.uint8), compression="lz4"),
        lambda: freight.dumps(np.arange(200_000, dtype=np.int64), compression=("zstd", 3)),
    ],
)
def test_the_header_reader_counts_compressed_frames_as_inspect_does(make):
    pytest.importorskip("cloudpickle")
    blob = make()
    expected = sum(f["codec"] != "none" for f in freight.inspect(blob)["frames"])
    assert files.compressed_frames(blob) == expected


def test_the_header_reader_of_a_payload_with_tags_and_versions():
    pd = pytest.importorskip("pandas")
    blob = freight.dumps(pd.DataFrame({"a": np.zeros(200_000), "s": ["x"] * 200_000}), compression="lz4")
    info = freight.inspect(blob)
    assert info["tags"] and info["producer"]  # the meta section the reader skips
    assert files.compressed_frames(blob) == sum(f["codec"] != "none" for f in info["frames"])


@pytest.mark.parametrize("data", [b"", b"\x89FRT", b"not a payload", b"\x89FRT\x01\x06\xff\xff", bytes(64)])
def test_the_header_reader_says_none_for_what_is_not_a_readable_header(data):
    assert files.compressed_frames(data) is None
