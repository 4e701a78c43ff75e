"""freight.integrations.celery: real worker processes (``celery -A celery_app worker --pool=solo``)
on a real redis-server (broker and result backend), started once for the module: one worker with
freight and a key, one without freight. numpy, pandas and polars values as arguments and results,
refusals (pickle gadget, other key, no signature) and what a client sees from a worker without
freight."""

from __future__ import annotations

import datetime
import importlib
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import polars as pl
import pytest

import freight
from freight import carrier

pytest.importorskip("celery")

pytestmark = pytest.mark.timeout(120)

_HERE = os.path.dirname(os.path.abspath(__file__))
KEY = b"celery-test-key-0123456789abcdef"
SIGNED, PLAIN = "freight-signed", "freight-plain"  # the two workers' queues


class Gadget:
    """What an attacker sends: unpickling it runs a command. Must never run on the worker."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.fixture(scope="module")
def celery(redis_server, tmp_path_factory):
    """(app module, tasks folder): the client side in this process, two workers in others."""
    host, port = redis_server
    broker = f"redis://{host}:{port}/5"  # a database of its own: other modules write to 0
    logs = tmp_path_factory.mktemp("celery")
    env = {**os.environ, "FREIGHT_CELERY_BROKER": broker, "PYTHONPATH": os.pathsep.join(
        p for p in (_HERE, os.environ.get("PYTHONPATH")) if p)}  # fmt: skip
    env.pop("FREIGHT_CELERY_KEY", None)
    env.pop("FREIGHT_CELERY_WITHOUT_FREIGHT", None)
    workers = []
    for queue, extra in (
        (SIGNED, {"FREIGHT_CELERY_KEY": KEY.decode()}),
        (PLAIN, {"FREIGHT_CELERY_WITHOUT_FREIGHT": "1"}),
    ):
        log = open(logs / f"{queue}.log", "w")  # noqa: SIM115 - closed with the worker
        cmd = [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "--pool=solo", "-Q", queue,
               "-n", f"{queue}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
               "-l", "warning"]  # fmt: skip
        workers.append(
            (subprocess.Popen(cmd, cwd=_HERE, env={**env, **extra}, stdout=log, stderr=subprocess.STDOUT), log)
        )

    saved = {k: os.environ.get(k) for k in ("FREIGHT_CELERY_BROKER", "FREIGHT_CELERY_KEY")}
    os.environ.update(FREIGHT_CELERY_BROKER=broker, FREIGHT_CELERY_KEY=KEY.decode())
    sys.modules.pop("celery_app", None)
    app_module = importlib.import_module("celery_app")
    import freight.integrations.celery as fc

    try:
        # Both workers answer remote control once they consume. The wait ends when they do or
        # one of them exits; the bound is a hang guard only (a worker that started answers in
        # seconds; 60 s was once too short on a loaded machine), set under pytest-timeout's 600 s
        # so that the workers' logs are shown.
        hang_guard = time.monotonic() + 480
        while True:
            missing, ready = fc._survey(app_module.app, 1.0)
            if len(missing) + len(ready) == 2:
                break
            dead = [p for p, _ in workers if p.poll() is not None]
            if dead or time.monotonic() > hang_guard:
                text = "\n".join((logs / f"{q}.log").read_text()[-3000:] for q in (SIGNED, PLAIN))
                pytest.fail(f"the Celery workers did not start: {text}")
        yield app_module, tmp_path_factory.mktemp("celery-marks")
    finally:
        for proc, _ in workers:
            proc.terminate()
        for proc, log in workers:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def client_key(celery):
    """Installs freight in this (client) process with another key or none, and restores the right one."""
    import freight.integrations.celery as fc

    app = celery[0].app
    yield lambda **options: fc.install(app, **options)
    fc.install(app, key=KEY)


def test_install_sets_the_app(celery):
    import freight.integrations.celery as fc

    conf = celery[0].app.conf
    assert conf.task_serializer == conf.result_serializer == "freight"
    assert list(conf.accept_content) == list(conf.result_accept_content) == ["application/x-freight"]
    assert fc.installed() == {"allow_pickle": False, "signed": True, "large_values": 1 << 20}


def test_numpy_pandas_polars_arguments_and_results(celery):
    tasks = celery[0]
    arr = np.arange(1_000_000, dtype=np.float64).reshape(1000, 1000)
    df = pd.DataFrame({"i": np.arange(10_000), "f": np.linspace(0, 1, 10_000), "s": [f"r{i}" for i in range(10_000)]})
    pf = pl.DataFrame({"a": np.arange(5000), "b": [f"x{i}" for i in range(5000)]})
    results = [tasks.echo.apply_async((v,), queue=SIGNED) for v in (arr, df, pf)]
    back = [r.get(timeout=30) for r in results]
    np.testing.assert_array_equal(back[0], arr)
    pd.testing.assert_frame_equal(back[1], df)
    assert back[2].equals(pf)
    seen = tasks.describe.apply_async((arr,), queue=SIGNED).get(timeout=30)
    assert seen == {"type": "numpy.ndarray", "shape": [1000, 1000], "dtype": "float64", "total": float(arr.sum())}
    # keyword arguments and nested containers travel the same way
    when = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    out = tasks.echo.apply_async(kwargs={"value": {"frame": df.head(3), "when": when}}, queue=SIGNED)
    got = out.get(timeout=30)
    pd.testing.assert_frame_equal(got["frame"], df.head(3))
    assert got["when"] == when


def test_gadget_refused_by_the_worker(celery, tmp_path):
    import freight.integrations.celery as fc

    tasks, _ = celery
    mark = tmp_path / "pwned"
    result = tasks.echo.apply_async((Gadget(mark),), queue=SIGNED)  # signed: only pickle is the problem
    with pytest.raises(fc.UnsafeMessageError, match="allow_pickle=False") as info:
        result.get(timeout=30)
    assert isinstance(info.value, freight.UnsafePayloadError) and isinstance(info.value, freight.FreightError)
    assert not mark.exists()
    # the worker still serves
    assert tasks.echo.apply_async((5,), queue=SIGNED).get(timeout=30) == 5


@pytest.mark.parametrize("key", [b"another-key-0123456789abcdef", None], ids=["other key", "unsigned"])
def test_message_without_the_key_refused(celery, client_key, tmp_path, key):
    import freight.integrations.celery as fc

    tasks, _ = celery
    mark = tmp_path / "ran"
    client_key(key=key)
    result = tasks.touch.apply_async((str(mark),), queue=SIGNED)
    # The worker refuses the task and stores the refusal signed with its key, which this client
    # cannot verify either: it sees the signature error, whichever side raised it.
    with pytest.raises(fc.SignatureMismatchError) as info:
        result.get(timeout=30)
    assert isinstance(info.value, freight.IntegrityError)
    assert "same key" in str(info.value)
    assert not mark.exists()


def test_worker_without_freight(celery, tmp_path):
    import freight.integrations.celery as fc

    tasks, _ = celery
    mark = tmp_path / "ran"
    result = tasks.touch.apply_async((str(mark),), queue=PLAIN)
    # The survey of the workers waits half the timeout for their answers: generous, so that a
    # busy machine's slow reply is not taken for no worker.
    with pytest.raises(fc.WorkerNotInstalledError, match=r"freight-plain@.*install\(app") as info:
        result.get(timeout=10)
    assert isinstance(info.value, freight.FreightError)
    from celery.exceptions import TimeoutError as CeleryTimeout

    assert isinstance(info.value, CeleryTimeout)  # code that waits with a timeout keeps working
    assert not mark.exists()
    with pytest.raises(fc.WorkerNotInstalledError, match="freight-plain@"):
        fc.check_workers(tasks.app, timeout=10)


def _stored_keys(celery, kind):
    import redis

    url = celery[0].app.conf.broker_url
    return sorted(redis.Redis.from_url(url).scan_iter(f"freight:celery:{kind}:*"))


def test_large_values_travel_as_redis_values(celery):
    """An argument and a result over the threshold are redis values of their own (the message holds
    a reference); the worker deletes the arguments once the task succeeded, the result stays."""
    import freight.integrations.celery as fc

    tasks, _ = celery
    arr = np.random.default_rng(3).random(300_000)  # 2.4 MB: over the 1 MiB default
    before, before_tasks = _stored_keys(celery, "result"), _stored_keys(celery, "task")
    body = fc.dumps(((arr,), {}, {}))
    ref = carrier.Ref.from_bytes(body)
    assert ref.key.startswith("freight:celery:task:") and ref.signed and len(body) < 300
    np.testing.assert_array_equal(fc.loads(body)[0][0], arr)
    result = tasks.echo.apply_async((arr,), queue=SIGNED)
    np.testing.assert_array_equal(result.get(timeout=30), arr)
    # The worker deletes the arguments after storing the result: its next task's result (a solo
    # worker runs one task after the other) says it is done. Only the value made by fc.dumps
    # above, never sent, is left.
    assert tasks.echo.apply_async((1,), queue=SIGNED).get(timeout=30) == 1
    assert len(_stored_keys(celery, "result")) == len(before) + 1
    assert set(_stored_keys(celery, "task")) == {*before_tasks, ref.key.encode()}
    small = fc.dumps(((b"x" * 1000,), {}, {}))
    assert small.startswith(b"\x89FRT")  # under the threshold: in the message


def test_large_values_refused_like_messages(celery, client_key, tmp_path):
    """A stored payload is checked as a message is: another key's is refused, and so is a pickle
    gadget, before anything runs."""
    import freight.integrations.celery as fc

    tasks, _ = celery
    big = np.zeros(300_000)
    mark = tmp_path / "pwned"
    result = tasks.echo.apply_async(((big, Gadget(mark)),), queue=SIGNED)
    with pytest.raises(fc.UnsafeMessageError):
        result.get(timeout=30)
    assert not mark.exists()
    client_key(key=b"another-key-0123456789abcdef")
    with pytest.raises(fc.SignatureMismatchError):
        tasks.echo.apply_async((big,), queue=SIGNED).get(timeout=30)


def test_a_waiting_task_keeps_its_stored_arguments(celery):
    """A countdown task's body is decoded when it arrives and waits in the worker; tasks that run
    meanwhile on the same (solo) worker must not delete its stored arguments."""
    tasks, _ = celery
    late = np.random.default_rng(5).random(200_000)
    waiting = tasks.echo.apply_async((late,), queue=SIGNED, countdown=3)
    others = [tasks.echo.apply_async((np.full(200_000, float(i)),), queue=SIGNED) for i in range(3)]
    for i, r in enumerate(others):
        np.testing.assert_array_equal(r.get(timeout=30), np.full(200_000, float(i)))
    np.testing.assert_array_equal(waiting.get(timeout=60), late)


def _reference(key, sign_with=KEY):
    """A reference to ``key`` in the suite's redis, as a sender with ``sign_with`` would make it."""
    import freight.integrations.celery as fc

    location = fc._STATE["values"].backend.location if fc._STATE["values"] else "redis://127.0.0.1:1/0"
    return bytes(carrier.Ref.build("redis", location, key, carrier.task(60), 0, 10, [(None, 10)], sign_with))


def test_large_value_references_checked(celery):
    import freight.integrations.celery as fc

    with pytest.raises(fc.UndecodableMessageError, match="outside the backend's namespace 'freight:celery:'"):
        fc.loads(_reference("celery-task-meta-1234"))
    with pytest.raises(fc.UndecodableMessageError, match="is gone: .* expire after large_values_ttl"):
        fc.loads(_reference("freight:celery:task:" + "0" * 32))
    with pytest.raises(fc.SignatureMismatchError, match="before anything was fetched"):
        fc.loads(_reference("freight:celery:task:" + "0" * 32, sign_with=None))  # forged: unsigned


def test_large_values_options(celery):
    import freight.integrations.celery as fc

    app = celery[0].app
    try:
        fc.install(app, key=KEY, large_values=None)
        assert fc.installed()["large_values"] is None
        assert fc.dumps(((np.zeros(300_000),), {}, {})).startswith(b"\x89FRT")
        with pytest.raises(fc.UndecodableMessageError, match="large_values=None"):
            fc.loads(_reference("freight:celery:task:" + "0" * 32))
        fc.install(app, key=KEY, large_values=0, large_values_ttl=5)
        assert fc.dumps(((1,), {}, {})).startswith(b"FREIGHT-REF")
        for bad in ({"large_values": "1MiB"}, {"large_values": -1}, {"large_values_url": "http://x"}):
            with pytest.raises(freight.OptionError):
                fc.install(app, **bad)
    finally:
        fc.install(app, key=KEY)


def test_install_refuses_unknown_options():
    import freight.integrations.celery as fc

    with pytest.raises(freight.OptionError, match="allow_pickle"):
        fc.install(object(), alow_pickle=True)


def test_importing_freight_imports_no_engine():
    code = "import sys, freight; print(sorted(m for m in ('celery', 'kombu', 'parsl', 'mpi4py') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
