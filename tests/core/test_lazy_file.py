"""``freight.lazy(path)``: a payload in a local file, opened without reading it (issue 31 §2).

The file is mapped; these tests check what is read (``bytes_read``) for files written by
``freight.dump`` (checksums: xxh3 block digests over 1 MiB), with ``checksum=False`` (no
checksum: only the rows are read), by ``dumps`` written by hand, compressed, and signed; that a
byte flipped on disk fails exactly the reads that use it; that truncated and foreign files are
refused at open; and that a file replaced after opening keeps reading the version opened.
Stores (local, memory, S3) are tested in tests/storage/test_lazy.py."""

from __future__ import annotations

import os

import numpy as np
import pytest

import freight
from freight import _freight

KEY = b"k" * 32
XXH3_BLOCK = 64 << 10
SHA_BLOCK = 256 << 10
FIRST_READ = 64 << 10  # what opening a stored object reads (or the whole object, if smaller)


def _frames(path) -> list[tuple[int, int]]:
    data = open(path, "rb").read()
    return _freight.LazyHeader(data, len(data)).frames


def _flip(path, offset: int) -> None:
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0x01
    with open(path, "r+b") as f:  # in place: the same file, one byte changed
        f.seek(offset)
        f.write(bytes([data[offset]]))


class Box:
    def __init__(self, value):
        self.value = value


class BoxSerializer:
    tag = "test.lazy.box"
    types = (Box,)

    def serialize(self, box):
        return {"value": box.value}, []

    def deserialize(self, meta, frames):
        return Box(meta["value"])


def test_a_dumped_dict_reads_entry_by_entry(tmp_path):
    path = tmp_path / "v.frt"
    value = {"a": np.arange(1_000_000, dtype="f8"), "b": {"c": np.ones((10, 3), "i4"), 2: "two"}, "s": "x"}
    freight.dump(value, path)
    lv = freight.lazy(path)
    # A mapped file counts the bytes used (the header), not the 64 KiB a store's first read asks.
    assert lv.bytes_read == _freight.header_length(path.read_bytes()[:FIRST_READ]) < FIRST_READ
    assert lv.keys() == ["a", "b", "s"] and lv.kind == "dict"
    assert lv["s"] == "x" and lv["b"][2] == "two"
    np.testing.assert_array_equal(lv["b"]["c"].load(), value["b"]["c"])
    np.testing.assert_array_equal(lv["a"][XXH3_BLOCK // 8 - 1 : XXH3_BLOCK // 8 + 1], [8191.0, 8192.0])
    assert lv.bytes_read < FIRST_READ + 4 * XXH3_BLOCK
    whole = lv.load()
    np.testing.assert_array_equal(whole["a"], value["a"])
    assert "LazyValue" in repr(lv) and str(path) in repr(lv)
    assert "LazyArray" in repr(lv["a"])


def test_freight_lazy_takes_paths_as_str_and_pathlike(tmp_path):
    path = tmp_path / "v.frt"
    freight.dump([1, np.arange(3)], path)
    assert freight.lazy(str(path))[0] == 1
    assert freight.lazy(path)[0] == 1


@pytest.mark.parametrize("how", ["dump checksum=False", "dumps written by hand"])
def test_frames_without_checksums_read_only_the_rows_asked_for(tmp_path, how):
    path = tmp_path / "v.frt"
    arr = np.arange(2_000_000, dtype="f8").reshape(1_000_000, 2)
    value = {"arr": arr, "other": np.arange(10)}
    if how == "dump checksum=False":
        freight.dump(value, path, checksum=False)
    else:
        path.write_bytes(freight.dumps(value))
    lv = freight.lazy(path)
    for s in [slice(0, 1), slice(123_456, 124_456), slice(999_999, None), slice(5, 5)]:
        before = lv.bytes_read
        np.testing.assert_array_equal(lv["arr"][s], arr[s])
        assert lv.bytes_read - before == len(range(*s.indices(len(arr)))) * 16
    np.testing.assert_array_equal(lv["arr"][-3:, 1], arr[-3:, 1])
    np.testing.assert_array_equal(lv["arr"][7, 1], arr[7, 1])


def test_row_indices_of_every_integer_kind_read_one_row_and_masks_index_as_numpy_does(tmp_path):
    path = tmp_path / "v.frt"
    arr = np.arange(3_000_000, dtype="f8").reshape(1_000_000, 3)
    freight.dump({"arr": arr}, path, checksum=False)
    lv = freight.lazy(path)
    la = lv["arr"]
    for i in (np.int64(5), np.uint32(7), np.int8(-1)):
        before = lv.bytes_read
        np.testing.assert_array_equal(la[i], arr[i])
        assert lv.bytes_read - before == 24  # one row, not the whole array
        np.testing.assert_array_equal(la[i, np.int16(1)], arr[i, 1])
    np.testing.assert_array_equal(la[np.int64(2) : np.int64(4)], arr[2:4])
    assert la[True].shape == arr[True].shape == (1, 1_000_000, 3)  # a mask, not row 1
    assert la[np.True_].shape == arr[np.True_].shape
    assert la[False].shape == arr[False].shape
    assert la[None].shape == arr[None].shape
    np.testing.assert_array_equal(la[..., 2], arr[..., 2])
    np.testing.assert_array_equal(la[arr[:, 0] % 2 == 0], arr[arr[:, 0] % 2 == 0])


def test_fortran_and_zero_d_arrays_are_read_whole(tmp_path):
    path = tmp_path / "v.frt"
    f = np.asfortranarray(np.arange(600_000, dtype="f8").reshape(1000, 600))
    value = {"f": f, "z": np.array(2.5), "zs": np.array("text")}
    freight.dump(value, path)
    lv = freight.lazy(path)
    lf = lv["f"]
    assert lf.shape == (1000, 600) and lf.dtype == np.float64
    np.testing.assert_array_equal(lf[10:20], f[10:20])
    np.testing.assert_array_equal(lf[3], f[3])
    np.testing.assert_array_equal(lf[5, 7], f[5, 7])
    got = lf.load()
    assert got.flags.f_contiguous
    np.testing.assert_array_equal(got, f)
    z = lv["z"]
    assert z.shape == () and z[()] == 2.5 and z.load() == np.array(2.5)
    with pytest.raises(TypeError, match="0-d"):
        len(z)
    assert lv["zs"].load() == np.array("text")


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_compressed_files_read_only_the_blocks_of_the_rows(tmp_path, compression):
    path = tmp_path / "v.frt"
    rng = np.random.default_rng(0)
    arr = np.round(rng.normal(size=1_000_000), 1)
    freight.dump({"arr": arr}, path, compression=compression)
    lv = freight.lazy(path)
    info = lv._reader.header.frame(0)
    assert info["codec"] != 0 and info["digest_block"] == XXH3_BLOCK
    rows = (1 << 20) // 8
    for s in [slice(rows - 2, rows + 2), slice(0, 3), slice(7 * rows, None), slice(-1, None), slice(2, 2)]:
        before = lv.bytes_read
        np.testing.assert_array_equal(lv["arr"][s], arr[s])
        assert lv.bytes_read - before <= info["stored_length"] // 2
    np.testing.assert_array_equal(np.asarray(lv["arr"]), arr)


@pytest.mark.parametrize("how", ["codec key", "key option"])
def test_signed_files(tmp_path, how):
    path = tmp_path / "v.frt"
    arr = np.arange(1_000_000, dtype="f8")
    signer = freight.Freight(key=KEY)
    signer.dump({"arr": arr, "s": "x"}, path)
    lv = freight.lazy(path, freight=signer)
    if how == "key option":
        lv = freight.lazy(path, key=KEY)
    assert lv._reader.header.signed
    assert lv._reader.header.frame(0)["digest_block"] == SHA_BLOCK
    rows = SHA_BLOCK // 8
    before = lv.bytes_read
    np.testing.assert_array_equal(lv["arr"][rows - 1 : rows + 1], arr[rows - 1 : rows + 1])
    assert lv.bytes_read - before == 2 * SHA_BLOCK
    assert lv["s"] == "x"
    with pytest.raises(freight.IntegrityError, match="signature does not match"):
        freight.lazy(path, key=b"j" * 32)
    unsigned = tmp_path / "u.frt"
    freight.dump({"s": "x"}, unsigned)
    with pytest.raises(freight.IntegrityError, match="not signed"):
        freight.lazy(unsigned, key=KEY)
    with pytest.raises(freight.IntegrityError, match="not signed"):
        freight.lazy(unsigned, freight=signer)


def test_a_value_signed_in_the_old_layout_says_to_load_it_whole(tmp_path):
    path = tmp_path / "old.frt"
    data = bytearray(freight.dumps({"a": 1}))
    data[5] |= 0x08  # SIGNED without HEAD_SIGNED: a format 1.0 signature over everything
    path.write_bytes(bytes(data))
    with pytest.raises(freight.DeserializationError, match=r"signed before format 1\.2.*load it whole"):
        freight.lazy(path, key=KEY)


@pytest.mark.parametrize("signed", [False, True], ids=["xxh3", "sha256"])
def test_a_byte_flipped_on_disk_fails_the_reads_that_use_it(tmp_path, signed):
    path = tmp_path / "v.frt"
    arr = np.arange(1_000_000, dtype="f8")
    codec = freight.Freight(key=KEY) if signed else freight.Freight()
    codec.dump({"arr": arr, "b": np.arange(5)}, path)
    block = SHA_BLOCK if signed else XXH3_BLOCK
    start, _ = _frames(path)[0]
    _flip(path, start + 2 * block + 5)
    lv = freight.lazy(path, freight=codec)
    rows = block // 8
    np.testing.assert_array_equal(lv["arr"][: 2 * rows], arr[: 2 * rows])
    np.testing.assert_array_equal(lv["arr"][3 * rows : 3 * rows + 5], arr[3 * rows : 3 * rows + 5])
    np.testing.assert_array_equal(lv["b"].load(), np.arange(5))
    with pytest.raises(freight.IntegrityError, match="block 2 of frame 0") as info:
        lv["arr"][2 * rows + 1]
    assert isinstance(info.value, freight.FreightError)
    with pytest.raises(freight.IntegrityError):
        lv["arr"].load()
    with pytest.raises(freight.IntegrityError):
        lv.load()
    with pytest.raises(freight.IntegrityError):
        codec.load(path)


def test_a_byte_flipped_in_the_header_is_refused_at_open(tmp_path):
    path = tmp_path / "v.frt"
    freight.dump({"arr": np.arange(1_000_000, dtype="f8"), "name": "a name"}, path)
    data = open(path, "rb").read()
    length = _freight.LazyHeader(data, len(data)).length
    for offset in (8, length // 2, length - 12, length - 1):
        path.write_bytes(data)
        _flip(path, offset)
        with pytest.raises(freight.IntegrityError):
            freight.lazy(path)


@pytest.mark.parametrize("keep", [-1, -5000, 200, 30, 7, 5, 2])
def test_truncated_files_are_refused_at_open(tmp_path, keep):
    path = tmp_path / "v.frt"
    freight.dump({"arr": np.arange(1_000_000, dtype="f8"), "s": "x" * 50}, path)
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    # Fewer bytes than the magic cannot tell a cut payload from another file.
    with pytest.raises(freight.DeserializationError, match="truncated|too short" if len(data[:keep]) > 4 else "magic"):
        freight.lazy(path)


def test_files_that_are_not_payloads(tmp_path):
    with pytest.raises(freight.PathNotFoundError, match="no such file"):
        freight.lazy(tmp_path / "missing.frt")
    with pytest.raises(freight.PathError):
        freight.lazy(tmp_path)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(freight.DeserializationError, match="not a freight payload"):
        freight.lazy(empty)
    other = tmp_path / "other"
    other.write_bytes(b"PK\x03\x04 not a payload at all")
    with pytest.raises(freight.DeserializationError, match="magic"):
        freight.lazy(other)
    extra = tmp_path / "extra"
    extra.write_bytes(freight.dumps({"a": np.arange(10)}) + b"junk")
    with pytest.raises(freight.DeserializationError, match="not one freight payload"):
        freight.lazy(extra)


def test_a_file_replaced_after_open_keeps_reading_the_version_opened(tmp_path):
    path = tmp_path / "v.frt"
    old = {"arr": np.arange(1_000_000, dtype="f8"), "b": np.arange(10), "s": "old"}
    freight.dump(old, path)
    lv = freight.lazy(path)
    freight.dump({"arr": np.zeros(5), "s": "new"}, path)  # atomic: a new file renamed over it
    np.testing.assert_array_equal(lv["arr"][500_000:500_010], old["arr"][500_000:500_010])
    np.testing.assert_array_equal(lv["b"].load(), old["b"])
    assert lv.load()["s"] == "old"
    os.remove(path)
    np.testing.assert_array_equal(lv["arr"][-2:], old["arr"][-2:])


def test_codec_options_apply(tmp_path):
    path = tmp_path / "v.frt"
    codec = freight.Freight()
    codec.register(BoxSerializer())
    codec.dump({"box": Box([1, 2]), "arr": np.arange(3_000_000, dtype="f8")}, path)
    lv = freight.lazy(path, freight=codec)
    assert lv["box"].value == [1, 2]
    assert lv.info("box")["tag"] == "test.lazy.box"
    with pytest.raises(freight.UnsafePayloadError, match="allowed_tags"):
        freight.lazy(path, freight=codec, allowed_tags=[])["box"]
    with pytest.raises(freight.DeserializationError, match="over the limit"):
        freight.lazy(path, freight=codec, max_size=1000)["arr"].load()
    view = freight.lazy(path, freight=codec, zero_copy=True)["arr"].load()
    np.testing.assert_array_equal(view[:3], [0.0, 1.0, 2.0])
    with pytest.raises(freight.OptionError, match="unknown option.*bogus"):
        freight.lazy(path, bogus=True)


def test_a_value_pickled_as_a_whole_says_load_reads_it(tmp_path):
    import fractions

    path = tmp_path / "v.frt"
    freight.dump(fractions.Fraction(1, 3), path)  # no native form: the root is one Pickle node
    lv = freight.lazy(path)
    assert lv.kind == "pickle"
    with pytest.raises(freight.LazyReadError, match=r"pickled as a whole.*\.load\(\) reads it"):
        lv.keys()
    with pytest.raises(freight.LazyReadError):
        lv["f"]
    assert lv.load() == fractions.Fraction(1, 3)
    with pytest.raises(freight.UnsafePayloadError):
        freight.lazy(path, allow_pickle=False).load()


def test_entries_holding_pickle_islands_read_as_in_a_whole_load(tmp_path):
    """Objects with no native form are pickled where the walker meets them (islands of one
    pickler session, sharing its memo): an entry holding one is read as the whole value reads
    it, identities across entries included; the other entries are still read alone."""
    import collections
    import fractions

    half = fractions.Fraction(1, 2)
    value = {"x": half, "y": [half, (half,)], "c": collections.Counter("abra"), "a": np.arange(5.0)}
    path = tmp_path / "v.frt"
    freight.dump(value, path)
    for first in ("y", "x", "c"):
        lv = freight.lazy(path)
        assert lv[first] == value[first]
    lv = freight.lazy(path)
    y = lv["y"]
    assert y[0] is y[1][0] and y == [half, (half,)]
    assert lv["c"] == collections.Counter("abra")
    np.testing.assert_array_equal(lv["a"][1:3], value["a"][1:3])
    whole = lv.load()
    assert whole["x"] is whole["y"][0]
