"""Values read in part from a store (issue 31 §2): ``Store.lazy(key)`` on a local folder, the
memory store and the real S3 server of conftest.py (``store_location``).

What is checked, on every backend: every kind of entry decodes alone as it does in a whole load
(identities included); row slices of arrays at digest-block, compressed-block and frame
boundaries read only their blocks (``bytes_read`` bounded); signatures are checked before any
frame is read and every block read is authenticated; tampered, truncated and replaced objects are
refused (never a mixed value: test_lazy_integrity.py); ``allow_pickle``/``allowed_tags`` apply; a persistent dask array
comes back lazy; every error is a ``freight.FreightError``. ``freight.lazy`` on paths is in
tests/core/test_lazy_file.py."""

from __future__ import annotations

import fractions

import dask.array as da
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import freight
from freight.storage.persistent import DaskZarr
from support.fidelity import assert_same as fidelity_same
from support.lazy_store import (
    KEY,
    OTHER_KEY,
    RAW_BLOCK,
    SHA_BLOCK,
    XXH3_BLOCK,
)
from support.lazy_store import header_read as _header_read
from support.lazy_store import lazy_store as _store
from support.lazy_store import materialize as _materialize

# -- entry kinds ----------------------------------------------------------------------------------


def _kinds() -> dict:
    rng = np.random.default_rng(1)
    return {
        "int": 7,
        "big int": 2**80,
        "float": 1.5,
        "none": None,
        "bool": True,
        "complex": 1 + 2j,
        "str": "héllo",
        "small bytes": b"abc",
        "frame bytes": bytes(range(256)) * 300,  # >= 64 KiB: a frame of its own
        "bytearray": bytearray(b"x" * 70_000),
        "f8": rng.normal(size=1000),
        "i2": np.arange(-500, 500, dtype="i2"),
        "u1 2d": np.arange(60, dtype="u1").reshape(6, 10),
        "bool array": rng.random(100) > 0.5,
        "c16": np.arange(10) * (1 + 1j),
        "datetime64": np.arange("2020-01-01", "2020-02-01", dtype="datetime64[D]"),
        "structured": np.array([(1, 2.5, b"ab"), (3, 4.5, b"cd")], dtype=[("a", "i4"), ("b", "f8"), ("c", "S2")]),
        "unicode": np.array(["a", "héllo", "ωμέγα"]),
        "0-d": np.array(3.25),
        "fortran": np.asfortranarray(np.arange(24, dtype="f4").reshape(4, 6)),
        "empty": np.zeros((0, 3)),
        "pandas": pd.DataFrame({"x": np.arange(5), "y": list("abcde")}),
        "series": pd.Series([1.5, None, 3.0], name="s"),
        "pyarrow": pa.table({"x": [1, 2, 3], "y": ["a", None, "c"]}),
        "polars": pl.DataFrame({"x": [1, 2, 3], "y": ["a", "b", None]}),
        "set": {1, 2, 3},
        "nested": {
            1: np.arange(5),
            (1, "a"): {"deep": np.arange(6, dtype="f4"), None: "none key", 2.5: [np.ones(3), "x"]},
            frozenset({3}): ("t", np.zeros(2)),
        },
        "list": [np.arange(3), [np.arange(4), "s"], (np.arange(2),)],
        "tuple": (1, np.arange(7), {"k": np.arange(8)}),
        "list of scalars": [1, "two", 3.0],
    }


def assert_same(want, got, path: str = "value") -> None:
    """support.fidelity's assert_same, with dicts, sets and pandas/polars objects too."""
    if isinstance(want, dict):
        assert type(got) is dict and list(got) == list(want), f"{path}: {got!r}"
        for k in want:
            assert_same(want[k], got[k], f"{path}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), f"{path}: {got!r}"
        for i, (w, g) in enumerate(zip(want, got)):
            assert_same(w, g, f"{path}[{i}]")
    elif isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want, obj=path)
    elif isinstance(want, pd.Series):
        pd.testing.assert_series_equal(got, want, obj=path)
    elif isinstance(want, pl.DataFrame):
        assert isinstance(got, pl.DataFrame) and got.equals(want), path
    else:
        fidelity_same(want, got, path)


def _check_entry(lv, whole, name):
    """lv[name] as the whole load has it; lazy containers are checked entry by entry, recursively."""
    got = lv[name]
    want = whole[name]
    if isinstance(got, freight.LazyValue):
        assert got.kind == type(want).__name__
        assert got.keys() == (list(want) if isinstance(want, dict) else list(range(len(want))))
        for sub in got.keys():
            _check_entry(got, want, sub)
        assert_same(want, got.load(), f"{name!r}.load()")
    elif isinstance(got, freight.LazyArray):
        assert isinstance(want, np.ndarray)
        assert (got.dtype, got.shape, got.nbytes) == (want.dtype, want.shape, want.nbytes)
        assert_same(want, got.load(), repr(name))
        assert_same(want, np.asarray(got), repr(name))
    else:
        assert_same(want, got, repr(name))


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_every_entry_kind_decodes_alone_as_in_a_whole_load(store_location, signed):
    store = _store(store_location, signed, compression="auto")
    value = _kinds()
    store.save("v", value)
    whole = store.load("v")
    lv = store.lazy("v")
    assert lv.kind == "dict"
    assert lv.keys() == list(value)
    assert len(lv) == len(value) and "pandas" in lv and "nope" not in lv and list(lv) == list(value)
    for name in value:
        _check_entry(lv, whole, name)
        assert lv.info(name)["kind"]
    assert_same(whole, lv.load())
    assert isinstance(lv["f8"], freight.LazyArray)
    assert isinstance(lv["nested"], freight.LazyValue)
    assert isinstance(lv["nested"][(1, "a")], freight.LazyValue)
    assert isinstance(lv["frame bytes"], bytes) and lv["frame bytes"] == value["frame bytes"]
    assert isinstance(lv["pandas"], pd.DataFrame)
    assert isinstance(lv["polars"], pl.DataFrame)
    assert lv["list of scalars"] == [1, "two", 3.0]  # a container without frames comes back decoded


def test_info_describes_entries_from_the_header(store_location):
    store = _store(store_location)
    store.save("v", {"a": np.zeros((1000, 4), "f4"), "d": {"x": np.arange(3)}, "s": "x", "t": pa.table({"c": [1]})})
    lv = store.lazy("v")
    before = lv.bytes_read
    a = lv.info("a")
    assert (a["kind"], a["dtype"], a["shape"], a["nbytes"], a["frames"]) == (
        "ndarray",
        np.dtype("f4"),
        (1000, 4),
        16000,
        1,
    )
    assert a["stored_bytes"] == 16000
    assert lv.info("d")["kind"] == "dict" and lv.info("d")["length"] == 1
    assert lv.info("s") == {"kind": "str", "frames": 0, "stored_bytes": 0}
    t = lv.info("t")
    assert t["tag"] == "pyarrow.Table" and t["schema"].names == ["c"]
    arr = lv["a"]
    assert (arr.dtype, arr.shape, arr.nbytes, len(arr)) == (np.dtype("f4"), (1000, 4), 16000, 1000)
    assert lv.bytes_read == before  # all of it from the header


@pytest.mark.parametrize("root", ["list", "tuple"])
def test_list_and_tuple_roots(store_location, root):
    store = _store(store_location)
    items = [np.arange(100_000), "s", [np.arange(5), {"k": np.arange(3)}]]
    value = items if root == "list" else tuple(items)
    store.save("v", value)
    lv = store.lazy("v")
    assert lv.kind == root and lv.keys() == [0, 1, 2] and len(lv) == 3
    assert lv[1] == "s" and lv[-2] == "s"
    np.testing.assert_array_equal(lv[0][-3:], [99_997, 99_998, 99_999])
    np.testing.assert_array_equal(lv[-1][1]["k"].load(), np.arange(3))
    assert_same(value, lv.load())
    with pytest.raises(freight.LazyReadError, match=r"no entry 3; its entries are \[0, 1, 2\]"):
        lv[3]


def test_root_that_is_not_a_container(store_location):
    store = _store(store_location)
    store.save("arr", np.arange(10))
    lv = store.lazy("arr")
    assert lv.kind == "ndarray"
    with pytest.raises(freight.LazyReadError, match=r"is a ndarray, not a dict, list or tuple.*\.load\(\)"):
        lv.keys()
    np.testing.assert_array_equal(lv.load(), np.arange(10))
    store.save("str", "just a string")
    assert store.lazy("str").load() == "just a string"


# -- shared objects -------------------------------------------------------------------------------


def test_entries_sharing_objects_keep_the_identities_of_a_whole_load(store_location):
    store = _store(store_location)
    small = np.arange(1000)
    big = np.arange(200_000, dtype="f8")
    inner = [1, 2]
    value = {
        "a": small,
        "b": small,  # the same array object: a reference to "a"'s
        "x": {"p": big, "q": big},
        "y": big,
        "k1": {"name": np.ones(3)},  # the key "name" is memoized, then reused
        "k2": {"name": np.zeros(3)},
        "l": [inner, inner],
        "s1": "a string long enough to be memoized" * 3,
        "s2": "a string long enough to be memoized" * 3,
    }
    store.save("v", value)
    whole = store.load("v")
    assert whole["a"] is whole["b"] and whole["x"]["p"] is whole["y"]
    lv = store.lazy("v")
    for name in value:
        assert_same(whole[name], _materialize(lv[name]), repr(name))
    x = lv["x"].load()
    assert x["p"] is x["q"]  # identity inside an entry, as in the whole load
    np.testing.assert_array_equal(lv["y"][5:10], big[5:10])
    assert lv["k2"].keys() == ["name"] and lv["k1"].keys() == ["name"]
    np.testing.assert_array_equal(lv["k2"]["name"].load(), np.zeros(3))
    l_ = lv["l"]
    assert l_ == [[1, 2], [1, 2]] and l_[0] is l_[1]
    assert lv["s2"] == value["s2"]
    loaded = lv.load()
    assert loaded["a"] is loaded["b"] and loaded["x"]["p"] is loaded["y"] and loaded["l"][0] is loaded["l"][1]


def test_an_entry_that_refers_to_another_entrys_array_is_lazy_too(store_location):
    """``{"a": arr, "b": arr}``: "b" is stored as a reference to "a"'s array; ``lv["b"]`` is
    still an array entry (a LazyArray, described by info), not the whole array read."""
    store = _store(store_location)
    arr = np.arange(300_000, dtype="f8")
    store.save("v", {"a": arr, "b": arr, "d": {"x": arr}})
    lv = store.lazy("v")
    info = lv.info("b")
    assert info["kind"] == "ndarray" and info["shape"] == arr.shape
    b = lv["b"]
    assert isinstance(b, freight.LazyArray)
    before = lv.bytes_read
    np.testing.assert_array_equal(b[10:20], arr[10:20])
    assert lv.bytes_read - before <= 2 * XXH3_BLOCK
    np.testing.assert_array_equal(lv["d"]["x"][-2:], arr[-2:])


def test_references_to_containers_tables_and_strings(store_location):
    store = _store(store_location)
    inner = {"x": np.arange(100_000), "n": "inner"}
    table = pa.table({"c": [1, 2], "d": ["a", "b"]})
    cyclic: dict = {"arr": np.arange(5)}
    cyclic["self"] = cyclic
    store.save("v", {"p": inner, "q": inner, "t1": table, "t2": table, "name": "n", "again": "n"})
    lv = store.lazy("v")
    q = lv["q"]
    assert isinstance(q, freight.LazyValue) and q.keys() == ["x", "n"] and lv.info("q")["kind"] == "dict"
    np.testing.assert_array_equal(q["x"][-3:], inner["x"][-3:])
    assert lv.columns(["d"], entry="t2").column_names == ["d"]
    assert lv.info("t2")["tag"] == "pyarrow.Table"
    assert lv["again"] == "n" and lv.info("again")["kind"] == "str"
    loaded = lv.load()
    assert loaded["p"] is loaded["q"] and loaded["t1"] is loaded["t2"]
    store.save("c", cyclic)
    lv = store.lazy("c")
    root = lv["self"]
    got = root.load() if isinstance(root, freight.LazyValue) else root
    assert got["self"] is got
    np.testing.assert_array_equal(got["arr"], np.arange(5))


# -- slices ---------------------------------------------------------------------------------------


def _slices(n: int, block_rows: int) -> list:
    b = block_rows
    return [
        slice(b - 1, b + 1),  # across a block boundary
        slice(b, 2 * b),  # exactly one block
        slice(0, b),
        slice(b - 1, b),
        slice(3 * b - 2, 3 * b + 2),
        slice(n - 1, n),  # the frame's last row
        slice(n - b - 3, None),  # up to the frame's end
        slice(n, n + 5),  # empty, past the end
        slice(5, 5),  # empty
        slice(7, 3),  # empty, reversed bounds
        slice(-10, None),
        slice(-b - 2, -b + 2),
        slice(None, None, b // 2 + 1),  # stepped
        slice(b + 5, b - 5, -1),  # negative step across a boundary
        slice(-1, -30, -7),
        slice(None, None, -1),
    ]


@pytest.mark.parametrize("signed", [False, True], ids=["xxh3", "sha256"])
@pytest.mark.parametrize("shape", [(300_000,), (100_000, 3)], ids=["1d", "2d"])
def test_slices_at_digest_block_boundaries(store_location, signed, shape):
    store = _store(store_location, signed)
    arr = np.arange(np.prod(shape), dtype="f8").reshape(shape)  # 2.4 MB: block digests
    store.save("v", {"arr": arr, "other": np.ones(10)})
    lv = store.lazy("v")
    frame = lv._reader.header.frame(0)
    block = SHA_BLOCK if signed else XXH3_BLOCK
    assert frame["digest_block"] == block
    row = arr.itemsize * int(np.prod(shape[1:]))
    la = lv["arr"]
    n = shape[0]
    for s in _slices(n, block // row):
        before = lv.bytes_read
        got = la[s]
        np.testing.assert_array_equal(got, arr[s], err_msg=repr(s))
        assert got.dtype == arr.dtype and got.shape == arr[s].shape
        picked = range(*s.indices(n))
        if picked and abs(picked.step) == 1:
            assert lv.bytes_read - before <= len(picked) * row + 2 * block, s
    for i in [0, 1, block // row - 1, block // row, n - 1, -1, -n]:
        np.testing.assert_array_equal(la[i], arr[i])
    with pytest.raises(IndexError):
        la[n]
    with pytest.raises(IndexError):
        la[-n - 1]
    if len(shape) == 2:
        for idx in [(block // row, 2), (-1, 0), (5, -1)]:
            assert la[idx] == arr[idx]
        np.testing.assert_array_equal(
            la[block // row - 2 : block // row + 2, 1], arr[block // row - 2 : block // row + 2, 1]
        )
        np.testing.assert_array_equal(la[:, 1], arr[:, 1])  # a column: read whole
    np.testing.assert_array_equal(la[...], arr)
    np.testing.assert_array_equal(la[[3, 1, 2]], arr[[3, 1, 2]])  # fancy indexing: read whole


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_slices_of_compressed_frames_read_their_blocks(store_location, compression):
    store = _store(store_location)
    rng = np.random.default_rng(0)
    arr = np.round(rng.normal(size=1_000_000), 1)  # 8 MB raw: 8 compressed blocks, > 1 MiB stored
    store.save("v", {"arr": arr, "s": "x"}, compression=compression)
    lv = store.lazy("v")
    frame = lv._reader.header.frame(0)
    assert frame["codec"] != 0 and frame["digest_block"] == XXH3_BLOCK
    stored = frame["stored_length"]
    rows = RAW_BLOCK // arr.itemsize
    la = lv["arr"]
    n = len(arr)
    cases = [
        slice(rows - 1, rows + 1),  # across a compressed block boundary
        slice(rows, 2 * rows),
        slice(0, 1),
        slice(7 * rows, n),  # the last, shorter block
        slice(n - 3, None),
        slice(n, None),
        slice(3 * rows + 5, 3 * rows - 5, -2),
    ]
    for s in cases:
        before = lv.bytes_read
        np.testing.assert_array_equal(la[s], arr[s], err_msg=repr(s))
        # The block table, then at most two compressed blocks (of eight), with digest rounding.
        assert lv.bytes_read - before <= stored // 2, s
    assert la[rows] == arr[rows] and la[-1] == arr[-1]
    np.testing.assert_array_equal(la.load(), arr)


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_small_compressed_and_small_checksummed_frames_are_read_whole(store_location, compression):
    store = _store(store_location)
    arr = np.arange(50_000, dtype="i8") % 7  # compresses well: one small checksummed frame
    store.save("v", {"arr": arr, "plain": np.arange(1000.0)}, compression=compression)
    lv = store.lazy("v")
    np.testing.assert_array_equal(lv["arr"][100:200], arr[100:200])
    np.testing.assert_array_equal(lv["plain"][-5:], np.arange(995.0, 1000.0))


def test_frames_without_checksums_read_only_their_rows(store_location):
    store = _store(store_location)
    arr = np.arange(1_000_000, dtype="f8")
    store.put_bytes("v", freight.dumps({"arr": arr, "s": "x"}, checksum=False))
    lv = store.lazy("v")
    frame = lv._reader.header.frame(0)
    assert frame["digest_block"] is None and not frame["checksum"]
    header = _header_read(lv)
    np.testing.assert_array_equal(lv["arr"][123_456:124_456], arr[123_456:124_456])
    assert lv.bytes_read - header == 1000 * 8
    np.testing.assert_array_equal(lv["arr"][-1:], arr[-1:])
    np.testing.assert_array_equal(lv["arr"].load(), arr)


def test_a_thousand_rows_of_a_ten_million_row_array_read_under_one_mib(store_location):
    store = _store(store_location)
    arr = np.arange(10_000_000, dtype="f8")
    store.save("v", {"arr": arr})
    lv = store.lazy("v")
    header = _header_read(lv)
    assert header <= 64 << 10
    np.testing.assert_array_equal(lv["arr"][5_000_000:5_001_000], arr[5_000_000:5_001_000])
    assert lv.bytes_read - header < 1 << 20


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_one_array_of_eight_reads_about_that_array(store_location, signed):
    store = _store(store_location, signed)
    arrays = {f"a{i}": np.full(300_000, i, dtype="f8") for i in range(8)}  # 2.4 MB each
    store.save("v", arrays)
    lv = store.lazy("v")
    header = _header_read(lv)
    got = lv["a5"].load()
    np.testing.assert_array_equal(got, arrays["a5"])
    assert lv.bytes_read - header <= 1.05 * arrays["a5"].nbytes
    assert lv.bytes_read <= 1.05 * arrays["a5"].nbytes + header


# -- signatures -----------------------------------------------------------------------------------


def test_signed_values_read_with_the_codecs_key_or_the_key_option(store_location):
    signed = _store(store_location, signed=True)
    value = {"a": np.arange(400_000, dtype="f8"), "s": "x"}
    signed.save("v", value)
    assert np.array_equal(signed.lazy("v")["a"][1:3], [1.0, 2.0])
    plain = _store(store_location)
    assert plain.lazy("v", key=KEY)["s"] == "x"
    assert plain.lazy("v", key=[OTHER_KEY, KEY])["a"][-1] == 399_999.0  # any of the keys
    plain.save("w", value, sign_key=KEY)
    np.testing.assert_array_equal(plain.lazy("w", key=KEY)["a"].load(), value["a"])


def test_a_wrong_key_is_refused_before_any_frame_is_read(store_location):
    store = _store(store_location, signed=True)
    store.save("v", {"a": np.arange(400_000, dtype="f8")})
    with pytest.raises(freight.IntegrityError, match="signature does not match"):
        store.lazy("v", key=OTHER_KEY)  # at open: nothing but the header was read
    wrong = store_location.open(freight=freight.Freight(key=OTHER_KEY))
    with pytest.raises(freight.IntegrityError):
        wrong.lazy("v")


def test_an_unsigned_value_read_with_a_key_is_refused(store_location):
    store = _store(store_location)
    store.save("v", {"a": np.arange(10)})
    with pytest.raises(freight.IntegrityError, match="not signed, but a key was given"):
        store.lazy("v", key=KEY)


def test_a_value_signed_before_format_1_2_is_refused_lazily_with_a_key(store_location):
    """Flags SIGNED without HEAD_SIGNED: one signature over the whole payload (format 1.0),
    which no part can be checked against; the lazy reader says to load it whole."""
    store = _store(store_location)
    data = bytearray(freight.dumps({"a": 1}))
    data[5] |= 0x08  # SIGNED (the signature trailer and checksum do not matter: refused first)
    store.put_bytes("old", bytes(data))
    with pytest.raises(freight.DeserializationError, match="signed before format 1.2.*load it whole"):
        store.lazy("old", key=KEY)


# -- safe loading ---------------------------------------------------------------------------------


def _with_pickled_entry() -> dict:
    # A DataFrame of Fractions: its object column is pickled, the rest of the value is not.
    return {"df": pd.DataFrame({"o": [fractions.Fraction(1, 3), 2]}), "a": np.arange(3), "s": "x"}


def test_allow_pickle_false_refuses_an_entry_that_needs_pickle(store_location):
    store = _store(store_location)
    store.save("v", _with_pickled_entry())
    with pytest.raises(freight.UnsafePayloadError):
        store.lazy("v", allow_pickle=False)["df"]
    with pytest.raises(freight.UnsafePayloadError):
        store.lazy("v", allow_pickle=False).load()
    assert store.lazy("v")["df"]["o"][0] == fractions.Fraction(1, 3)


def test_safe_options_apply_to_the_entries_read_not_the_whole_payload(store_location):
    store = _store(store_location)
    store.save("v", _with_pickled_entry())
    lv = store.lazy("v", allow_pickle=False)
    assert lv.keys() == ["df", "a", "s"]
    np.testing.assert_array_equal(lv["a"].load(), np.arange(3))
    lv = store.lazy("v", allowed_tags=[])
    assert lv["s"] == "x"
    with pytest.raises(freight.UnsafePayloadError):
        lv["df"]


def test_allowed_tags_apply_to_entries(store_location):
    store = _store(store_location)
    store.save("v", {"df": pd.DataFrame({"x": [1, 2]}), "t": pa.table({"c": [1]})})
    with pytest.raises(freight.UnsafePayloadError, match="allowed_tags"):
        store.lazy("v", allowed_tags=["pyarrow.Table"])["df"]
    with pytest.raises(freight.UnsafePayloadError, match="allowed_tags"):
        store.lazy("v", allowed_tags=["pyarrow.Table"]).columns(["x"], entry="df")
    lv = store.lazy("v", allowed_tags=["pandas.DataFrame", "pyarrow.Table"])
    assert lv["df"]["x"].tolist() == [1, 2]
    assert lv.columns(["c"], entry="t").column("c").to_pylist() == [1]


# -- persistent serializers -----------------------------------------------------------------------


def test_a_persistent_dask_array_comes_back_as_the_lazy_dask_array(store_location):
    store = _store(store_location)
    store.register_persistent(DaskZarr())
    x = da.arange(1000, chunks=100).reshape(10, 100)
    store.save("v", {"x": x, "plain": np.arange(5)})
    lv = store.lazy("v")
    got = lv["x"]
    assert isinstance(got, da.Array)
    assert got.shape == (10, 100)
    np.testing.assert_array_equal(got[3:5].compute(), np.arange(1000).reshape(10, 100)[3:5])
    np.testing.assert_array_equal(lv["plain"].load(), np.arange(5))
    assert isinstance(lv.load()["x"], da.Array)


# -- errors ---------------------------------------------------------------------------------------


def test_errors_are_freight_errors_that_say_what_to_do(store_location):
    store = _store(store_location)
    store.save("v", {f"k{i}": i for i in range(15)} | {"arr": np.arange(70_000)})
    lv = store.lazy("v")
    with pytest.raises(freight.LazyReadError, match=r"has no entry 'nope'; its entries are \['k0', .* \.\.\.") as info:
        lv["nope"]
    assert isinstance(info.value, freight.FreightError) and isinstance(info.value, LookupError)
    with pytest.raises(freight.LazyReadError, match="no entry"):
        lv.info("nope")
    with pytest.raises(freight.LazyReadError, match="no entry"):
        lv[["unhashable"]]
    store.save("pickled", fractions.Fraction(1, 3))
    with pytest.raises(freight.LazyReadError, match=r"pickled as a whole.*\.load\(\)"):
        store.lazy("pickled").keys()
    assert store.lazy("pickled").kind == "pickle"
    assert store.lazy("pickled").load() == fractions.Fraction(1, 3)
    with pytest.raises(freight.LazyReadError, match="not a table"):
        lv.columns(["x"], entry="arr")
    with pytest.raises(freight.KeyNotFoundError):
        store.lazy("missing")
    with pytest.raises(freight.OptionError, match="unknown option"):
        store.lazy("v", bogus=1)
    for exc in (freight.LazyReadError, freight.IntegrityError, freight.StorageError, freight.KeyNotFoundError):
        assert issubclass(exc, freight.FreightError)
