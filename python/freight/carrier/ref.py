"""The carrier's reference: one wire form, versioned, signed when the codec has a key, and the
named lifetimes it carries.

Wire form, version 1 (integers little-endian)::

    b"FREIGHT-REF"  magic (11 bytes)
    u8   version (1)
    u8   flags: bit 0 signed
    u8   lifetime: 0 read-once, 1 ttl, 2 until-released, 3 task
    u64  expiry, milliseconds since the epoch (0: none)
    u64  size of the stored object (0: nothing stored, every frame is inline)
    u8   length + backend name (ASCII)
    u16  length + location (UTF-8): where the backend is
    u16  length + key (UTF-8): the stored object's name in the backend
    u32  frame count, then per frame: u8 0 (inline: u64 length + the bytes) or 1 (stored: u64
         length; stored frames lie back to back in the object, each on a 64-byte boundary)
    32 bytes HMAC-SHA256 of everything before it, under the codec's (first) key, when signed

A reader refuses a reference it cannot parse whole, a version it does not know, or, when its codec
has a key, one that is unsigned or whose signature does not match: before it fetches anything.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from freight.exceptions import OptionError, RefError, RefSignatureError

__all__ = ["MAGIC", "VERSION", "ALIGN", "Ref", "Lifetime", "READ_ONCE", "UNTIL_RELEASED", "ttl", "task", "is_ref"]

MAGIC = b"FREIGHT-REF"
VERSION = 1
ALIGN = 64  # stored frames start on 64-byte boundaries: numpy and Arrow want aligned buffers
_SIGNED = 1
_KINDS = ("read-once", "ttl", "until-released", "task")
_HEAD = struct.Struct("<BBBQQ")
_DIGEST = 32


class Lifetime(NamedTuple):
    """How long a stored value lives: ``kind`` is ``"read-once"`` (deleted by the read that gets
    it), ``"ttl"`` (until ``ttl`` seconds after it was put), ``"until-released"`` (until
    :func:`freight.carrier.release`) or ``"task"`` (owned by a task: the integration releases it
    when the task ends); ``ttl`` is also a backstop for the other kinds (None: none)."""

    kind: str
    ttl: float | None = None

    @classmethod
    def of(cls, value: Lifetime | str) -> Lifetime:
        """A Lifetime from itself or its kind's name."""
        lifetime = cls(value) if isinstance(value, str) else value
        if not isinstance(lifetime, Lifetime) or lifetime.kind not in _KINDS:
            raise OptionError(f"lifetime must be one of {', '.join(_KINDS)} (or a carrier.Lifetime), not {value!r}")
        if lifetime.ttl is not None and not lifetime.ttl > 0:
            raise OptionError(f"a lifetime's ttl must be a number of seconds > 0, not {lifetime.ttl!r}")
        if lifetime.kind == "ttl" and lifetime.ttl is None:
            raise OptionError("a ttl lifetime needs its seconds: carrier.ttl(seconds)")
        return lifetime


READ_ONCE = Lifetime("read-once")
UNTIL_RELEASED = Lifetime("until-released")


def ttl(seconds: float) -> Lifetime:
    """Lives ``seconds`` after it is put, however often it is read."""
    return Lifetime.of(Lifetime("ttl", seconds))


def task(ttl: float | None = None) -> Lifetime:
    """Owned by a task: the integration that runs the task releases it when the task ends;
    ``ttl`` seconds at most (a task that never runs)."""
    return Lifetime.of(Lifetime("task", ttl))


def now_ms() -> int:
    """The clock expiries are read against (tests replace it rather than wait)."""
    return int(time.time() * 1000)


def is_ref(data: Any) -> bool:
    """Whether ``data`` (bytes or any buffer) starts as a reference's wire form does."""
    if type(data) is bytes:
        return data.startswith(MAGIC)
    return bytes(memoryview(data)[: len(MAGIC)]) == MAGIC


def keys_of(key: Any) -> list[bytes]:
    """The signing keys of a codec's ``key`` option: none, one, or a rotation list (first signs)."""
    if key is None:
        return []
    keys = list(key) if isinstance(key, (list, tuple)) else [key]
    return [bytes(k) for k in keys if k is not None]


class Ref:
    """A reference to a value carried out of band: small frames inside it, large ones in a
    backend. Made by :func:`freight.carrier.put`; ``bytes(ref)`` is its wire form and
    ``Ref.from_bytes`` parses one (a parsed reference is checked, signature first, by
    :func:`freight.carrier.get` and :func:`freight.carrier.release`)."""

    __slots__ = ("backend", "location", "key", "lifetime", "expires", "size", "frames", "signed", "_wire", "_body")

    def __init__(self, wire: bytes) -> None:
        self._wire = wire
        self._parse(wire)

    @classmethod
    def from_bytes(cls, data: Any) -> Ref:
        """Parses a reference's wire form (bytes or any buffer); RefError if it is not one."""
        return cls(data if type(data) is bytes else bytes(data))

    @classmethod
    def build(
        cls,
        backend: str,
        location: str,
        key: str,
        lifetime: Lifetime,
        expires: int,
        size: int,
        frames: Sequence[tuple[Any, int]],
        sign_with: bytes | None,
    ) -> Ref:
        """The reference to these fields; ``frames`` are ``(inline bytes or None, length)``."""
        kind = _KINDS.index(lifetime.kind)
        parts = [MAGIC, _HEAD.pack(VERSION, _SIGNED if sign_with else 0, kind, expires, size)]
        name, loc, k = backend.encode("ascii"), location.encode(), key.encode()
        parts += [struct.pack("<B", len(name)), name, struct.pack("<H", len(loc)), loc]
        parts += [struct.pack("<H", len(k)), k, struct.pack("<I", len(frames))]
        for inline, n in frames:
            parts.append(struct.pack("<BQ", 0 if inline is not None else 1, n))
            if inline is not None:
                parts.append(inline)
        body = b"".join(parts)
        if sign_with:
            body += hmac.new(sign_with, body, hashlib.sha256).digest()
        return cls(body)

    def _parse(self, wire: bytes) -> None:
        if not wire.startswith(MAGIC):
            raise RefError("not a freight carrier reference (it does not start with FREIGHT-REF)")
        at = len(MAGIC)
        try:
            version, flags, kind, self.expires, self.size = _HEAD.unpack_from(wire, at)
            if version != VERSION:
                raise RefError(
                    f"this reference is of version {version} of the carrier's wire form; this freight reads "
                    f"version {VERSION}: upgrade freight on this side"
                )
            at += _HEAD.size
            self.backend, at = _field(wire, at, "<B")
            self.location, at = _field(wire, at, "<H")
            self.key, at = _field(wire, at, "<H")
            (count,) = struct.unpack_from("<I", wire, at)
            at += 4
            frames: list[tuple[memoryview | None, int]] = []
            for _ in range(count):
                where, n = struct.unpack_from("<BQ", wire, at)
                at += 9
                if where == 0:
                    if at + n > len(wire):
                        raise struct.error("inline frame past the end")
                    frames.append((memoryview(wire)[at : at + n], n))
                    at += n
                else:
                    frames.append((None, n))
            self.frames = tuple(frames)
        except (struct.error, UnicodeDecodeError, IndexError) as exc:
            raise RefError(
                f"this carrier reference is truncated or corrupt ({exc}): it was not written by freight"
            ) from None
        self.signed = bool(flags & _SIGNED)
        self._body = at
        if len(wire) != at + (_DIGEST if self.signed else 0) or kind >= len(_KINDS):
            raise RefError("this carrier reference is corrupt (its length or lifetime is not the carrier's)")
        self.lifetime = Lifetime(_KINDS[kind])

    def check(self, key: Any) -> None:
        """Checks the signature against the codec's ``key`` option (nothing to check without one):
        RefSignatureError when unsigned, signed with another key, or changed."""
        keys = keys_of(key)
        if not keys:
            return
        if not self.signed:
            raise RefSignatureError(
                "this carrier reference is not signed, and this codec has a key: refused before anything was "
                "fetched. The sender must put() with a codec that has the same key"
            )
        body, digest = self._wire[: self._body], self._wire[self._body :]
        if not any(hmac.compare_digest(hmac.new(k, body, hashlib.sha256).digest(), digest) for k in keys):
            raise RefSignatureError(
                "this carrier reference's signature does not match this codec's key (forged, changed, or "
                "signed with another key): refused before anything was fetched. Give both sides the same key"
            )

    @property
    def stored(self) -> bool:
        """Whether a part of the value lies in the backend (False: every frame is inline)."""
        return self.size > 0

    def expired(self) -> bool:
        return bool(self.expires) and self.expires <= now_ms()

    def __bytes__(self) -> bytes:
        return self._wire

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ref) and other._wire == self._wire

    def __hash__(self) -> int:
        return hash(self._wire)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Ref, (self._wire,))

    def __repr__(self) -> str:
        return (
            f"<freight.carrier.Ref {self.backend} {self.location} {self.key or '(inline)'} "
            f"{self.lifetime.kind} {self.size} bytes{' signed' if self.signed else ''}>"
        )


def _field(wire: bytes, at: int, fmt: str) -> tuple[str, int]:
    (n,) = struct.unpack_from(fmt, wire, at)
    at += struct.calcsize(fmt)
    if at + n > len(wire):
        raise struct.error("field past the end")
    return wire[at : at + n].decode("ascii" if fmt == "<B" else "utf-8"), at + n
