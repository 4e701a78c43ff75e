"""Large Celery payloads as their own redis values, with only a reference in the message.

Why: kombu's redis transport writes a message as JSON with its body in base64, so a 64 MiB array
argument becomes 85 MiB of text that is encoded, escaped, pushed, popped, parsed and decoded again;
and the redis result backend both stores and publishes a result, so it crosses the socket twice.
That text handling costs several times what serializing costs: measured, it is why freight in the
body could not beat pickle in the body. A payload over the threshold is instead SET as raw bytes
under a fresh key; the message (or the stored result) carries ``MAGIC + key``, and the receiver
GETs the bytes and decodes them with its own codec (which checks signatures and refuses pickle as it
would in the body: the reference grants nothing the payload would not).

Lifetime: every value expires (``ttl``, by default the app's ``result_expires``, the time Celery
keeps results). A task's argument value is also deleted by the worker once the task has ended in a
state after which its message is gone (success, retry: a retry sends the arguments again, failure
when the message is acknowledged); results live their ``ttl``, as they do in the result backend.
"""

from __future__ import annotations

import datetime
import os
import threading
from typing import Any
from urllib.parse import urlsplit

from freight.exceptions import DeserializationError, OptionError

#: What starts a message body that refers to a value stored apart. A freight payload starts with its
#: own magic, so the two never collide.
MAGIC = b"FREIGHT-CELERY-REF\x01"
#: The namespace of the stored values; a reference outside it is refused (a forged message must not
#: make a worker read other keys).
PREFIX = "freight:celery:"
_TASK, _RESULT = PREFIX + "task:", PREFIX + "result:"
#: Default threshold: payloads at least this large leave the message.
DEFAULT_THRESHOLD = 1 << 20
_SCHEMES = ("redis", "rediss", "unix")


def is_reference(body: Any) -> bool:
    """Whether a message body refers to a stored value (bytes, or any buffer a transport gives)."""
    if type(body) is bytes:
        return body.startswith(MAGIC)
    return bytes(memoryview(body)[: len(MAGIC)]) == MAGIC


class ValueStore:
    """The redis values of one process (kombu's serializer registry is per process, so this is too)."""

    def __init__(self, url: str, threshold: int, ttl: float) -> None:
        self.url, self.threshold, self.ttl = url, threshold, max(1, int(ttl))
        self._client: Any = None
        self._lock = threading.Lock()
        self._thread = threading.local()  # .last, .running: see decoded()

    def client(self) -> Any:
        # redis-py's pool notices a fork and reconnects, so one client serves prefork children too
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import redis

                    self._client = redis.Redis.from_url(self.url)
        return self._client

    def put(self, payload: bytes, is_task: bool) -> bytes:
        """Stores ``payload`` under a fresh key; returns the message body that refers to it."""
        key = (_TASK if is_task else _RESULT) + os.urandom(16).hex()
        self.client().set(key, payload, ex=self.ttl)
        return MAGIC + key.encode()

    def get(self, body: Any) -> tuple[str, bytes]:
        """(key, payload) of a reference body (one that starts with :data:`MAGIC`)."""
        key = bytes(memoryview(body)[len(MAGIC) :]).decode("ascii", "replace")
        if not key.startswith(PREFIX) or len(key) > 100:
            raise DeserializationError(f"a message refers to a stored value outside {PREFIX}*: refused")
        payload = self.client().get(key)
        if payload is None:
            raise DeserializationError(
                f"the message's payload, stored in redis as {key}, is gone: it expired after its ttl "
                f"({self.ttl} s; pass install(app, large_values_ttl=...) to keep values longer, e.g. for "
                "tasks scheduled further ahead), or the task already ran and its arguments were deleted"
            )
        return key, payload

    # Which stored arguments belong to which task. Celery's worker decodes a body when it makes the
    # request (in the consumer, also for tasks that then wait for their ETA) and again in the trace,
    # right before ``task_prerun`` in the thread (or pool process) that runs the task. So: every
    # decode notes the stored task payload it read, or none; ``task_prerun`` claims the last note
    # of its thread for the task that starts; ``task_postrun`` deletes what its task claimed.

    def decoded(self, key: str | None) -> None:
        """A body was decoded in this thread, from the stored value ``key`` (None: in the message)."""
        self._thread.last = key if key is not None and key.startswith(_TASK) else None

    def task_started(self) -> None:
        """``task_prerun``: the task starting in this thread runs with the last decode's arguments."""
        self._thread.running = getattr(self._thread, "last", None)
        self._thread.last = None

    def task_ended(self, delete: bool) -> None:
        """``task_postrun``: the task of this thread has ended; its stored arguments are deleted if
        its message is gone (so that nothing could read them again)."""
        key = getattr(self._thread, "running", None)
        self._thread.running = None
        if key is not None and delete:
            self.client().delete(key)


def redis_url(app: Any, url: str | None) -> str | None:
    """Where the values go: ``url`` when given, else the broker's URL when it is redis, else the
    result backend's, else None (payloads stay in the message)."""
    if url is not None:
        if urlsplit(url).scheme not in _SCHEMES:
            raise OptionError(f"large_values_url must be a redis://, rediss:// or unix:// URL, not {url!r}")
        return url
    for candidate in (app.conf.broker_url, app.conf.result_backend):
        if isinstance(candidate, str) and urlsplit(candidate).scheme in _SCHEMES:
            return candidate.split(";")[0]  # Celery's failover lists: the first
    return None


def default_ttl(app: Any) -> float:
    """The app's ``result_expires`` in seconds (Celery's default one day when unset)."""
    expires = app.conf.result_expires
    if isinstance(expires, datetime.timedelta):
        expires = expires.total_seconds()
    return float(expires) if expires else 86400.0
