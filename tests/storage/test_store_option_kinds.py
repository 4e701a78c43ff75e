"""Option values of the wrong kind given to stores: ``Store.save``, ``Store.load``,
``freight.load`` and ``freight.storage.open`` raise :class:`freight.OptionError` naming the option,
when called (opened), never a bare TypeError, never a truth value read from ``"no"``, never a key
made of ``bytes(123)``'s zero bytes, and never a save left unsigned by an empty list of keys."""

from __future__ import annotations

import numpy as np
import pytest

import freight
import freight.storage

KEY = b"k" * 32
OTHER_KEY = b"o" * 32

_KEY_WORDS = "a key must be bytes"


@pytest.fixture
def store(tmp_path):
    return freight.storage.open(tmp_path / "store")


@pytest.mark.parametrize(
    ("sign_key", "words"),
    [
        (123, _KEY_WORDS),  # bytes(123): 123 zero bytes
        (True, _KEY_WORDS),  # bytes(True): one zero byte
        ([123], _KEY_WORDS),
        ("secret", _KEY_WORDS),
        ([b"", KEY], "an empty key signs nothing"),
        (b"", "an empty key signs nothing"),
        ([], "key= got an empty list of keys"),  # it saved unsigned, even with a keyed Freight
    ],
)
def test_a_sign_key_that_is_no_key_is_refused_before_anything_is_saved(tmp_path, sign_key, words):
    store = freight.storage.open(tmp_path / "store", freight=freight.Freight(key=KEY))
    with pytest.raises(freight.OptionError, match=words):
        store.save("v", [1, 2, 3], sign_key=sign_key)
    assert store.list() == []


def test_sign_key_takes_what_key_takes(store):
    store.save("one", [1], sign_key=bytearray(KEY))
    store.save("list", [2], sign_key=[KEY, OTHER_KEY])  # the first signs
    store.save("tuple", [3], sign_key=(memoryview(OTHER_KEY),))
    assert freight.Freight(key=KEY).loads(store._native.get("one")) == [1]
    assert freight.Freight(key=KEY).loads(store._native.get("list")) == [2]
    assert freight.Freight(key=OTHER_KEY).loads(store._native.get("tuple")) == [3]
    with pytest.raises(freight.IntegrityError):
        freight.Freight(key=OTHER_KEY).loads(store._native.get("list"))


def test_a_stores_own_keys_sign_with_the_first(tmp_path):
    store = freight.storage.open(tmp_path / "store", freight=freight.Freight(key=[OTHER_KEY, KEY]))
    store.save("v", [1])
    assert freight.Freight(key=OTHER_KEY).loads(store._native.get("v")) == [1]


@pytest.mark.parametrize("value", ["yes", "no", 1, 2, [True]])
def test_yes_no_options_of_stores_and_files_take_only_booleans(store, tmp_path, value):
    store.save("v", np.arange(3), compression="none")
    freight.dump(np.arange(3), tmp_path / "f.frt", compression="none")
    for call, name in (
        (lambda: store.save("w", 1, if_absent=value), "if_absent"),
        (lambda: store.load("v", mmap=value), "mmap"),
        (lambda: freight.load(tmp_path / "f.frt", mmap=value), "mmap"),
        (lambda: freight.Freight().load(tmp_path / "f.frt", mmap=value), "mmap"),
    ):
        with pytest.raises(freight.OptionError) as info:
            call()
        assert str(info.value) == f"{name}= takes True or False; got {value!r}"
    assert store.list() == ["v"]


def test_yes_no_options_of_stores_take_numpy_booleans(store, tmp_path):
    store.save("v", np.arange(3), compression="none", if_absent=np.bool_(True))
    back = store.load("v", mmap=np.bool_(True))
    assert not back.flags.writeable  # a view of the mapping: mmap=np.True_ is mmap=True
    freight.dump(np.arange(3), tmp_path / "f.frt", compression="none")
    assert not freight.load(tmp_path / "f.frt", mmap=np.bool_(True)).flags.writeable
    assert freight.load(tmp_path / "f.frt", mmap=np.bool_(False)).flags.writeable


def test_a_compression_the_codec_refuses_is_refused_when_the_store_is_opened(tmp_path):
    for compression in ("gzip", ("zstd", 99), 5):
        with pytest.raises(freight.OptionError, match="compression must be None"):
            freight.storage.open(tmp_path / "store", compression=compression)
    for compression in (None, "none", "lz4", ("zstd", 5), "auto", ("auto", 1e8)):
        freight.storage.open(tmp_path / "store", compression=compression).save("v", [1])


@pytest.mark.parametrize("codec", ["abc", {"allow_pickle": False}, freight.FreightOptions()])
def test_a_freight_that_is_no_freight_is_refused_when_the_store_is_opened(tmp_path, codec):
    with pytest.raises(freight.OptionError, match=r"freight= takes a freight\.Freight"):
        freight.storage.open(tmp_path / "store", freight=codec)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"allow_http": "yes"}, "allow_http= takes True or False; got 'yes'"),
        ({"allow_http": 1}, "allow_http= takes True or False; got 1"),
        ({"max_retries": "5"}, "max_retries= takes a whole number of retries, 0 or more; got '5'"),
        ({"max_retries": -1}, "max_retries= takes a whole number of retries, 0 or more; got -1"),
        ({"max_retries": True}, "max_retries= takes a whole number of retries, 0 or more; got True"),
        ({"max_retries": 2.5}, "max_retries= takes a whole number of retries, 0 or more; got 2.5"),
        ({"region": 5}, "region= takes a str"),
        ({"endpoint_url": b"http://x"}, "endpoint_url= takes a str"),
        ({"access_key_id": 1}, "access_key_id= takes a str"),
        ({"secret_access_key": ["s"]}, "secret_access_key= takes a str"),
        ({"session_token": 1}, "session_token= takes a str"),
        ({"timeout": "5"}, "timeout= takes a number of seconds above 0"),
        ({"connect_timeout": True}, "connect_timeout= takes a number of seconds above 0"),
    ],
)
@pytest.mark.parametrize("url", ["s3://bucket/prefix", "memory://", "file-store"])
def test_store_settings_of_the_wrong_kind_name_the_setting(tmp_path, monkeypatch, url, options, words):
    monkeypatch.chdir(tmp_path)  # "file-store": a folder that does not exist yet
    with pytest.raises(freight.OptionError) as info:
        freight.storage.open(url, **options)
    assert str(info.value).startswith(words), info.value


def test_store_settings_of_the_right_kind_are_taken(tmp_path):
    store = freight.storage.open(
        "s3://bucket/prefix",
        region="eu-west-1",
        endpoint_url="https://example.invalid",
        max_retries=np.int64(2),
        timeout=np.float32(2.5),
        connect_timeout=1,
        allow_http=np.bool_(False),
    )
    assert store.url.startswith("s3://bucket/prefix")
    freight.storage.open(tmp_path / "store", max_retries=0, timeout=30.0).save("v", [1])
