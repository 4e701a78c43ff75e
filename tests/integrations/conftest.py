"""Fixtures for the integration tests: a real redis-server on a free loopback port."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from support.ports import free_port


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A redis-server (the Debian package; ``make redis`` installs it) started on a free loopback
    port in a temporary folder, once per test module, stopped at the end. Yields ``(host, port)``."""
    binary = shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if os.path.exists(p)), None
    )
    if binary is None:
        pytest.fail("redis-server is not installed: run `make redis` (apt-get install redis-server)")
    import redis

    folder = tmp_path_factory.mktemp("redis")
    for _attempt in range(3):  # another process may take the free port before redis binds it
        port = free_port()
        proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(folder),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--logfile",
                str(folder / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if client.ping():
                    break
            except redis.ConnectionError:
                time.sleep(0.05)
        client.close()
        if proc.poll() is None and time.monotonic() < deadline:
            break
        proc.kill()
        proc.wait()
    else:
        log = (folder / "redis.log").read_text() if (folder / "redis.log").exists() else ""
        pytest.fail(f"redis-server did not start: {log[-2000:]}")
    try:
        yield "127.0.0.1", port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
