"""The protocol every carrier backend follows: one small class (see docs/carrier.md).

A backend keeps named byte objects somewhere several processes reach. It says who it is
(``name``, a class attribute, and ``location``, where this instance's objects are: both go into
every reference, and a reference names the backend that can open it) and which keys are its
(``namespace``: a reader refuses a reference to any other key, so a forged reference cannot make
it read or delete other objects). It implements four calls; the carrier does the rest (layout,
threshold, signing, lifetimes, errors):

- ``put_frames(key, frames, *, ttl)``: store the buffers back to back as one object, whole or not
  at all; ``ttl`` (seconds or None) may be honoured natively (``expires = True``), else the
  carrier checks expiry on read and :func:`freight.carrier.sweep` removes what expired.
- ``get(key, *, consume)``: the object's bytes (any buffer), or None when there is none;
  ``consume=True`` (read-once) removes it in the same call, atomically where the backend can.
- ``delete(key)``: remove it; nothing to remove is no error.
- ``exists(key)``: whether it is there.

Optionally ``keys()`` (the objects under ``namespace``, for :func:`freight.carrier.sweep`),
``lend(frames)`` (for each frame, ``(key, offset, size)`` of an object already in the backend that
holds it, which the reference then names instead of storing it again, or None) and
``open(location)`` (a classmethod: the backend a reference names, for readers that were given
none). Subclasses with a ``name`` are registered by it.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from freight.exceptions import RefError

__all__ = ["Backend", "backend_class", "open_backend"]

_CLASSES: dict[str, type[Backend]] = {}
_OPENED: dict[tuple[str, str], Backend] = {}
_LOCK = threading.Lock()


class Backend:
    """Base class of the carrier's backends (see the module's docstring for the protocol)."""

    #: The backend's name in references (ASCII, short): ``"shm"``, ``"store"``, ``"redis"``.
    name: ClassVar[str] = ""
    #: Whether ``put_frames`` honours ``ttl`` itself (the object disappears when it expires).
    expires: ClassVar[bool] = False
    #: The keys this backend writes and accepts start with this.
    namespace: str = "freight-carrier/"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            _CLASSES[cls.name] = cls

    @property
    def location(self) -> str:
        """Where this instance keeps its objects (a URL, a path): references carry it."""
        raise NotImplementedError

    @classmethod
    def open(cls, location: str) -> Backend:
        """The backend at ``location`` (for a reader given none)."""
        raise RefError(
            f"a {cls.name or cls.__name__} backend cannot be opened from a reference's location "
            f"({location!r}): pass the backend to get() / release()"
        )

    def new_key(self, expires: int) -> str:
        """A fresh key under ``namespace``; ``expires`` (ms since the epoch, 0: none) is written
        into it so that :func:`freight.carrier.sweep` needs nothing but the key."""
        return f"{self.namespace}{secrets.token_hex(16)}" + (f".e{expires}" if expires else "")

    def owns(self, key: str) -> bool:
        """Whether ``key`` is one of this backend's (under its namespace, no ``..`` in it)."""
        return key.startswith(self.namespace) and ".." not in key

    def put_frames(self, key: str, frames: Sequence[Any], *, ttl: float | None = None) -> None:
        raise NotImplementedError

    def put_bytes(self, key: str, data: Any, *, ttl: float | None = None) -> None:
        self.put_frames(key, [data], ttl=ttl)

    def get(self, key: str, *, consume: bool = False) -> Any:
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError

    def exists(self, key: str) -> bool:
        raise NotImplementedError

    def keys(self) -> Iterable[str]:
        return ()

    def lend(self, frames: Sequence[Any]) -> list[tuple[str, int, int] | None]:
        """Per frame, ``(key, offset, size of that object)`` when it lies in an object the backend
        already holds (shared memory this process received: no copy), else None (store it)."""
        return [None] * len(frames)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.location} {self.namespace}>"


def backend_class(name: str) -> type[Backend]:
    cls = _CLASSES.get(name)
    if cls is None:
        raise RefError(
            f"this reference names the carrier backend {name!r}, which this process does not have: import "
            "the module that defines it, or pass the backend to get()"
        )
    return cls


def open_backend(name: str, location: str) -> Backend:
    """The backend a reference names, opened once per process and location."""
    with _LOCK:
        found = _OPENED.get((name, location))
    if found is None:
        found = backend_class(name).open(location)
        with _LOCK:
            found = _OPENED.setdefault((name, location), found)
    return found
