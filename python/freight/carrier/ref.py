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

Version 2 (written only when a reference needs it, so that readers of version 1 still read every
other reference) adds, after the key, ``u16`` count + per object ``u16`` length + key, ``u64``
size: objects already in the backend that hold frames too (a shared-memory segment a process
received and sends on unchanged: lent, not stored again); and per frame, the ``u8``'s bit 1 says
"in one of those objects" (then ``u16`` its index from 1, ``u64`` the frame's offset in it follow
the length) and bit 2 "read-only" (the reader gets a read-only view: the sender's array was
read-only, or Arrow memory, which freight would otherwise copy).

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

__all__ = ["MAGIC", "VERSION", "ALIGN", "Frame", "Ref", "Lifetime", "READ_ONCE", "UNTIL_RELEASED", "ttl", "task",
           "is_ref", "layout"]  # fmt: skip

MAGIC = b"FREIGHT-REF"
VERSION = 2  # the newest this freight reads and writes (it writes 1 where that holds the reference)
ALIGN = 64  # stored frames start on 64-byte boundaries: numpy and Arrow want aligned buffers
_SIGNED = 1
_STORED, _ELSEWHERE, _READ_ONLY = 1, 2, 4  # a frame's u8 (version 2; version 1 knows 0 and 1)
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


class Frame(NamedTuple):
    """One frame of a reference: its bytes when inline (None when stored), its length, the object
    holding it (0: the reference's own, laid out by the carrier; i ≥ 1: ``Ref.objects[i - 1]``),
    its offset in that object, and whether the reader gets it read-only."""

    inline: Any
    length: int
    source: int = 0
    offset: int = 0
    read_only: bool = False


def layout(lengths: Sequence[int]) -> tuple[list[int], int]:
    """Where frames of these lengths lie when stored back to back, each on an ``ALIGN``-byte
    boundary: their offsets and the object's size (what the carrier stores, what mpi4py's
    ``wrap`` receives into)."""
    offsets, end = [], 0
    for n in lengths:
        end += -end % ALIGN
        offsets.append(end)
        end += n
    return offsets, end


class Ref:
    """A reference to a value carried out of band: small frames inside it, large ones in a
    backend. Made by :func:`freight.carrier.put`; ``bytes(ref)`` is its wire form and
    ``Ref.from_bytes`` parses one (a parsed reference is checked, signature first, by
    :func:`freight.carrier.get` and :func:`freight.carrier.release`)."""

    __slots__ = ("backend", "location", "key", "objects", "lifetime", "expires", "size", "frames", "signed", "_wire",
                 "_body")  # fmt: skip

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
        frames: Sequence[Frame | tuple[Any, int]],
        sign_with: bytes | None,
        objects: Sequence[tuple[str, int]] = (),
    ) -> Ref:
        """The reference to these fields; ``frames`` are :class:`Frame` (or ``(inline bytes or
        None, length)``: stored ones in the reference's own object), ``objects`` the other objects
        ``(key, size)`` that frames lie in."""
        entries = [f if isinstance(f, Frame) else Frame(*f) for f in frames]
        version = 2 if objects or any(f.source or f.read_only for f in entries) else 1
        kind = _KINDS.index(lifetime.kind)
        parts = [MAGIC, _HEAD.pack(version, _SIGNED if sign_with else 0, kind, expires, size)]
        name, loc, k = backend.encode("ascii"), location.encode(), key.encode()
        parts += [struct.pack("<B", len(name)), name, struct.pack("<H", len(loc)), loc, struct.pack("<H", len(k)), k]
        if version == 2:
            parts.append(struct.pack("<H", len(objects)))
            for other, n in objects:
                o = other.encode()
                parts += [struct.pack("<H", len(o)), o, struct.pack("<Q", n)]
        parts.append(struct.pack("<I", len(entries)))
        for f in entries:
            where = 0 if f.inline is not None else _ELSEWHERE if f.source else _STORED
            parts.append(struct.pack("<BQ", where | (_READ_ONLY if f.read_only else 0), f.length))
            if f.inline is not None:
                parts.append(f.inline)
            elif f.source:
                parts.append(struct.pack("<HQ", f.source, f.offset))
        body = b"".join(parts)
        if sign_with:
            body += hmac.new(sign_with, body, hashlib.sha256).digest()
        ref = cls.__new__(cls)
        ref._wire = body  # parsed on first use (__getattr__): a sender that only sends it never pays
        return ref

    def __getattr__(self, name: str) -> Any:
        # called only for a slot not set yet: a built reference's fields, parsed from its wire form
        if name == "_wire" or name not in Ref.__slots__:
            raise AttributeError(name)
        self._parse(self._wire)
        return getattr(self, name)

    def _parse(self, wire: bytes) -> None:
        if not wire.startswith(MAGIC):
            raise RefError("not a freight carrier reference (it does not start with FREIGHT-REF)")
        at = len(MAGIC)
        try:
            version, flags, kind, self.expires, self.size = _HEAD.unpack_from(wire, at)
            if not 1 <= version <= VERSION:
                raise RefError(
                    f"this reference is of version {version} of the carrier's wire form; this freight reads "
                    f"versions 1 to {VERSION}: upgrade freight on this side"
                )
            at += _HEAD.size
            self.backend, at = _field(wire, at, "<B")
            self.location, at = _field(wire, at, "<H")
            self.key, at = _field(wire, at, "<H")
            objects: list[tuple[str, int]] = []
            if version >= 2:
                (count,) = struct.unpack_from("<H", wire, at)
                at += 2
                for _ in range(count):
                    other, at = _field(wire, at, "<H")
                    objects.append((other, *struct.unpack_from("<Q", wire, at)))
                    at += 8
            self.objects = tuple(objects)
            (count,) = struct.unpack_from("<I", wire, at)
            at += 4
            frames: list[Frame] = []
            stored: list[int] = []  # indices of frames in the reference's own object, laid out
            for _ in range(count):
                where, n = struct.unpack_from("<BQ", wire, at)
                at += 9
                if where & ~(_STORED | _ELSEWHERE | _READ_ONLY) or (version == 1 and where > _STORED):
                    raise struct.error(f"frame kind {where}")
                read_only = bool(where & _READ_ONLY)
                if where & _ELSEWHERE:
                    source, offset = struct.unpack_from("<HQ", wire, at)
                    at += 10
                    if not 1 <= source <= len(objects):
                        raise struct.error("a frame in an object the reference does not name")
                    frames.append(Frame(None, n, source, offset, read_only))
                elif where & _STORED:
                    stored.append(len(frames))
                    frames.append(Frame(None, n, 0, 0, read_only))
                else:
                    if at + n > len(wire):
                        raise struct.error("inline frame past the end")
                    frames.append(Frame(memoryview(wire)[at : at + n], n, 0, 0, read_only))
                    at += n
            offsets, _ = layout([frames[i].length for i in stored])
            for i, offset in zip(stored, offsets):
                frames[i] = frames[i]._replace(offset=offset)
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

    def validate(self) -> None:
        """RefError unless every stored frame lies within the object that holds it (checked after
        the signature, so that a changed signed reference is reported as such)."""
        stored = [f for f in self.frames if f.inline is None and not f.source]
        end = layout([f.length for f in stored])[1] if stored else 0
        inside = all(f.offset + f.length <= self.objects[f.source - 1][1] for f in self.frames if f.source)
        if end != self.size or not inside:
            raise RefError(
                "this carrier reference is corrupt (its frames do not lie within the objects it names): it was "
                "not written by freight"
            )

    @property
    def stored(self) -> bool:
        """Whether a part of the value lies in the backend (False: every frame is inline)."""
        return self.size > 0 or bool(self.objects)

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
