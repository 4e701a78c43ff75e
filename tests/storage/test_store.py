"""freight.storage.Store on each backend (a local folder, memory://, S3 on the s3s-fs test server):
values of many kinds round-trip under every compression, signed saves, pickle refusal, info(),
the store's url/backend/repr, opening errors, and that a local store's files are ordinary
``dumps`` payloads (``freight.load`` and ``python -m freight inspect`` read them).

The ``store``/``store_location`` fixtures are in conftest.py.
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
import scipy.sparse as sp

import freight
import freight.storage as fs
from freight.exceptions import IntegrityError, KeyNotFoundError, StorageError, UnsafePayloadError

COMPRESSIONS = ["none", "lz4", "zstd", "auto"]
KEY = b"k" * 32
WRONG_KEY = b"w" * 32


def _make_closure():
    offset = 41

    def add(x):
        return x + offset

    return add


def _values() -> dict[str, object]:
    rng = np.random.default_rng(7)
    return {
        "int": 12345678901234567890,
        "float": -2.5,
        "str": "héllo wörld",
        "none": None,
        "bool": True,
        "complex": complex(1, -2),
        "bytes": bytes(range(256)) * 4,
        "bytearray": bytearray(b"abc"),
        "tuple": (1, "two", 3.0),
        "set": {1, 2, 3},
        "frozenset": frozenset({"a", "b"}),
        "list": [1, [2, [3, [4]]], {"x": None}],
        "nested_dict": {"a": {"b": {"c": [1, {"d": (2, 3)}], "e": b"raw"}}, 7: "int key", None: [1.5]},
        "float64": rng.standard_normal(1000),
        "int32_fortran": np.asfortranarray(np.arange(60, dtype=np.int32).reshape(5, 12)),
        "uint8": np.arange(256, dtype=np.uint8),
        "bool_array": rng.random(100) > 0.5,
        "complex128": np.arange(10) * (1 + 1j),
        "float16_3d": rng.standard_normal((3, 4, 5)).astype(np.float16),
        "datetime64": np.array(["2020-01-01", "2021-06-30T12:00"], dtype="datetime64[ns]"),
        "unicode_array": np.array(["a", "bc", "déf"]),
        "structured": np.array([(1, 2.0), (3, 4.0)], dtype=[("i", "<i4"), ("f", "<f8")]),
        "zero_d": np.array(3.25),
        "empty": np.empty((0, 3), dtype=np.float32),
        "array_dict": {"x": np.zeros((20, 20)), "y": np.ones(7, dtype=np.int64)},
        "pandas": pd.DataFrame(
            {"a": np.arange(50), "b": rng.standard_normal(50), "c": [f"s{i}" for i in range(50)]},
            index=pd.RangeIndex(100, 150, name="idx"),
        ),
        "polars": pl.DataFrame({"a": list(range(30)), "b": [f"x{i}" for i in range(30)], "c": [0.5] * 30}),
        "arrow": pa.table({"a": pa.array(range(40)), "b": pa.array([str(i) for i in range(40)])}),
        "sparse_csr": sp.random(40, 30, density=0.2, format="csr", random_state=1),
        "sparse_coo": sp.random(20, 20, density=0.1, format="coo", random_state=2),
        "closure": _make_closure(),
    }


VALUES = _values()


def assert_same(actual: object, expected: object) -> None:
    """Equal in value and in kind (type, dtype, shape, memory order)."""
    assert type(actual) is type(expected), (type(actual), type(expected))
    if isinstance(expected, np.ndarray):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        assert actual.flags.f_contiguous == expected.flags.f_contiguous
        assert actual.flags.c_contiguous == expected.flags.c_contiguous
        np.testing.assert_array_equal(actual, expected)
    elif isinstance(expected, pd.DataFrame):
        pd.testing.assert_frame_equal(actual, expected)
    elif isinstance(expected, pl.DataFrame):
        assert actual.equals(expected) and actual.schema == expected.schema
    elif isinstance(expected, pa.Table):
        assert actual.equals(expected)
    elif sp.issparse(expected):
        assert actual.shape == expected.shape and actual.dtype == expected.dtype
        assert (actual != expected).nnz == 0
    elif callable(expected):
        assert actual(1) == expected(1) == 42
    elif isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for k in expected:
            assert_same(actual[k], expected[k])
    else:
        assert actual == expected


# -- round trips ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(VALUES))
def test_values_round_trip(store, name):
    value = VALUES[name]
    store.save(name, value)
    assert_same(store.load(name), value)
    assert store.list() == [name]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_every_value_round_trips_under_each_compression(store, compression):
    for name, value in VALUES.items():
        store.save(f"{compression}/{name}", value, compression=compression)
    for name, value in VALUES.items():
        assert_same(store.load(f"{compression}/{name}"), value)
    assert store.list() == sorted(f"{compression}/{name}" for name in VALUES)


@pytest.mark.parametrize("compression", ["lz4", "zstd", ("zstd", 9)])
def test_compression_shrinks_what_is_stored(store, compression):
    value = {"zeros": np.zeros(1 << 18), "text": "abc" * 10_000}
    store.save("raw", value, compression="none")
    store.save("packed", value, compression=compression)
    raw, packed = store.info("raw"), store.info("packed")
    data_length = sum(f["length"] for f in raw["frames"])
    assert data_length == sum(f["length"] for f in packed["frames"]) >= (1 << 18) * 8
    assert raw["size"] > data_length
    assert packed["size"] < raw["size"] // 10
    assert_same(store.load("packed"), value)


def test_store_default_compression_and_per_call_override(store_location):
    value = np.zeros(1 << 18)
    packed = store_location.open(compression="zstd")
    packed.save("default", value)
    packed.save("override", value, compression="none")
    assert packed.info("default")["size"] < 10_000
    assert packed.info("override")["size"] > value.nbytes
    assert_same(packed.load("default"), value)


def test_overwrite_replaces_the_value(store):
    store.save("k", np.arange(10))
    store.save("k", "second")
    assert store.load("k") == "second"
    store["k"] = {"third": 3}
    assert store["k"] == {"third": 3}
    assert store.list() == ["k"]


def test_load_options_are_passed_to_loads(store):
    store.save("a", np.arange(100.0), compression="none")
    view = store.load("a", zero_copy=True)
    assert not view.flags.writeable
    copy = store.load("a")
    copy[0] = 5.0  # a plain load gives a writable array
    assert store.load("a")[0] == 0.0


# -- signing and pickle refusal -------------------------------------------------------------------


def test_signed_save_loads_with_the_key_and_refuses_another(store_location):
    signer = store_location.open(freight=freight.Freight(key=KEY))
    value = {"a": np.arange(1000), "df": VALUES["pandas"]}
    signer.save("signed", value)
    info = signer.info("signed")
    assert info["signed"] is True and "signed" in info["flags"]
    assert_same(signer.load("signed"), value)
    assert_same(store_location.open(freight=freight.Freight(key=[WRONG_KEY, KEY])).load("signed"), value)
    # With a list of keys, the first one signs.
    store_location.open(freight=freight.Freight(key=[KEY, WRONG_KEY])).save("rotated", [1])
    assert signer.load("rotated") == [1]
    wrong = store_location.open(freight=freight.Freight(key=WRONG_KEY))
    with pytest.raises(IntegrityError, match="signature"):
        wrong.load("signed")


def test_sign_key_argument_signs_without_a_keyed_freight(store_location):
    plain = store_location.open()
    plain.save("s", [1, 2, 3], sign_key=KEY)
    plain.save("u", [1, 2, 3])
    assert plain.info("s")["signed"] is True
    assert plain.info("u")["signed"] is False
    assert store_location.open(freight=freight.Freight(key=KEY)).load("s") == [1, 2, 3]
    with pytest.raises(IntegrityError):
        store_location.open(freight=freight.Freight(key=WRONG_KEY)).load("s")
    # A store that requires signatures refuses an unsigned value.
    with pytest.raises(IntegrityError):
        store_location.open(freight=freight.Freight(key=KEY)).load("u")


def test_load_accepts_the_key_option_it_documents():
    """Store.load's docstring lists ``key`` among the options passed to ``loads``; the method's
    own first parameter is also called ``key``, so ``load(name, key=...)`` is a TypeError.
    (Python-side, the same on every backend: checked once.)"""
    store = fs.open("memory://")
    store.save("s", [1, 2, 3], sign_key=KEY)
    assert store.load("s", key=KEY) == [1, 2, 3]
    with pytest.raises(IntegrityError):
        store.load("s", key=WRONG_KEY)


def test_tampered_stored_file_is_refused(store_location):
    if store_location.root is None:
        pytest.skip("needs the stored bytes on disk")
    store = store_location.open(freight=freight.Freight(key=KEY))
    store.save("v", np.arange(1000, dtype=np.int64), compression="none")
    (path,) = (p for p in store_location.root.rglob("*") if p.is_file())
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError):
        store.load("v")


def test_allow_pickle_false_refuses_a_stored_closure(store_location):
    store_location.open().save("fn", _make_closure())
    store_location.open().save("arr", np.arange(3))
    safe = store_location.open(freight=freight.Freight(allow_pickle=False))
    assert safe.info("fn")["needs_pickle"] is True
    with pytest.raises(UnsafePayloadError, match="pickle"):
        safe.load("fn")
    with pytest.raises(UnsafePayloadError):
        store_location.open().load("fn", allow_pickle=False)
    np.testing.assert_array_equal(safe.load("arr"), np.arange(3))  # pickle-free values still load


# -- info -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pandas", "polars", "arrow", "sparse_csr", "closure", "float64", "nested_dict"])
def test_info_matches_the_header_of_the_stored_payload(store_location, name):
    store = store_location.open()
    value = VALUES[name]
    before = time.time()
    store.save(name, value, compression="zstd")
    info = store.info(name)
    expected = freight.inspect(freight.dumps(value, compression="zstd", checksum=True))
    assert info["key"] == name
    assert info["size"] == expected["total_length"]
    assert info["total_length"] == info["size"]
    # The description inspect() gives, built by the same code: the same keys mean the same things.
    assert set(info) == set(expected) | {"key", "size", "modified", "etag"}
    for field in ("format_version", "flags", "tags", "needs_pickle", "signed", "producer", "header_length", "tree"):
        assert info[field] == expected[field], field
    assert info["signature_ok"] is None
    # Frames as inspect describes them, less what needs their bytes (only the header was read).
    unread = {"offset": None, "checksum_ok": None}
    assert info["frames"] == [{**frame, **unread} for frame in expected["frames"]]
    assert abs(info["modified"] - before) < 600
    files = store_location.files()
    if files is not None:
        assert list(files.values()) == [info["size"]]


def test_info_reflects_the_kind_of_value(store):
    store.save("df", VALUES["pandas"])
    store.save("fn", _make_closure())
    store.save("plain", [1, 2, 3])
    df, fn, plain = store.info("df"), store.info("fn"), store.info("plain")
    assert "pandas.DataFrame" in df["tags"] and "pandas" in df["producer"]
    assert df["producer"]["pandas"] == pd.__version__
    assert df["needs_pickle"] is False and df["signed"] is False
    assert fn["needs_pickle"] is True
    assert plain["tags"] == [] and plain["needs_pickle"] is False and plain["frames"] == []


def test_info_of_a_missing_key(store):
    with pytest.raises(KeyNotFoundError, match="'missing'|\"missing\""):
        store.info("missing")


def test_info_of_an_object_that_is_not_a_payload(store):
    """An empty object was a StorageError on every backend ("Requested range was invalid; check
    that the folder exists and is writable"): now what a payload that is not one gives."""
    store.put_bytes("empty", b"")
    store.put_bytes("junk", b"not a payload")
    for key in ("empty", "junk"):
        with pytest.raises(freight.DeserializationError, match="not a freight payload"):
            store.info(key)
        with pytest.raises(freight.DeserializationError, match="not a freight payload"):
            store.load(key)


# -- the store itself -----------------------------------------------------------------------------


def test_url_backend_and_repr(store_location, tmp_path):
    store = store_location.open()
    assert store.backend == store_location.backend
    if store_location.backend == "file":
        assert store.url == f"file://{store_location.root.resolve()}"
    else:
        assert store.url == store_location.url
    assert repr(store) == f"<freight.storage.Store {store.url}>"


def test_file_urls_and_plain_paths_name_the_same_store(tmp_path, monkeypatch):
    root = tmp_path / "a" / "b"
    by_path = fs.open(str(root))  # created by the first save, not by open (issue 23)
    assert not root.exists()
    by_path.save("x", 1)
    assert root.is_dir()
    assert fs.open(f"file://{root}").load("x") == 1
    assert fs.open(root).url == f"file://{root.resolve()}"  # a PathLike works too
    monkeypatch.chdir(tmp_path)
    relative = fs.open("file://./a/b")
    assert relative.url == f"file://{root.resolve()}" and relative.list() == ["x"]


def test_s3_trailing_slash_and_prefix_isolation(s3_server):
    def s3(prefix):
        return fs.open(
            f"s3://{s3_server.bucket}/{prefix}",
            endpoint_url=s3_server.endpoint,
            access_key_id=s3_server.access_key_id,
            secret_access_key=s3_server.secret_access_key,
            region=s3_server.region,
            allow_http=True,
        )

    s3_server.start()
    a, a2, slash = s3("iso/p"), s3("iso/p2"), s3("iso/p/")
    a.save("k", "in p")
    a2.save("k", "in p2")
    assert slash.url == f"s3://{s3_server.bucket}/iso/p"
    assert slash.load("k") == "in p" and a2.load("k") == "in p2"
    assert a.list() == ["k"] and a2.list() == ["k"]
    assert s3("iso").list() == ["p/k", "p2/k"]


@pytest.mark.parametrize("prefix", ["", "my prefix/%41", "a#b/é"])
def test_s3_prefixes(s3_server, prefix):
    """The bucket's root, and prefixes with characters that S3 paths percent-encode."""
    s3_server.start()
    bucket = s3_server.new_bucket()
    url = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
    store = fs.open(
        url,
        endpoint_url=s3_server.endpoint,
        access_key_id=s3_server.access_key_id,
        secret_access_key=s3_server.secret_access_key,
        region=s3_server.region,
        allow_http=True,
    )
    assert store.url == url
    store.save("k", prefix)
    store.save("d/%41", 1)
    assert store.list() == ["d/%41", "k"] and store.load("k") == prefix
    assert store.delete_prefix("d/") == 1 and store.list() == ["k"]


def test_s3_through_the_environment_only(s3_env):
    store = fs.open(f"s3://{s3_env.bucket}/from-env")
    assert store.backend == "s3"
    store.save("df", VALUES["pandas"])
    assert_same(store.load("df"), VALUES["pandas"])
    assert store.list() == ["df"]
    assert (s3_env.data_dir / s3_env.bucket / "from-env" / "df").is_file()


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("", "folder path"),
        ("file://", "folder path"),
        ("ftp://host/x", "unknown scheme"),
        ("s3://", "bucket"),
        ("s3:///prefix", "bucket"),
    ],
)
def test_malformed_urls(url, match):
    with pytest.raises(StorageError, match=match) as exc:
        fs.open(url)
    assert repr(url) in str(exc.value) or f'"{url}"' in str(exc.value)


def test_a_folder_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"not a folder")
    with pytest.raises(StorageError, match="cannot create the folder"):
        fs.open(str(blocker / "store"))


def test_memory_stores_are_separate():
    a, b = fs.open("memory://"), fs.open("memory://")
    a.save("k", 1)
    assert "k" in a and "k" not in b and b.list() == []


# -- the stored layout: freight.load and the CLI read a local store's files -----------------------


def test_stored_files_are_dumps_payloads(tmp_path):
    store = fs.open(tmp_path / "store")
    value = {"arr": np.arange(1000.0), "df": VALUES["pandas"], "text": "x" * 100}
    store.save("run-3/v", value, compression="none")
    path = tmp_path / "store" / "run-3" / "v"
    assert path.read_bytes() == bytes(freight.dumps(value, compression="none", checksum=True))
    assert_same(freight.load(path), value)
    freight.verify(path.read_bytes())

    store.save("big", np.arange(1 << 18, dtype=np.float64))  # >= 1 MiB: freight.load maps it
    np.testing.assert_array_equal(freight.load(tmp_path / "store" / "big"), np.arange(1 << 18, dtype=np.float64))

    signed = fs.open(tmp_path / "store", freight=freight.Freight(key=KEY))
    signed.save("signed", [1, 2])
    assert freight.load(tmp_path / "store" / "signed", key=KEY) == [1, 2]
    with pytest.raises(IntegrityError):
        freight.load(tmp_path / "store" / "signed", key=WRONG_KEY)


def test_cli_inspects_a_stored_file(tmp_path):
    store = fs.open(tmp_path / "store")
    store.save("df", VALUES["pandas"])
    path = tmp_path / "store" / "df"
    out = subprocess.run(
        [sys.executable, "-m", "freight", "inspect", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "pandas.DataFrame" in out.stdout
    assert f"{store.info('df')['size']:,} bytes" in out.stdout
    verify = subprocess.run(
        [sys.executable, "-m", "freight", "verify", str(path)], capture_output=True, text=True, timeout=60
    )
    assert verify.returncode == 0, verify.stderr


def test_the_stored_objects_as_they_are(store):
    """The byte-level API: head, get_bytes, put_bytes and list_objects reach stored objects
    without decoding them, on every backend."""
    store.save("v", {"a": np.arange(10)})
    store.put_bytes("raw/parts", [b"ab", memoryview(b"cd"), bytearray(b"ef")])
    store.put_bytes("raw/one", b"xyz")
    assert bytes(store.get_bytes("raw/parts")) == b"abcdef" and bytes(store.get_bytes("raw/one")) == b"xyz"
    head = store.head("v")
    assert isinstance(head, freight.storage.StoredObject) and head.key == "v"
    assert head.size == len(store.get_bytes("v")) == store.info("v")["size"]
    assert head.etag is None or isinstance(head.etag, str)
    assert freight.loads(store.get_bytes("v"))["a"].tolist() == list(range(10))  # an ordinary payload
    listed = store.list_objects()
    assert [o.key for o in listed] == ["raw/one", "raw/parts", "v"]
    assert [o.size for o in listed] == [3, 6, head.size]
    assert store.list_objects("raw/") == listed[:2]
    with pytest.raises(freight.storage.KeyExistsError):
        store.put_bytes("raw/one", b"other", if_absent=True)
    with pytest.raises(KeyNotFoundError):
        store.head("missing")
    # A new value gets a new etag where the backend keeps them.
    store.save("v", 2)
    again = store.head("v")
    assert again.etag is None or again.etag != head.etag
