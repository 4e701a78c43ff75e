"""freight.integrations.proxystore: proxies resolved in other processes (spawn) through a
FileConnector and a RedisConnector to a real redis-server; keys, allow_pickle, errors."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import uuid
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd
import polars as pl
import pytest
import torch
from proxystore.connectors.file import FileConnector
from proxystore.connectors.redis import RedisConnector
from proxystore.proxy import Proxy, extract
from proxystore.serialize import SerializationError as ProxyStoreSerializationError
from proxystore.store import get_store, unregister_store
from proxystore.store.utils import get_key

import freight
from freight.integrations.proxystore import (
    FreightDeserializer,
    FreightSerializer,
    MissingKeyError,
    configure,
    freight_error,
    freight_store,
    key_env_var,
    unconfigure,
)

pytestmark = pytest.mark.timeout(300)

KEY = b"proxystore-test-key-0123456789abcdef"


# --- run in the spawned worker (pickled by reference: module-level) -------------------------------


def resolve_in_child(proxy, store=None, key=None, env=None, allow_pickle=None, call=None):
    """Resolves ``proxy`` in this (other) process with the given local configuration, restored
    afterwards. Returns ("ok", value) or ("error", freight error type, its message, outer type)."""
    from freight.integrations.proxystore import configure, freight_error, unconfigure

    saved = {k: os.environ.get(k) for k in env or {}}
    if key is not None or allow_pickle is not None:
        configure(store, key=key, allow_pickle=allow_pickle)
    os.environ.update(env or {})
    try:
        try:
            value = extract(proxy)
            if call is not None:
                value = value(*call)
        except Exception as e:
            fe = freight_error(e)
            return ("error", type(fe).__name__ if fe else None, str(fe) if fe else repr(e), type(e).__name__)
        return ("ok", value)
    finally:
        if store is not None:
            unconfigure(store)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def make_closure(arr):
    offset = 1.5

    def scale(x):
        return arr * x + offset

    return scale


class Gadget:
    """Unpickling it runs code (creates the canary file)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as executor:
        yield executor


@pytest.fixture(scope="module", params=["file", "redis"])
def connector_kind(request):
    return request.param


@pytest.fixture
def connector(connector_kind, request, tmp_path):
    if connector_kind == "file":
        return FileConnector(str(tmp_path / "ps"))
    host, port = request.getfixturevalue("redis_server")
    return RedisConnector(host, port)


@pytest.fixture
def store_name():
    name = f"freight-test-{uuid.uuid4().hex[:12]}"
    yield name
    unconfigure(name)
    if get_store(name) is not None:
        unregister_store(name)


def reopen(connector):
    """A new connector like ``connector`` (closing a store closes its connector; a FileConnector
    then removes its folder)."""
    return type(connector)(**connector.config())


def child(pool, *args, **kwargs):
    return pool.submit(resolve_in_child, *args, **kwargs).result(timeout=240)


# --- values through both connectors --------------------------------------------------------------


def _values():
    rng = np.random.default_rng(7)
    return {
        "numpy": rng.random((300, 200)),
        "numpy-fortran": np.asfortranarray(rng.integers(0, 1000, (50, 40), dtype=np.int32)),
        "pandas": pd.DataFrame(
            {
                "i": np.arange(1000, dtype=np.int64),
                "f": rng.random(1000),
                "s": [f"row{i}" for i in range(1000)],
                "t": pd.date_range("2024-01-01", periods=1000, freq="min"),
                "c": pd.Categorical(["a", "b", "c", "a"] * 250),
            }
        ),
        "polars": pl.DataFrame({"a": np.arange(1000), "b": [f"x{i}" for i in range(1000)], "c": rng.random(1000)}),
        "torch": torch.arange(6000, dtype=torch.float32).reshape(60, 100),
    }


def _check_equal(kind, got, want):
    if kind.startswith("numpy"):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype and got.flags.f_contiguous == want.flags.f_contiguous
    elif kind == "pandas":
        pd.testing.assert_frame_equal(got, want)
    elif kind == "polars":
        assert got.equals(want)
    elif kind == "torch":
        assert torch.equal(got, want) and got.dtype == want.dtype
    else:  # pragma: no cover
        raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["numpy", "numpy-fortran", "pandas", "polars", "torch"])
def test_proxy_resolves_in_another_process(pool, connector, store_name, kind):
    value = _values()[kind]
    with freight_store(store_name, connector, compression="lz4") as store:
        proxy = store.proxy(value)
        # What travels is freight's payload: the connector holds a freight envelope.
        raw = store.connector.get(get_key(proxy))
        assert freight.inspect(raw)["frames"]
        status, got = child(pool, proxy)
        assert status == "ok", got
        _check_equal(kind, got, value)
        # And in this process, without the cached target.
        _check_equal(kind, store.get(get_key(proxy)), value)


def test_closure_resolves_and_runs_in_another_process(pool, connector, store_name):
    arr = np.arange(10.0)
    # populate_target=False: a proxy populated with a function records its class, FunctionType,
    # which pickle cannot find by name (a ProxyStore limitation, whatever the serializer).
    with freight_store(store_name, connector, populate_target=False) as store:
        proxy = store.proxy(make_closure(arr))
        status, got = child(pool, proxy, call=(2.0,))
        assert status == "ok", got
        np.testing.assert_array_equal(got, arr * 2.0 + 1.5)
        # A lambda defined here (cloudpickled by value) too.
        weights = np.ones(3)
        status, got = child(pool, store.proxy(lambda x: float((weights * x).sum())), call=(4,))
        assert (status, got) == ("ok", 12.0)


# --- keys ----------------------------------------------------------------------------------------


def test_key_never_travels_in_a_proxy(connector, store_name):
    with freight_store(store_name, connector, key=KEY, compression="zstd", allow_pickle=False) as store:
        proxy = store.proxy(np.arange(100))
        for shipped in (pickle.dumps(proxy), pickle.dumps(store.config())):
            assert KEY not in shipped
            assert b"freight._api" not in shipped  # no Freight object (it would carry its key)
            assert b"FreightDeserializer" in shipped  # by reference to the class
        ser, de = store.serializer, store.deserializer
        assert isinstance(ser, FreightSerializer) and isinstance(de, FreightDeserializer)
        assert pickle.loads(pickle.dumps(de)) == de and de.signed
        assert de.options == {"compression": "zstd", "allow_pickle": False}
        # The payload is signed with the key configured here.
        raw = store.connector.get(get_key(proxy))
        freight.verify(raw, key=KEY)
        with pytest.raises(freight.IntegrityError):
            freight.verify(raw, key=b"another key")


def test_signed_store_resolves_where_a_key_is_configured(pool, connector, store_name):
    arr = np.arange(1000.0)
    with freight_store(store_name, connector, key=KEY) as store:
        # configure() in the resolving process
        status, got = child(pool, store.proxy(arr), store=store_name, key=KEY)
        assert status == "ok", got
        np.testing.assert_array_equal(got, arr)
        # the per-store environment variable
        status, got = child(pool, store.proxy(arr), env={key_env_var(store_name): KEY.decode()})
        assert status == "ok", got
        # FREIGHT_KEY, hex-encoded
        status, got = child(pool, store.proxy(arr), env={"FREIGHT_KEY": "hex:" + KEY.hex()})
        assert status == "ok", got
        np.testing.assert_array_equal(got, arr)


def test_signed_store_without_a_key_refuses_to_resolve(pool, connector, store_name):
    with freight_store(store_name, connector, key=KEY) as store:
        status, fe_type, message, outer = child(pool, store.proxy(np.arange(10)))
    assert (status, fe_type) == ("error", "MissingKeyError")
    assert outer == "ProxyResolveError"  # ProxyStore's wrapper; the freight error is its root cause
    assert store_name in message and "configure(" in message and key_env_var(store_name) in message


def test_wrong_key_and_forged_payloads_are_refused(pool, connector, store_name):
    with freight_store(store_name, connector, key=KEY) as store:
        status, fe_type, message, _ = child(pool, store.proxy(np.arange(10)), store=store_name, key=b"wrong key")
        assert (status, fe_type) == ("error", "IntegrityError")
        assert "signature" in message
        # Someone with write access to the connector stores an unsigned payload under a key.
        forged = store.proxy_from_key(store.connector.put(freight.dumps(np.zeros(3))))
        status, fe_type, message, _ = child(pool, forged, store=store_name, key=KEY)
        assert (status, fe_type) == ("error", "IntegrityError")
        assert "not signed" in message
        # A process with a key configured requires a signature even from an unsigned store's proxy.
    with freight_store(store_name + "-plain", reopen(connector)) as plain:
        status, fe_type, _, _ = child(pool, plain.proxy(np.arange(3)), store=store_name + "-plain", key=KEY)
        assert (status, fe_type) == ("error", "IntegrityError")
        status, got = child(pool, plain.proxy(np.arange(3)))
        assert status == "ok"


def test_put_without_a_key_in_a_signed_store_fails_clearly(connector, store_name):
    with freight_store(store_name, connector, key=KEY) as store:
        unconfigure(store_name)  # as in a process that rebuilt the store from its config
        with pytest.raises(MissingKeyError, match="configure"):
            store.put(np.arange(3))
        configure(store_name, key=KEY)
        assert store.get(store.put(np.arange(3))).tolist() == [0, 1, 2]


def test_a_key_set_in_the_environment_after_first_use_is_used(connector, store_name, monkeypatch):
    # The store's codec is cached between calls; a key the environment gains (or loses) later
    # must still be seen on the next put or get, per-store variable and FREIGHT_KEY alike.
    with freight_store(store_name, connector, key=KEY, cache_size=0) as store:
        unconfigure(store_name)
        with pytest.raises(MissingKeyError):
            store.put(np.arange(3))
        for var in (key_env_var(store_name), "FREIGHT_KEY"):
            monkeypatch.setenv(var, "hex:" + KEY.hex())
            key = store.put(np.arange(3))
            assert store.get(key).tolist() == [0, 1, 2]
            monkeypatch.setenv(var, "another key")
            with pytest.raises(ProxyStoreSerializationError) as info:
                store.get(key)  # signed under KEY, read under another
            assert isinstance(freight_error(info.value), freight.IntegrityError)
            monkeypatch.delenv(var)
        with pytest.raises(MissingKeyError):
            store.put(np.arange(3))


# --- allow_pickle --------------------------------------------------------------------------------


def test_allow_pickle_false_refuses_pickled_payloads(pool, connector, store_name, tmp_path):
    canary = tmp_path / "canary"
    with freight_store(store_name, connector, allow_pickle=False, populate_target=False) as store:
        # Arrays and frames need no pickle: they resolve.
        status, got = child(pool, store.proxy(_values()["pandas"]))
        assert status == "ok", got
        # A closure needs pickle: refused when resolved.
        status, fe_type, message, _ = child(pool, store.proxy(make_closure(np.arange(3))), call=(1,))
        assert (status, fe_type) == ("error", "UnsafePayloadError")
        assert "allow_pickle=False" in message
        # A gadget written straight into the connector: refused before anything runs.
        forged = store.proxy_from_key(store.connector.put(freight.dumps(Gadget(str(canary)))))
        status, fe_type, _, _ = child(pool, forged)
        assert (status, fe_type) == ("error", "UnsafePayloadError")
        assert not canary.exists()
    # A resolving process can tighten a store created with allow_pickle=True.
    with freight_store(store_name + "-p", reopen(connector), populate_target=False) as store:
        proxy = store.proxy(make_closure(np.arange(3)))
        status, fe_type, _, _ = child(pool, proxy, store=store_name + "-p", allow_pickle=False)
        assert (status, fe_type) == ("error", "UnsafePayloadError")
        status, got = child(pool, store.proxy(make_closure(np.arange(3))), call=(1,))
        assert status == "ok"
        np.testing.assert_array_equal(got, np.arange(3) + 1.5)


# --- this process --------------------------------------------------------------------------------


def test_store_errors_in_this_process(connector, store_name):
    with freight_store(store_name, connector, cache_size=0, populate_target=False) as store:
        key = store.connector.put(b"not a freight payload")
        with pytest.raises(ProxyStoreSerializationError) as info:
            store.get(key)
        assert isinstance(freight_error(info.value), freight.DeserializationError)
        proxy = store.proxy_from_key(key)
        assert isinstance(proxy, Proxy)
        with pytest.raises(Exception) as info:
            extract(proxy)
        assert isinstance(freight_error(info.value), freight.DeserializationError)
    with pytest.raises(freight.OptionError, match="'compresion'; did you mean 'compression'"):
        freight_store(store_name + "-x", connector, compresion="lz4")
    with pytest.raises(TypeError, match="registry"):
        freight_store(store_name + "-y", connector, registry=freight.Registry())
    with pytest.raises(freight.FreightError):
        freight_store(store_name + "-z", connector, compression="no-such-codec")
