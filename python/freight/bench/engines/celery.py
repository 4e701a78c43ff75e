"""Celery, end to end: one ``--pool=solo`` worker on a redis-server the benchmark starts on a free
loopback port (broker and result backend), Celery's pickle serializer against
``freight.integrations.celery.install(app, allow_pickle=True)``. Values are task arguments and come
back as results (``echo``), so they cross redis both ways through the serializer."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from freight.bench.engines import tasks

#: plain pickle cannot send closures (by reference only): both modes call them in the client
SAME_PATH = {"closures carrying arrays": "pickle cannot send closures: called locally in both modes"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _redis(folder: str) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", folder, "--save", "",
         "--appendonly", "no", "--logfile", os.path.join(folder, "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.ping()
            return proc, port
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"redis-server did not start on port {port}") from None
            time.sleep(0.05)


def _batch(app_module: Any, workload: str, values: list[Any]) -> list[Any]:
    if workload == "closures carrying arrays":
        return [fn(i) for i, fn in enumerate(values)]
    task = app_module.inc if workload == "tiny tasks" else app_module.echo
    results = [task.delay(v) for v in values]  # all queued first: the worker never waits on us
    return [r.get(timeout=300) for r in results]


def measure(serializer: str, quick: bool) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as folder:
        redis_proc, port = _redis(folder)
        # the app module reads these when imported, here and in the worker
        os.environ["FREIGHT_BENCH_CELERY_BROKER"] = f"redis://127.0.0.1:{port}/0"
        os.environ["FREIGHT_BENCH_CELERY_SERIALIZER"] = serializer
        log = open(os.path.join(folder, "worker.log"), "w")  # noqa: SIM115 - closed with the worker
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "freight.bench.engines._celery_app", "worker",
             "--pool=solo", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"],
            stdout=log, stderr=subprocess.STDOUT,
            # Celery refuses to run a pickle-accepting worker as root (containers) without this; the
            # broker here is a private loopback redis-server
            env={**os.environ, "C_FORCE_ROOT": "1"},
        )  # fmt: skip
        try:
            from freight.bench.engines import _celery_app

            first = _celery_app.inc.delay(0)
            deadline = time.monotonic() + 60
            while not first.ready():  # until the worker consumes (fail early if it died)
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the Celery worker did not start")
                time.sleep(0.1)
            return tasks.measure_workloads("celery", serializer, quick, lambda w, v: _batch(_celery_app, w, v))
        except Exception as exc:
            log.flush()
            with open(log.name) as fh:
                raise RuntimeError(f"{exc}\nworker log:\n{fh.read()[-3000:]}") from exc
        finally:
            worker.terminate()
            worker.wait(30)
            log.close()
            redis_proc.terminate()
            redis_proc.wait(30)
