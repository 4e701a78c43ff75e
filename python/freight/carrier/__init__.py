"""The carrier: large values between processes, out of band, through one mechanism.

>>> from freight import carrier
>>> backend = carrier.StoreBackend("file:///shared/values")   # or SharedMemory(), RedisBackend(url)
>>> ref = carrier.put(big_array, backend, lifetime=carrier.READ_ONCE)
>>> message = bytes(ref)                       # a few hundred bytes: send it any way you like
>>> value = carrier.get(message)               # in the reader: checked, fetched, decoded; removed

:func:`put` stores a value's large frames (at least :data:`THRESHOLD` bytes, or the
``threshold=`` given; once one is, the value's other frames of :data:`COMPANION` bytes or more go
with it) in a backend and returns a :class:`Ref` that carries the small frames itself;
:func:`get` checks the reference (its signature first, when the codec has a key; then that it is
the backend's and under its namespace; then its expiry) before it fetches anything, and decodes.
Lifetimes: :data:`READ_ONCE`, :func:`ttl`, :data:`UNTIL_RELEASED` (:func:`release`), :func:`task`.
Backends: :class:`SharedMemory`, :class:`StoreBackend`, :class:`RedisBackend`, or a subclass of
:class:`Backend` of your own (docs/carrier.md). Modules: ``ref`` (the wire form and lifetimes),
``backend`` (the protocol), ``backends``, ``transfer`` (put, get, release, sweep, the threshold).
"""

from __future__ import annotations

from freight.carrier.backend import Backend
from freight.carrier.backends import RedisBackend, SharedMemory, StoreBackend
from freight.carrier.ref import READ_ONCE, UNTIL_RELEASED, Lifetime, Ref, is_ref, task, ttl
from freight.carrier.transfer import (
    COMPANION,
    THRESHOLD,
    THRESHOLDS,
    Frames,
    carries,
    get,
    get_frames,
    put,
    release,
    sweep,
    threshold,
)
from freight.exceptions import RefError, RefGoneError, RefSignatureError

__all__ = [
    "put",
    "get",
    "get_frames",
    "release",
    "sweep",
    "Ref",
    "is_ref",
    "Frames",
    "Lifetime",
    "READ_ONCE",
    "UNTIL_RELEASED",
    "ttl",
    "task",
    "THRESHOLD",
    "THRESHOLDS",
    "COMPANION",
    "threshold",
    "carries",
    "Backend",
    "SharedMemory",
    "StoreBackend",
    "RedisBackend",
    "RefError",
    "RefGoneError",
    "RefSignatureError",
]
