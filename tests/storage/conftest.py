"""A real S3-compatible server on loopback, for the storage tests.

The server is ``s3s-fs`` (https://crates.io/crates/s3s-fs), which the Makefile installs into
``.tools/bin`` (``make test-server``, a prerequisite of ``make test``). It serves each top-level
folder of its data directory as a bucket and checks SigV4 signatures against one access key.

Fixtures:

* ``s3_server`` (one per test module): a running server and its credentials, a default bucket,
  ``new_bucket(name)``, and ``kill()``/``restart()`` for fault tests;
* ``s3_env`` (per test): the ``AWS_*`` variables that point an S3 client at that server.
* ``storage``, ``file_protocol_storage``: FunctionFuse storages of each kind (file, memory,
  S3; file and memory), for test_functionfuse*.py.
"""

from __future__ import annotations

import http.client
import itertools
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
S3S_FS = REPO_ROOT / ".tools" / "bin" / "s3s-fs"

HOST = "127.0.0.1"
REGION = "us-east-1"
ACCESS_KEY_ID = "freight-test-key"
SECRET_ACCESS_KEY = "freight-test-secret"
DEFAULT_BUCKET = "freight-test"
START_TIMEOUT_S = 10.0

_bucket_names = itertools.count()


def _answers_s3(port: int) -> bool:
    """Whether an S3 server answers on the port: an unsigned request is refused with an S3 error.

    An HTTP answer, not just an accepted connection: another process listening on the port
    (the free port was taken in between) would accept connections too.
    """
    conn = http.client.HTTPConnection(HOST, port, timeout=0.5)
    try:
        conn.request("GET", "/")
        response = conn.getresponse()
        return response.status == 403 and b"<Error>" in response.read()
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


class S3Server:
    """A running ``s3s-fs`` process; see the module docstring."""

    def __init__(self, data_dir: Path, log_path: Path, port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        self.endpoint = f"http://{HOST}:{port}"
        self.access_key_id = ACCESS_KEY_ID
        self.secret_access_key = SECRET_ACCESS_KEY
        self.region = REGION
        self.bucket = DEFAULT_BUCKET
        self._log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self.new_bucket(DEFAULT_BUCKET)

    def store_options(self, **overrides: object) -> dict:
        """The keyword arguments of ``freight.storage.open`` that reach this server."""
        options: dict = dict(
            endpoint_url=self.endpoint,
            access_key_id=self.access_key_id,
            secret_access_key=self.secret_access_key,
            region=self.region,
            allow_http=True,
        )
        options.update(overrides)
        return options

    # -- buckets --------------------------------------------------------------------------------

    def new_bucket(self, name: str | None = None) -> str:
        """Create an empty bucket (a folder in the data dir) and return its name.

        Without a name, a fresh one is made up. S3 bucket names are 3 to 63 characters of
        lowercase letters, digits, dots and hyphens; s3s-fs answers 400 InvalidBucketName to
        anything else (even before checking the signature).
        """
        if name is None:
            name = f"bucket-{next(_bucket_names)}"
        (self.data_dir / name).mkdir()  # FileExistsError: a bucket is handed out once
        return name

    # -- process --------------------------------------------------------------------------------

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        if self.is_running():
            return
        cmd = [
            str(S3S_FS),
            "--host", HOST,
            "--port", str(self.port),
            "--access-key", self.access_key_id,
            "--secret-key", self.secret_access_key,
            str(self.data_dir),
        ]  # fmt: skip
        with open(self._log_path, "ab") as log:  # a file, not a pipe: a full pipe would block it
            log.write(f"--- {' '.join(cmd)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                pytest.fail(f"s3s-fs exited with status {code} while starting:\n{self.log()}", pytrace=False)
            if _answers_s3(self.port):
                if self._proc.poll() is None:
                    return
                continue  # it answered, then exited: report that above
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(
                    f"s3s-fs did not answer on {self.endpoint} within {START_TIMEOUT_S} s:\n{self.log()}",
                    pytrace=False,
                )
            time.sleep(0.01)

    def kill(self) -> None:
        """SIGKILL the server (no clean shutdown), and wait until it is gone."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGKILL)
            self._proc.wait()
            self._proc = None

    def restart(self) -> None:
        """Start the server again (killing it first if it still runs): same port, same data."""
        self.kill()
        self.start()

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s)."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            self._proc = None

    def log(self, tail: int = 8000) -> str:
        """The last ``tail`` characters the server wrote (stdout and stderr)."""
        try:
            return self._log_path.read_bytes()[-tail:].decode(errors="replace")
        except OSError as e:
            return f"(no server log: {e})"

    def __repr__(self) -> str:
        return f"S3Server(endpoint={self.endpoint!r}, bucket={self.bucket!r}, data_dir={str(self.data_dir)!r})"


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    if not os.access(S3S_FS, os.X_OK):
        pytest.fail(
            f"the S3 test server is not installed ({S3S_FS} is missing): run `make test-server` "
            "(or `make test`, which installs it) at the repository root",
            pytrace=False,
        )
    root = tmp_path_factory.mktemp("s3")
    data_dir = root / "data"
    data_dir.mkdir()
    server = S3Server(data_dir, root / "s3s-fs.log", free_port(HOST))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """Point S3 clients (object_store, boto3) at ``s3_server``; restarts it if a test killed it."""
    s3_server.start()
    for name in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE"):  # ambient ones would win or clash
        monkeypatch.delenv(name, raising=False)
    env = {
        "AWS_ENDPOINT_URL": s3_server.endpoint,
        "AWS_ENDPOINT": s3_server.endpoint,
        "AWS_ACCESS_KEY_ID": s3_server.access_key_id,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_access_key,
        "AWS_REGION": s3_server.region,
        "AWS_DEFAULT_REGION": s3_server.region,
        "AWS_ALLOW_HTTP": "true",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return s3_server


# -- stores on each backend, for the Store tests (test_store*.py) ---------------------------------

_store_prefixes = itertools.count()


class StoreLocation:
    """Where one test's store lives: ``backend`` ("file", "memory" or "s3"), ``url``, and
    ``open(**kw)``, a new ``Store`` on the same location (the same objects: a second client of
    the folder or bucket; for "memory", a second ``Store`` over the one in-memory store).
    ``files()`` is what lies on disk under the store ({relative path: size}), None for memory."""

    def __init__(self, backend: str, url: str, root: Path | None, server: S3Server | None) -> None:
        self.backend = backend
        self.url = url
        self.root = root
        self.server = server
        self._memory = None

    def s3_options(self, **overrides: object) -> dict:
        assert self.server is not None
        return self.server.store_options(**overrides)

    def open(self, **kw: object):
        import freight.storage

        s3_keys = ("max_retries", "timeout", "connect_timeout")
        if self.backend != "s3":
            kw = {k: v for k, v in kw.items() if k not in s3_keys}
        if self.backend == "memory":
            if self._memory is None:
                self._memory = freight.storage.open(self.url, **kw)
                return self._memory
            return freight.storage.Store(self._memory._native, **kw)
        if self.backend == "s3":
            options = self.s3_options(**{k: kw.pop(k) for k in s3_keys if k in kw})
            return freight.storage.open(self.url, **options, **kw)
        return freight.storage.open(self.url, **kw)

    def files(self) -> dict[str, int] | None:
        if self.root is None:
            return None
        return {str(p.relative_to(self.root)): p.stat().st_size for p in sorted(self.root.rglob("*")) if p.is_file()}

    def __repr__(self) -> str:
        return f"StoreLocation({self.url!r})"


@pytest.fixture(params=["file", "memory", "s3"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> StoreLocation:
    """An empty store on each backend (a fresh folder, memory store or S3 prefix per test)."""
    if request.param == "file":
        root = tmp_path / "store"
        return StoreLocation("file", str(root), root, None)
    if request.param == "memory":
        return StoreLocation("memory", "memory://", None, None)
    server: S3Server = request.getfixturevalue("s3_server")
    server.start()  # a fault test of the module may have killed it
    prefix = f"some/prefix-{next(_store_prefixes)}"
    return StoreLocation("s3", f"s3://{server.bucket}/{prefix}", server.data_dir / server.bucket / prefix, server)


@pytest.fixture
def store(store_location: StoreLocation):
    """``store_location.open()``: an empty ``freight.storage.Store`` on each backend."""
    return store_location.open()


# -- FunctionFuse storages (test_functionfuse*.py) ---------------------------------------------------

_ff_prefixes = itertools.count()


@pytest.fixture(params=["file", "memory", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A FunctionFuse storage of each kind (freight.storage.functionfuse.storage_factory)."""
    from freight.storage.functionfuse import storage_factory
    from support.functionfuse_cases import s3_options

    if request.param == "file":
        return storage_factory({"kind": "file", "options": {"path": str(tmp_path / "storage")}})
    if request.param == "memory":
        return storage_factory({"kind": "memory", "options": {}})
    server: S3Server = request.getfixturevalue("s3_server")
    server.start()
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)  # everything comes from the s3fs options
    return storage_factory(s3_options(server, f"ff/run-{next(_ff_prefixes)}"))


@pytest.fixture(params=["file", "memory"])
def file_protocol_storage(request: pytest.FixtureRequest, tmp_path: Path):
    """A FunctionFuse storage whose serializers get FILE_PROTOCOL (file and memory kinds)."""
    from freight.storage.functionfuse import storage_factory

    if request.param == "file":
        return storage_factory({"kind": "file", "options": {"path": str(tmp_path / "storage")}})
    return storage_factory({"kind": "memory", "options": {}})
