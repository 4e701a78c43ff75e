"""freight._files: the file I/O behind dump/load (atomic writes, memory-mapped reads)."""

from __future__ import annotations

import io
import mmap

import numpy as np
import pytest

import freight
from freight import _files as files


def test_small_files_are_read_and_large_ones_memory_mapped(tmp_path):
    small, large = tmp_path / "small.frt", tmp_path / "large.frt"
    freight.dump(np.arange(10.0), small)
    freight.dump(np.arange(files.MMAP_MIN // 8 + 1, dtype=np.float64), large)
    assert type(files.read_payload(small)) is bytes
    mapped = files.read_payload(large)
    assert isinstance(mapped, mmap.mmap) and len(mapped) == large.stat().st_size


def test_a_zero_copy_load_of_a_large_file_views_the_mapped_file(tmp_path):
    arr = np.arange(files.MMAP_MIN // 8 * 2, dtype=np.float64)
    path = tmp_path / "arr.frt"
    freight.dump(arr, path)
    view = freight.load(path, zero_copy=True)
    assert np.array_equal(view, arr) and not view.flags.writeable and not view.flags.owndata
    copy = freight.load(path)  # a writable array is copied out of the map
    assert np.array_equal(copy, arr) and copy.flags.writeable


def test_write_replaces_the_file_atomically_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "obj.frt"
    path.write_bytes(b"old contents")
    files.write_payload(freight.dumps([1, 2]), path)
    assert freight.load(path) == [1, 2]
    assert [p.name for p in tmp_path.iterdir()] == ["obj.frt"]


def test_file_objects_are_written_and_read_as_they_are():
    buf = io.BytesIO()
    files.write_payload(b"payload", buf)
    assert buf.getvalue() == b"payload"
    buf.seek(0)
    assert files.read_payload(buf) == b"payload"


def test_a_text_file_is_refused_with_what_to_do():
    with pytest.raises(freight.DeserializationError, match="open it with mode 'rb'"):
        files.read_payload(io.StringIO("text"))


def test_instance_dump_and_load_keep_their_options(tmp_path):
    f = freight.Freight(compression="zstd", allow_pickle=False)
    path = tmp_path / "obj.frt"
    f.dump(np.arange(100_000.0), path, checksum=False)
    frame = freight.inspect(path.read_bytes())["frames"][0]
    # A compressed frame keeps its checksum even with checksum=False (it guards the decompressor).
    assert frame["codec"] == "zstd" and frame["checksum"] is not None
    f.dump(np.frombuffer(np.random.default_rng(0).bytes(8000), np.uint8), path, checksum=False)  # stored raw
    frame = freight.inspect(path.read_bytes())["frames"][0]
    assert frame["codec"] == "none" and frame["checksum"] is None
    f.dump(np.zeros(100_000), path)
    assert freight.inspect(path.read_bytes())["frames"][0]["checksum"] is not None  # dump: on by default
    assert np.array_equal(f.load(path), np.zeros(100_000))
    plain = tmp_path / "plain.frt"
    freight.dump(np.arange(1000.0), plain)
    assert freight.inspect(plain.read_bytes())["frames"][0]["checksum"] is not None
    freight.dump(lambda: 1, path)
    with pytest.raises(freight.UnsafePayloadError):
        f.load(path)
    assert f.load(path, allow_pickle=True)() == 1


def test_a_dump_never_writes_over_another_dumps_temporary_file(tmp_path):
    """Every write of a path used the temporary name ``<path>.<pid>.tmp``: two threads dumping to
    one path opened the same temporary file (truncating each other's bytes), and the second
    rename found it gone: a PathNotFoundError saying the folder does not exist (10 rounds of 4
    threads: 24 such errors)."""
    import os

    path = tmp_path / "v.frt"
    in_progress = tmp_path / f"v.frt.{os.getpid()}.tmp"  # a dump of this process, still writing
    in_progress.write_bytes(b"half a payload")
    freight.dump([1, 2], path)
    assert freight.load(path) == [1, 2]
    assert in_progress.read_bytes() == b"half a payload"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.frt", in_progress.name]


def test_threads_dumping_to_one_path_each_succeed_and_one_value_stays(tmp_path):
    import threading

    path = tmp_path / "v.frt"
    values = [np.full(500_000, i, dtype=np.int64) for i in range(4)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(values))

    def dump(value):
        start.wait()
        try:
            freight.dump(value, path, compression="none")
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=dump, args=(v,)) for v in values]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    loaded = freight.load(path)
    assert any(np.array_equal(loaded, v) for v in values)
    assert [p.name for p in tmp_path.iterdir()] == ["v.frt"]
