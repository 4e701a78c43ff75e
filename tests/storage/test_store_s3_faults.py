"""S3 faults against the real s3s-fs server (its own instance for this module: these tests kill
it): wrong credentials, a missing bucket, a server that is down, and a server killed in the
middle of a streamed upload (the old value survives, no partial object appears)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import freight.storage as fs
from freight.exceptions import KeyNotFoundError, StorageError

MiB = 1 << 20


def _open(server, prefix: str = "faults", bucket: str | None = None, **overrides):
    return fs.open(f"s3://{bucket or server.bucket}/{prefix}", **server.store_options(**overrides))


@pytest.fixture
def server(s3_server):
    s3_server.start()
    yield s3_server
    s3_server.start()  # for the next test, whatever this one did


def _refused(call, store, what: str) -> str:
    with pytest.raises(StorageError) as exc:
        call()
    assert not isinstance(exc.value, KeyNotFoundError), what
    message = str(exc.value)
    assert message.startswith(store.url + ":"), (what, message)
    return message


@pytest.mark.parametrize(
    "credentials",
    [{"secret_access_key": "not-the-secret"}, {"access_key_id": "nobody", "secret_access_key": "nothing"}],
    ids=["wrong-secret", "unknown-key-id"],
)
def test_wrong_credentials(server, credentials):
    good = _open(server, "creds")
    good.save("x", 1)
    bad = _open(server, "creds", **credentials)
    calls = {
        "list": lambda: bad.list(),
        "save": lambda: bad.save("y", 1),
        "load": lambda: bad.load("x"),
        "exists": lambda: bad.exists("x"),
        "in": lambda: "x" in bad,
        "info": lambda: bad.info("x"),
        "delete": lambda: bad.delete("x"),
        "delete_prefix": lambda: bad.delete_prefix("x"),
        "large save": lambda: bad.save("big", np.zeros(3 * MiB), compression="none"),
    }
    for what, call in calls.items():
        message = _refused(call, bad, what)
        assert "credentials" in message and "AWS_SECRET_ACCESS_KEY" in message, (what, message)
    assert good.list() == ["x"] and good.load("x") == 1  # nothing changed


def test_wrong_credentials_from_the_environment(s3_env, monkeypatch):
    _open(s3_env, "env-creds").save("x", 1)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    bad = fs.open(f"s3://{s3_env.bucket}/env-creds")
    message = _refused(lambda: bad.load("x"), bad, "load")
    assert "credentials" in message


def test_missing_bucket(server):
    store = _open(server, bucket="no-such-bucket")
    for what, call in {"list": lambda: store.list(), "delete_prefix": lambda: store.delete_prefix("a")}.items():
        message = _refused(call, store, what)
        assert "NoSuchBucket" in message and "bucket exists" in message, (what, message)
    # A HEAD of a key in a missing bucket is a bodiless 404: the key is reported missing.
    with pytest.raises(StorageError):
        store.load("x")
    assert not (server.data_dir / "no-such-bucket").exists()


def test_a_server_that_is_down(server):
    store = _open(server, "down", max_retries=1, timeout=5, connect_timeout=1)
    store.save("x", 1)
    server.kill()
    for what, call in {
        "save": lambda: store.save("y", 2),
        "load": lambda: store.load("x"),
        "list": lambda: store.list(),
        "exists": lambda: store.exists("x"),
    }.items():
        message = _refused(call, store, what)
        assert "endpoint" in message, (what, message)
    server.restart()
    assert store.list() == ["x"] and store.load("x") == 1


def test_http_endpoint_needs_allow_http(server):
    store = _open(server, "http", allow_http=False, max_retries=0)
    message = _refused(lambda: store.save("x", 1), store, "save")
    assert "AWS_ALLOW_HTTP" in message


def _kill_mid_upload(server, save) -> BaseException | None:
    """Runs ``save`` in a thread, SIGKILLs the server once the upload has parts on its disk, and
    returns what ``save`` raised."""
    outcome: dict[str, BaseException | None] = {}

    def run() -> None:
        try:
            save()
            outcome["error"] = None
        except BaseException as e:  # noqa: BLE001 - handed to the test
            outcome["error"] = e

    def uploading() -> bool:
        return any(name.startswith(".upload_id-") for name in os.listdir(server.data_dir))

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 30
    while not uploading() and thread.is_alive():
        assert time.monotonic() < deadline, "no upload part appeared"
        time.sleep(0.001)
    server.kill()
    thread.join(timeout=120)
    assert not thread.is_alive()
    return outcome["error"]


@pytest.mark.parametrize("if_absent", [False, True], ids=["replace", "if-absent"])
def test_server_killed_mid_upload(server, if_absent):
    prefix = f"killed-{if_absent}"
    store = _open(server, prefix, max_retries=1, timeout=5, connect_timeout=1)
    old = np.arange(1000, dtype=np.int64)
    store.save("big", old)
    size_before = (server.data_dir / server.bucket / prefix / "big").stat().st_size
    new = np.full(100 * MiB, 2, dtype=np.uint8)
    key = "fresh" if if_absent else "big"

    error = _kill_mid_upload(server, lambda: store.save(key, new, compression="none", if_absent=if_absent))

    assert isinstance(error, StorageError) and not isinstance(error, KeyNotFoundError), repr(error)
    assert str(error).startswith(store.url + ":") and f'"{key}"' in str(error)
    server.restart()
    assert store.list() == ["big"]
    assert np.array_equal(store.load("big"), old)
    assert (server.data_dir / server.bucket / prefix / "big").stat().st_size == size_before
    assert not store.exists("fresh")
    on_disk = sorted(p.name for p in (server.data_dir / server.bucket / prefix).iterdir())
    assert on_disk == ["big"], on_disk  # no partial object, no staging object
    # The store works again, also for the key the upload was writing.
    store.save(key, new[: 17 * MiB], compression="none", if_absent=if_absent)
    assert np.array_equal(store.load(key), new[: 17 * MiB])


@pytest.mark.parametrize("name", ["timeout", "connect_timeout"])
@pytest.mark.parametrize("seconds", [-1.0, 0.0, float("inf"), float("nan")])
def test_a_timeout_that_is_no_number_of_seconds_is_an_option_error(name, seconds):
    """Rust's Duration::from_secs_f64 panicked on these (a PanicException, not a FreightError)."""
    import freight.storage

    with pytest.raises(freight.OptionError, match=f"{name}= takes a number of seconds above 0"):
        freight.storage.open("s3://bucket/prefix", **{name: seconds})
