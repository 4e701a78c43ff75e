"""Large Celery payloads as carrier references (:mod:`freight.carrier`, its redis backend), with
only the reference in the message.

Why: kombu's redis transport writes a message as JSON with its body in base64, so a 64 MiB array
argument becomes 85 MiB of text that is encoded, escaped, pushed, popped, parsed and decoded again;
and the redis result backend both stores and publishes a result, so it crosses the socket twice.
That text handling costs several times what serializing costs: measured, it is why freight in the
body could not beat pickle in the body. A payload over the threshold is instead put in redis as raw
bytes (``freight:celery:task:*`` or ``freight:celery:result:*``); the message (or the stored
result) carries the carrier's :class:`~freight.carrier.Ref`, signed when the codec has a key, and
the receiver gets the bytes and decodes them with its own codec (which checks signatures and
refuses pickle as it would in the body: the reference grants nothing the payload would not).

Lifetime: a task's arguments are owned by the task (``carrier.task``): the worker releases them
once the task has ended in a state after which its message is gone (success, retry: a retry sends
the arguments again, failure when the message is acknowledged); results live their ``ttl``
(``carrier.ttl``), as they do in the result backend. Both expire after ``ttl`` at the latest.
"""

from __future__ import annotations

import datetime
import threading
from typing import Any
from urllib.parse import urlsplit

from freight import carrier
from freight.exceptions import OptionError

#: The namespace of the stored values; a reference outside it is refused (a forged message must not
#: make a worker read or delete other keys).
PREFIX = "freight:celery:"
_SCHEMES = ("redis", "rediss", "unix")
is_reference = carrier.is_ref


class ValueStore:
    """The redis values of one process (kombu's serializer registry is per process, so this is too)."""

    def __init__(self, url: str, threshold: int, ttl: float, codec: Any) -> None:
        self.url, self.threshold, self.ttl, self.codec = url, threshold, max(1, int(ttl)), codec
        self.backend = carrier.RedisBackend(url, namespace=PREFIX)  # reads both kinds
        self._tasks, self._results = self.backend.under(PREFIX + "task:"), self.backend.under(PREFIX + "result:")
        self._thread = threading.local()  # .last, .running: see decoded()

    def put(self, payload: bytes, is_task: bool) -> bytes:
        """Stores ``payload``; returns the message body that refers to it (the reference)."""
        backend, lifetime = (self._tasks, carrier.task(self.ttl)) if is_task else (self._results, carrier.ttl(self.ttl))
        ref = carrier.put(carrier.Frames([payload]), backend, lifetime=lifetime, threshold=0, codec=self.codec)
        return bytes(ref)

    def get(self, body: Any) -> tuple[carrier.Ref, Any]:
        """(reference, payload) of a reference body, checked (signature, namespace) before the read."""
        ref = carrier.Ref.from_bytes(body)
        try:
            (payload,) = carrier.get_frames(ref, self.backend, codec=self.codec)
        except carrier.RefGoneError as exc:
            raise carrier.RefGoneError(
                f"{exc}. Stored task arguments and results expire after large_values_ttl ({self.ttl} s; pass "
                "install(app, large_values_ttl=...) to keep them longer, e.g. for tasks scheduled further "
                "ahead), and a task's arguments are deleted once the task ran"
            ) from None
        return ref, payload

    # Which stored arguments belong to which task. Celery's worker decodes a body when it makes the
    # request (in the consumer, also for tasks that then wait for their ETA) and again in the trace,
    # right before ``task_prerun`` in the thread (or pool process) that runs the task. So: every
    # decode notes the stored task payload it read, or none; ``task_prerun`` claims the last note
    # of its thread for the task that starts; ``task_postrun`` releases what its task claimed.

    def decoded(self, ref: carrier.Ref | None) -> None:
        """A body was decoded in this thread, from the stored value ``ref`` (None: in the message)."""
        self._thread.last = ref if ref is not None and ref.lifetime.kind == "task" else None

    def task_started(self) -> None:
        """``task_prerun``: the task starting in this thread runs with the last decode's arguments."""
        self._thread.running = getattr(self._thread, "last", None)
        self._thread.last = None

    def task_ended(self, delete: bool) -> None:
        """``task_postrun``: the task of this thread has ended; its stored arguments are released if
        its message is gone (so that nothing could read them again)."""
        ref = getattr(self._thread, "running", None)
        self._thread.running = None
        if ref is not None and delete:
            carrier.release(ref, self.backend, codec=self.codec)


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
