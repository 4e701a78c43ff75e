"""The carrier's backends: shared memory (:mod:`freight.shm`'s ``/dev/shm`` segments), any
:mod:`freight.storage` store (a folder, memory, S3) and redis."""

from __future__ import annotations

import copy
import os
import secrets
import threading
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from freight import shm
from freight.carrier.backend import Backend
from freight.exceptions import KeyNotFoundError, OptionError, RefError

__all__ = ["SharedMemory", "StoreBackend", "RedisBackend"]


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return "local"


class SharedMemory(Backend):
    """Segments in ``/dev/shm`` on this machine (the mechanism of :mod:`freight.shm`): a read maps
    the segment copy-on-write (no copy; arrays view it), a read-once read unlinks it as it opens
    it, and multiprocessing's resource tracker unlinks what is left when the program exits (a
    reference never read, a process killed). A frame that lies unchanged in a segment this process
    received is lent (:meth:`lend`), not written again. The location names the machine's boot: a
    reference from another machine, or from before a reboot, is refused as foreign."""

    name = "shm"
    namespace = shm.PREFIX

    def __init__(self) -> None:
        self._location = f"shm://{_boot_id()}"

    @property
    def location(self) -> str:
        return self._location

    @classmethod
    def open(cls, location: str) -> SharedMemory:
        return cls()

    def new_key(self, expires: int) -> str:
        return shm.new_name(f".e{expires}" if expires else "")

    def owns(self, key: str) -> bool:
        # a loan's name must parse, so that a forged one is refused before anything is read; a pooled
        # segment's own name is never a reference's (its writer's alone)
        return (super().owns(key) and (not shm.is_loan(key) or shm.loan_parses(key))
                and not key.endswith(shm.POOLED_SUFFIX))  # fmt: skip

    def put_frames(self, key: str, frames: Sequence[Any], *, ttl: float | None = None) -> None:
        if not shm.available():
            raise RefError("this machine has no writable /dev/shm: use a StoreBackend (a folder) instead")
        if not shm.write(key, frames):
            raise RefError(
                f"/dev/shm has no room for {sum(memoryview(f).nbytes for f in frames)} more bytes (freight keeps "
                "64 MiB free for others): free some (df -h /dev/shm), give the container a larger one "
                "(docker run --shm-size=...), or carry large values through a StoreBackend on disk"
            )

    def lend(self, frames: Sequence[Any]) -> list[tuple[str, int, int] | None]:
        return shm.lent(frames)

    def get(self, key: str, *, consume: bool = False) -> Any:
        try:
            return shm.open_loan(key, unlink=consume) if shm.is_loan(key) else shm.attach(key, unlink=consume)
        except shm.SharedMemoryLostError:
            if shm.is_loan(key):
                raise  # it says why: the lender exited, or /proc is closed between the processes
            return None

    def delete(self, key: str) -> None:
        if shm.is_loan(key):
            shm.end_loan(key)
        else:
            shm.discard(key)

    def exists(self, key: str) -> bool:
        return os.path.exists(os.path.join(shm.DIRECTORY, key.partition(".lent-")[0]))

    def keys(self) -> Iterable[str]:
        return shm.segments()


class StoreBackend(Backend):
    """Objects of a :mod:`freight.storage` store, under ``namespace``: a local folder (mapped on
    read: arrays view the file), ``memory://`` (this process only) or ``s3://bucket/prefix``.
    ``store``: a :class:`freight.storage.Store` or a URL/path for :func:`freight.storage.open`."""

    name = "store"

    def __init__(self, store: Any, *, namespace: str = "freight-carrier/") -> None:
        if isinstance(store, (str, os.PathLike)):
            import freight.storage

            store = freight.storage.open(os.fspath(store))
        self.store, self.namespace = store, namespace
        url = store.url
        # Every memory store is its own: the location tells them apart, and no other process opens one.
        self._location = f"{url}#{secrets.token_hex(8)}" if url.startswith("memory:") else url

    @property
    def location(self) -> str:
        return self._location

    @classmethod
    def open(cls, location: str) -> StoreBackend:
        if location.startswith("memory:"):
            raise RefError(
                "this reference names a memory:// store, which lives in one process: pass that StoreBackend "
                "to get(), or carry values between processes through a folder or S3"
            )
        return cls(location)

    def put_frames(self, key: str, frames: Sequence[Any], *, ttl: float | None = None) -> None:
        self.store.put_bytes(key, list(frames))

    def get(self, key: str, *, consume: bool = False) -> Any:
        try:
            data = self.store.get_bytes(key)
        except KeyNotFoundError:
            return None
        if consume:
            self.delete(key)  # a local file stays mapped: the bytes outlive its name
        return data

    def delete(self, key: str) -> None:
        try:
            self.store.delete(key)
        except KeyNotFoundError:
            pass

    def exists(self, key: str) -> bool:
        return bool(self.store.exists(key))

    def keys(self) -> Iterable[str]:
        return self.store.list(self.namespace)


_SCHEMES = ("redis", "rediss", "unix")


class RedisBackend(Backend):
    """Values of a redis server, each with its own expiry (``SET ... PX``), read-once reads in one
    transaction (``GET`` + ``DEL``). ``url``: ``redis://``, ``rediss://`` or ``unix://``; or pass
    a redis-py ``client`` (then ``url`` only names it in references). The location carried in
    references is the URL without its credentials."""

    name = "redis"
    expires = True

    def __init__(self, url: str | None = None, *, client: Any = None, namespace: str = "freight-carrier:") -> None:
        if url is None and client is not None:
            kw = client.connection_pool.connection_kwargs
            url = f"redis://{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"
        if not isinstance(url, str) or urlsplit(url).scheme not in _SCHEMES:
            raise OptionError(f"a RedisBackend needs a redis://, rediss:// or unix:// URL, not {url!r}")
        self.url, self.namespace = url, namespace
        self._shared: dict[str, Any] = {"client": client, "lock": threading.Lock()}
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        netloc += f":{parts.port}" if parts.port else ""
        self._location = urlunsplit((parts.scheme, netloc, parts.path or "/0", "", ""))

    @property
    def location(self) -> str:
        return self._location

    @classmethod
    def open(cls, location: str) -> RedisBackend:
        return cls(location)

    def under(self, namespace: str) -> RedisBackend:
        """The same server (and client) with keys written under ``namespace``."""
        other = copy.copy(self)
        other.namespace = namespace
        return other

    def client(self) -> Any:
        # redis-py's pool notices a fork and reconnects, so one client serves forked children too
        shared = self._shared
        if shared["client"] is None:
            with shared["lock"]:
                if shared["client"] is None:
                    import redis

                    shared["client"] = redis.Redis.from_url(self.url, socket_connect_timeout=10)
        return shared["client"]

    def put_frames(self, key: str, frames: Sequence[Any], *, ttl: float | None = None) -> None:
        data = frames[0] if len(frames) == 1 else b"".join(frames)
        self.client().set(key, data, px=max(1, int(ttl * 1000)) if ttl else None)

    def get(self, key: str, *, consume: bool = False) -> Any:
        if not consume:
            return self.client().get(key)
        pipe = self.client().pipeline(transaction=True)
        pipe.get(key)
        pipe.delete(key)
        return pipe.execute()[0]

    def delete(self, key: str) -> None:
        self.client().delete(key)

    def exists(self, key: str) -> bool:
        return bool(self.client().exists(key))
