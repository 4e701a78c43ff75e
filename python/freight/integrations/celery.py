"""Celery integration: freight as the task and result serializer of a Celery app, safe by default.

One line for the user, in the module that defines the app (the client and the worker both import
it, ``celery -A module worker``)::

    from celery import Celery
    import freight.integrations.celery as fc

    app = Celery("tasks", broker="redis://...", backend="redis://...")
    fc.install(app)                                   # refuses pickle payloads when loading
    fc.install(app, key=os.environb[b"CELERY_KEY"])   # and signs: workers refuse unsigned messages

:func:`install` registers a kombu serializer called ``"freight"`` (content type
``application/x-freight``, binary), makes it the app's ``task_serializer`` and
``result_serializer``, and sets ``accept_content`` and ``result_accept_content`` to freight alone,
so that a worker refuses pickle, YAML and JSON messages alike: the only way in is a freight
payload, and with ``key=`` a freight payload signed with that key.

Large payloads (1 MiB and more, ``large_values=``) are not put in the message: kombu's redis
transport would write them as base64 inside JSON. They are carried by :mod:`freight.carrier` as
their own redis values (the broker's redis unless ``large_values_url=`` says otherwise) with an
expiry, and the message carries the carrier's reference (``_celery_values``;
docs/integrations/celery.md).

Safe by default: ``allow_pickle=False``, so a message whose payload would run pickle (a custom
class, a closure, a gadget) is refused before anything in it is decoded. numpy arrays, pandas,
polars and pyarrow values, datetimes, Decimals, UUIDs and the builtins are encoded natively and
pass. ``allow_pickle=True`` lets pickle payloads in (then sign, so only key holders can send).

Errors: kombu wraps every decoder error in its ``DecodeError`` (a client would see a kombu error
whose text is the freight one, and a worker would drop the message without a word to the client).
So the decoder raises the classes below instead: each is the freight error it stands for
(``except freight.UnsafePayloadError`` catches :class:`UnsafeMessageError`) and also kombu's
``ContentDisallowed``, which kombu lets through unwrapped and Celery's worker handles as an invalid
task (logged, message rejected, ``task_rejected`` sent). :func:`install` connects to that signal:
the worker then stores the refusal as the task's failure, as (module, class name, message), which
the client's ``result.get()`` raises as the same class. A client without the key cannot read that
failure either (the worker signs it), so it sees :class:`SignatureMismatchError` itself.

A worker without freight refuses ``application/x-freight`` messages as untrusted content and
stores nothing: the client would wait forever. ``result.get(timeout=...)`` on an app with freight
installed asks the workers (Celery's remote control, JSON) what they accept when it times out on a
task still pending, and raises :class:`WorkerNotInstalledError` naming those without freight;
:func:`check_workers` asks the same question up front.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import freight
from freight import carrier
from freight.exceptions import (
    DeserializationError,
    FreightError,
    IntegrityError,
    OptionError,
    UnsafePayloadError,
)
from freight.integrations import _celery_values as _values
from freight.integrations import check_options, flag

try:  # Celery and kombu are an optional dependency (``pip install 'freight[celery]'``).
    from celery.exceptions import TimeoutError as _CeleryTimeout
    from kombu.exceptions import ContentDisallowed as _PassThrough
except ImportError as e:  # pragma: no cover - depends on the environment
    raise freight.MissingDependencyError(
        "freight.integrations.celery needs Celery: pip install 'freight[celery]'"
    ) from e

__all__ = [
    "NAME",
    "CONTENT_TYPE",
    "install",
    "installed",
    "dumps",
    "loads",
    "UnsafeMessageError",
    "SignatureMismatchError",
    "UndecodableMessageError",
    "WorkerNotInstalledError",
    "check_workers",
]

#: The serializer's name in kombu (``app.conf.task_serializer``) and its content type.
NAME = "freight"
CONTENT_TYPE = "application/x-freight"

_LOCK = threading.Lock()
# The codec kombu's serializer uses. kombu's registry is one per process, so the serializer (and its
# options: key, allow_pickle) is too: the last install() sets it.
_STATE: dict[str, Any] = {"codec": None, "options": None, "values": None}


class UnsafeMessageError(UnsafePayloadError, _PassThrough):
    """A message or result would run pickle and this process refuses pickle (``allow_pickle=False``)."""


class SignatureMismatchError(IntegrityError, _PassThrough):
    """A message or result is not signed, or signed with another key, or its bytes changed."""


class UndecodableMessageError(DeserializationError, _PassThrough):
    """A message or result could not be decoded (not freight, truncated, a tag unknown here, ...)."""


class WorkerNotInstalledError(FreightError, _CeleryTimeout):
    """``result.get(timeout=...)`` timed out and workers that answered have no freight serializer
    (also Celery's ``TimeoutError``, which code waiting on results already catches)."""


_REFUSALS = (UnsafeMessageError, SignatureMismatchError, UndecodableMessageError)


def _refusal(exc: FreightError) -> FreightError:
    """The pass-through class for a freight decoding error, with the same message (and the original
    as its cause)."""
    if isinstance(exc, _PassThrough):
        return exc
    if isinstance(exc, UnsafePayloadError):
        cls: type[FreightError] = UnsafeMessageError
        hint = (
            "; send only natively encoded values (arrays, tables, builtins), or "
            "install(app, allow_pickle=True) on the receiving side and sign with key="
        )
    elif isinstance(exc, IntegrityError):
        cls = SignatureMismatchError
        hint = "; every client and worker must call freight.integrations.celery.install(app, key=...) with the same key"
    else:
        cls = UndecodableMessageError
        hint = ""
    out = cls(f"{exc}{hint}")
    out.__cause__ = exc
    return out


def _plain(value: Any) -> Any:
    """Celery's canvas signatures (``link``, ``chain``, ``chord`` in a message's embed) are dict
    subclasses; JSON writes them as dicts and Celery rebuilds them on the worker. freight would keep
    the class, through pickle, which a safe worker refuses: write them as the dicts they are."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value) if type(value) in (list, tuple) else value
    return value


def dumps(obj: Any) -> bytes:
    """kombu's encoder: a freight payload (signed when :func:`install` had a key)."""
    codec = _STATE["codec"]
    if codec is None:
        raise FreightError("freight.integrations.celery.install(app) was not called in this process")
    # A protocol 2 task body is (args, kwargs, embed): only the small embed dict can hold signatures.
    if type(obj) is tuple and len(obj) == 3 and type(obj[2]) is dict and any(obj[2].values()):
        obj = (obj[0], obj[1], _plain(obj[2]))
    data = codec.dumps(obj)
    data = data if type(data) is bytes else bytes(data)
    values = _STATE["values"]
    if values is not None and carrier.carries(len(data), values.threshold):
        return values.put(data, is_task=type(obj) is tuple)
    return data


def loads(data: Any) -> Any:
    """kombu's decoder: refuses pickle (unless allowed) and unsigned or foreign payloads (with a
    key) before decoding anything; raises the pass-through classes above."""
    codec = _STATE["codec"]
    if codec is None:
        raise UndecodableMessageError(
            "a freight message arrived but freight.integrations.celery.install(app) was not called in this "
            "process: call it in the module that defines the Celery app"
        )
    if isinstance(data, str):  # transports that hand text over (they should not for a binary type)
        data = data.encode("latin-1")
    ref = None
    try:
        if _values.is_reference(data):
            ref, data = _stored(data)
        value = codec.loads(data)
    except FreightError as exc:
        if _looks_like_json(data):
            # A result backend decodes what it reads with its own serializer, whatever wrote it.
            raise UndecodableMessageError(
                "a result came back as JSON, not freight: the worker that ran the task has no freight "
                "serializer. Call freight.integrations.celery.install(app, ...) in the module that "
                "defines the app the worker loads (celery -A module worker), with the same key as here"
            ) from exc
        raise _refusal(exc) from exc
    values = _STATE["values"]
    if values is not None:
        values.decoded(ref)
        if ref is not None and not _CONNECTED_POSTRUN:
            _watch_task_ends()
    return value


_CONNECTED_POSTRUN: list[bool] = []


def _watch_task_ends() -> None:
    """Connects :func:`_on_prerun` and :func:`_on_postrun` once this process has read a stored
    payload (a worker): Celery sends those signals to receivers only, so tasks without large
    values pay nothing for them."""
    from celery import signals

    with _LOCK:
        if not _CONNECTED_POSTRUN:
            signals.task_prerun.connect(_on_prerun, weak=False)
            signals.task_postrun.connect(_on_postrun, weak=False)
            _CONNECTED_POSTRUN.append(True)


def _on_prerun(**_: Any) -> None:
    values = _STATE["values"]
    if values is not None:
        values.task_started()


def _stored(body: Any) -> tuple[carrier.Ref, Any]:
    """(reference, payload) of a message that refers to a value stored in redis."""
    values = _STATE["values"]
    if values is None:
        raise UndecodableMessageError(
            "a message refers to a payload stored in redis, but this process was installed with "
            "large_values=None: call freight.integrations.celery.install(app, ...) with the same "
            "large_values options as the sender"
        )
    return values.get(body)  # the carrier's errors say what failed, on which server


def _looks_like_json(data: Any) -> bool:
    head = bytes(memoryview(data)[:1]) if data else b""
    return head in (b"{", b"[", b'"')


def install(
    app: Any,
    *,
    allow_pickle: bool = False,
    key: Any = None,
    large_values: int | None = carrier.THRESHOLD,
    large_values_url: str | None = None,
    large_values_ttl: float | None = None,
    **freight_options: Any,
) -> Any:
    """Makes freight the task and result serializer of ``app`` (in this process).

    Args:
        app: a ``celery.Celery`` application. Call this where the app is defined, before it sends
            or receives anything, so that clients and workers (``celery -A module worker``) both
            run it.
        allow_pickle: False (default) refuses, on loading, payloads that would run pickle: only
            natively encoded values (numpy, pandas, polars, pyarrow, builtins, datetimes, ...) pass.
        key: signs every message and result (HMAC-SHA256); a worker then refuses anything not
            signed with it (a list ``[new, old]`` accepts both during a rotation, signs with the
            first).
        large_values: payloads of at least this many bytes (default 1 MiB) are stored in redis as
            their own values and the message carries a reference: kombu's redis transport would
            write them into the message as base64 inside JSON, which costs more than serializing
            (see docs/integrations/celery.md). None keeps every payload in its message. Used when
            ``large_values_url`` is given or the broker (else the result backend) is redis; with
            other brokers payloads stay in the message.
        large_values_url: the redis server for them (default: the broker's, else the result
            backend's). Clients and workers must reach the same one.
        large_values_ttl: seconds a stored payload lives at most (default: the app's
            ``result_expires``, one day unless set). A worker deletes a task's arguments when the
            task ends and its message is acknowledged; results live this long, as results do.
        **freight_options: other options of :class:`freight.Freight` (``compression``,
            ``checksum``, ``allowed_tags``, ``max_size``, ``strict_versions``, ...).

    Returns:
        the app.

    Raises:
        freight.OptionError: an option :class:`freight.Freight` does not take.
    """
    from kombu.serialization import registry

    check_options(
        "freight.integrations.celery.install",
        freight_options,
        takes=("allow_pickle", "key", "large_values", "large_values_url", "large_values_ttl"),
    )
    if "zero_copy" in freight_options:
        # Celery and kombu keep message bodies only as long as decoding takes: views of them would
        # outlive their buffer's owner's intent (and results are decoded from pub/sub messages).
        raise OptionError("install() does not take zero_copy: Celery messages are short-lived buffers; drop it")
    if large_values is not None and (type(large_values) is not int or large_values < 0):
        raise OptionError(f"large_values must be a size in bytes (an int ≥ 0) or None, not {large_values!r}")
    # Celery's default (False) for None, not the codec's.
    allow_pickle = flag("allow_pickle", allow_pickle, False)
    codec = freight.DEFAULT.replace(allow_pickle=allow_pickle, key=key, **freight_options)
    url = _values.redis_url(app, large_values_url) if large_values is not None else None
    values = None
    if url is not None:
        ttl = large_values_ttl if large_values_ttl is not None else _values.default_ttl(app)
        values = _values.ValueStore(url, large_values, ttl, codec)
    with _LOCK:
        _STATE["codec"] = codec
        _STATE["values"] = values
        _STATE["options"] = {
            "allow_pickle": allow_pickle,
            "signed": key is not None,
            "large_values": large_values if values is not None else None,
            **freight_options,
        }
        registry.register(NAME, dumps, loads, content_type=CONTENT_TYPE, content_encoding="binary")
    app.conf.update(
        task_serializer=NAME,
        result_serializer=NAME,
        accept_content=[CONTENT_TYPE],
        result_accept_content=[CONTENT_TYPE],
        # Celery sends a task's exception as (module, class, args) under non-pickle serializers.
        # Events and remote control stay JSON (they carry no task data).
    )
    # A result backend made before install() read the old settings when it was made: update it.
    backend = getattr(app, "_backend", None)
    if backend is not None and hasattr(backend, "content_type"):
        from kombu.serialization import prepare_accept_content

        backend.serializer = NAME
        backend.content_type, backend.content_encoding, backend.encoder = registry._encoders[NAME]
        backend.accept = prepare_accept_content([CONTENT_TYPE])
    if not getattr(app.AsyncResult, "_freight", False):
        app.AsyncResult = _result_class(app)
    _connect()
    return app


_LOG = logging.getLogger(__name__)
_CONNECTED = []


def _connect() -> None:
    from celery import signals

    with _LOCK:
        if not _CONNECTED:
            signals.task_rejected.connect(_on_rejected, weak=False)
            _CONNECTED.append(True)


def _on_postrun(sender: Any = None, state: Any = None, **_: Any) -> None:
    """A task ended on this worker: delete the arguments it read from redis once its message is gone
    (success; retry, which sends them again; ignored; failure when the message is acknowledged)."""
    values = _STATE["values"]
    if values is None:
        return
    acked_on_failure = not getattr(sender, "acks_late", False) or getattr(sender, "acks_on_failure_or_timeout", True)
    delete = state in ("SUCCESS", "RETRY", "IGNORED") or (state == "FAILURE" and acked_on_failure)
    try:
        values.task_ended(delete)
    except Exception:  # noqa: BLE001 - they expire anyway; a redis hiccup must not stop the worker
        _LOG.warning("freight: could not delete a finished task's arguments from redis", exc_info=True)


def _on_rejected(sender: Any = None, message: Any = None, exc: Any = None, **_: Any) -> None:
    """Celery's worker rejected a message (``on_invalid_task``): when freight refused it, store the
    refusal as the task's failure, so that the client's ``result.get()`` raises it rather than
    waiting forever. Signed with this worker's key: a sender without it cannot read it either."""
    if not isinstance(exc, _REFUSALS):
        return
    app = getattr(sender, "app", None)
    task_id = (getattr(message, "headers", None) or {}).get("id")
    if app is None or not task_id or app.conf.result_serializer != NAME or app.conf.task_ignore_result:
        return
    try:
        app.backend.mark_as_failure(task_id, exc)
    except Exception:  # noqa: BLE001 - a backend failure must not stop the worker's consumer
        _LOG.exception("freight: could not store the refusal of task %s as its failure", task_id)


def _result_class(app: Any) -> Any:
    """The app's ``AsyncResult``, whose ``get`` explains a timeout on a task that no worker could
    read (workers without freight refuse it as untrusted content and store nothing)."""
    base = app.AsyncResult

    class FreightAsyncResult(base):  # type: ignore[misc,valid-type]
        _freight = True

        def get(self, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().get(timeout, *args, **kwargs)
            except _CeleryTimeout as exc:
                if isinstance(exc, WorkerNotInstalledError) or self.state != "PENDING":
                    raise
                try:
                    missing, _ = _survey(self.app, 1.0)
                except Exception:  # noqa: BLE001 - the survey is a hint; the timeout stands
                    raise exc from None
                if missing:
                    raise WorkerNotInstalledError(
                        _missing_message(missing, f"task {self.id} is still pending")
                    ) from exc
                raise

    return FreightAsyncResult


def _survey(app: Any, timeout: float) -> tuple[list[str], list[str]]:
    """(workers without freight, workers with it), from Celery's remote control ``conf`` command.

    Remote control messages go out in the app's task serializer, which a worker without freight
    refuses (and a worker with freight accepts alone): the question is asked twice, in JSON and in
    freight, and answers are read in either."""
    replies: dict[str, Any] = {}
    with app.connection_for_read() as conn:
        for serializer in ("json", NAME):
            mailbox = app.control.mailbox(conn)  # a bound copy: its accept is ours to set
            mailbox.accept = ["application/json", CONTENT_TYPE]
            found = mailbox._broadcast(
                "conf", {"with_defaults": False}, reply=True, timeout=timeout / 2, serializer=serializer
            )
            for reply in found or ():
                replies.update(reply)
    missing, ready = [], []
    for worker, conf in sorted(replies.items()):
        accept = (conf or {}).get("accept_content") or ()
        (ready if CONTENT_TYPE in accept or NAME in accept else missing).append(worker)
    return missing, ready


def _missing_message(missing: list[str], what: str) -> str:
    return (
        f"{what}: worker(s) {', '.join(missing)} have no freight serializer and refuse "
        f"{CONTENT_TYPE} messages as untrusted content. Call freight.integrations.celery.install(app, ...) "
        "in the module that defines the app those workers load (celery -A module worker), with the "
        "same key as here, and restart them"
    )


def check_workers(app: Any, timeout: float = 1.0) -> list[str]:
    """The names of the workers that answered within ``timeout`` seconds, all with freight installed.

    Raises:
        WorkerNotInstalledError: a worker that answered has no freight serializer, or none answered.
    """
    missing, ready = _survey(app, timeout)
    if missing:
        raise WorkerNotInstalledError(_missing_message(missing, "check_workers"))
    if not ready:
        raise WorkerNotInstalledError(
            f"check_workers: no worker answered within {timeout} s; start one (celery -A module worker) "
            "or give a longer timeout"
        )
    return ready


def installed() -> dict[str, Any] | None:
    """The options of the serializer installed in this process (``signed`` instead of the key), or
    None."""
    options = _STATE["options"]
    return dict(options) if options is not None else None
