"""Large Parsl payloads carried by :mod:`freight.carrier` (its store backend), with only the
carrier's reference in Parsl's messages.

Why: a HighThroughputExecutor task crosses three processes (submitter, interchange, worker pool
manager) before it reaches a worker, each hop pickling the message that holds the payload, and
Parsl joins and splits its buffers with copies on both ends; a result goes back the same way.
Measured on 64 MiB arrays, those copies are the whole cost: with the payload in the message no
serializer does much better than dill (docs/integrations/parsl.md). A payload over the threshold is
instead written once to a store every worker can reach (a shared folder, S3) and the message carries
a :class:`freight.carrier.Ref` (the store's URL and the key); the reader gets the bytes (a local file
is memory-mapped) and decodes them with its own codec.

Lifetime: Parsl reads each buffer once (a retried task is serialized again), so the references are
read-once: the reader deletes the object as soon as it has it. What nobody reads (a task cancelled
before it ran, a result never waited for) lies under ``freight-parsl/<run>/``, which the submitter removes at exit.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from typing import Any

from freight import carrier
from freight.exceptions import FreightError, OptionError

ROOT = "freight-parsl/"
#: Where a worker without a store of its own writes large results (a store URL), when set.
ENV_URL = "FREIGHT_PARSL_LARGE_VALUES_URL"
_SCHEMES = ("file://", "s3://")
_BACKENDS: dict[str, carrier.StoreBackend] = {}
_LOCK = threading.Lock()
_BACKENDS_LOCK = threading.Lock()  # taken inside _LOCK (automatic() makes a LargeValues)


def check_url(url: str) -> str:
    if not isinstance(url, str) or not url.startswith(_SCHEMES):
        raise OptionError(
            f"large_values_url must be a file:// folder every worker can read or an s3:// prefix, not {url!r}"
        )
    return url


def _backend(url: str) -> carrier.StoreBackend:
    """The store at ``url`` as a carrier backend that reads every run's values (one per process)."""
    with _BACKENDS_LOCK:
        backend = _BACKENDS.get(url)
        if backend is None:
            backend = _BACKENDS[url] = carrier.StoreBackend(url, namespace=ROOT)
        return backend


class LargeValues:
    """Where this process writes its large payloads: ``url``, under ``freight-parsl/<run>/``."""

    def __init__(self, url: str, run: str | None = None, owner: bool = False, fallback: bool = False) -> None:
        self.url, self.fallback = check_url(url), fallback
        self.run = run or os.urandom(8).hex()
        self.backend = carrier.StoreBackend(_backend(url).store, namespace=f"{ROOT}{self.run}/")
        if owner:  # the submitter: what nobody read is removed when it exits
            atexit.register(self.remove_run)

    def put(self, payload: bytes) -> bytes:
        """The reference to ``payload`` (read-once), written to the store; ``payload`` itself when
        the store is the automatic one and could not take it (``/dev/shm`` full: a container's is
        64 MiB)."""
        try:
            ref = carrier.put(carrier.Frames([payload]), self.backend, lifetime=carrier.READ_ONCE, threshold=0)
        except FreightError:
            if not self.fallback:
                raise
            return payload
        return bytes(ref)

    def remove_run(self) -> None:
        try:
            self.backend.store.delete_prefix(self.backend.namespace)
        except Exception:  # noqa: BLE001 - at exit: a store gone away must not fail the program
            pass


_AUTO: dict[str, Any] = {"dfk": None, "values": None}


def automatic() -> LargeValues | None:
    """``large_values_url="auto"``: a folder in ``/dev/shm`` (else the temporary folder) when every
    executor of the loaded DataFlowKernel that serializes runs its workers on this machine (a
    HighThroughputExecutor on a LocalProvider with a SingleNodeLauncher), so that they read what
    this process writes; else None (payloads in the messages). Decided once per DataFlowKernel."""
    from parsl.dataflow.dflow import DataFlowKernelLoader

    dfk = DataFlowKernelLoader._dfk
    if dfk is None:
        return None
    with _LOCK:
        if _AUTO["dfk"] is not dfk:
            values = None
            if _workers_here(dfk):
                root = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
                folder = tempfile.mkdtemp(prefix="freight-parsl-", dir=root)
                atexit.register(shutil.rmtree, folder, ignore_errors=True)
                values = LargeValues(f"file://{folder}", owner=True, fallback=True)
            _AUTO.update(dfk=dfk, values=values)
        return _AUTO["values"]


def _workers_here(dfk: Any) -> bool:
    from parsl.executors import HighThroughputExecutor, ThreadPoolExecutor
    from parsl.launchers import SingleNodeLauncher
    from parsl.providers import LocalProvider

    serializing = [e for e in dfk.executors.values() if not isinstance(e, ThreadPoolExecutor)]
    return bool(serializing) and all(
        isinstance(e, HighThroughputExecutor)
        and type(e.provider) is LocalProvider
        and type(getattr(e.provider, "launcher", None)) is SingleNodeLauncher
        for e in serializing
    )


def read(body: Any) -> tuple[Any, str, str]:
    """(payload, store URL, run) of a reference; the stored object is deleted once read."""
    ref = carrier.Ref.from_bytes(body)
    if ref.backend != carrier.StoreBackend.name or not ref.location.startswith(_SCHEMES):
        raise carrier.RefError(
            f"a Parsl message refers to a stored payload that is not freight's ({ref.backend} {ref.location[:200]})"
        )
    try:
        (payload,) = carrier.get_frames(ref, _backend(ref.location))
    except carrier.RefGoneError as exc:
        raise carrier.RefGoneError(
            f"{exc}. A Parsl payload is deleted once read (a second read of one message) or when the "
            "submitting program exits"
        ) from None
    except carrier.RefError as exc:
        raise carrier.RefError(f"{exc}; every worker must reach the store given as large_values_url") from exc
    return payload, ref.location, ref.key[len(ROOT) :].partition("/")[0]
