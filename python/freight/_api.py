"""The public entry points: :class:`Freight` (a configured codec with its own registry layer)
and the module-level functions, which use a default :class:`Freight` over the global registry."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any

from freight import _freight
from freight.registry import GLOBAL, Entry, Registry
from freight.storage import files

if TYPE_CHECKING:
    from collections.abc import Sequence

    from typing_extensions import Buffer

    from freight._freight import PayloadInfo

__all__ = [
    "Freight",
    "dumps",
    "loads",
    "dumps_frames",
    "loads_frames",
    "dump",
    "load",
    "inspect",
    "verify",
    "register",
    "unregister",
]


class Freight:
    """A configured serializer with its own registry layered over the global one.

    Args:
        allow_pickle: default for :meth:`loads`; False refuses payloads that would run pickle.
        zero_copy: default for :meth:`loads`; True returns read-only views of the input.
        verify: default for :meth:`loads`; check frame checksums (None: unless zero_copy).
        checksum: write an xxh3-64 checksum of every frame's data in :meth:`dumps` and
            :meth:`dumps_frames` (default False: payloads in transit rely on their transport's
            own checks; the header is always checksummed, and compressed frames always carry
            theirs). :meth:`dump` and ``Store.save`` write them unless told ``checksum=False``:
            payloads at rest are checked. A call's ``checksum=`` overrides it.
        compression: default for :meth:`dumps`: None, ``"lz4"``, ``"zstd"``, ``("zstd", level)``,
            ``"auto"`` or ``("auto", link_bytes_per_second)`` (per frame from 1 MiB, lz4 only where
            what its samples compress to says compressing saves more time on the link, 1 GB/s
            unless given, than it takes by a fixed cost model: never from a clock, so the same
            value always gives the same bytes). A call's ``compression=`` overrides it
            (``"none"`` turns it off).
        key: signs every payload with HMAC-SHA256 (:meth:`dumps`) and requires a valid signature
            on :meth:`loads`; a list of keys is accepted on load (the first one signs), for
            rotation.
        max_size: largest raw frame :meth:`loads` accepts (default 16 GiB), checked before
            anything is allocated for it: a bound on decompression bombs and lying headers.
        allowed_tags: default for :meth:`loads`: None (any registered serializer), or the only
            serializer tags a payload may use (``"pickle"`` for pickle nodes), checked from the
            header before anything is decoded (``UnsafePayloadError`` naming the tag).
        strict_versions: default for :meth:`loads`: a payload written by another major version of
            a library it uses, or pickled by another Python minor version, raises
            ``ProducerVersionError`` instead of a ``FreightWarning``.
        registry: the registry to use; a new layer over the global registry by default.
    """

    def __init__(
        self,
        *,
        allow_pickle: bool = True,
        zero_copy: bool = False,
        verify: bool | None = None,
        checksum: bool = False,
        compression: Any = None,
        key: bytes | list[bytes] | None = None,
        max_size: int | None = None,
        allowed_tags: Iterable[str] | None = None,
        strict_versions: bool = False,
        registry: Registry | None = None,
    ):
        # What pickling needs to build an equivalent instance (see __reduce__).
        self._options: dict[str, Any] = {
            "allow_pickle": allow_pickle,
            "zero_copy": zero_copy,
            "verify": verify,
            "checksum": checksum,
            "compression": compression,
            "key": key,
            "max_size": max_size,
            "allowed_tags": None if allowed_tags is None else list(allowed_tags),
            "strict_versions": strict_versions,
        }
        self.registry = registry if registry is not None else Registry(parent=GLOBAL)
        self._codec = _freight.Codec(
            self.registry,
            allow_pickle=allow_pickle,
            zero_copy=zero_copy,
            verify=verify,
            checksum=checksum,
            compression=compression,
            key=key,
            max_size=max_size,
            allowed_tags=self._options["allowed_tags"],
            strict_versions=strict_versions,
        )
        # Bound methods of the Rust codec: no Python frame between the caller and the encoder.
        self.dumps = self._codec.dumps
        self.loads = self._codec.loads
        self.dumps_frames = self._codec.dumps_frames
        self.loads_frames = self._codec.loads_frames

    def register(
        self,
        serializer: Any,
        *,
        tag: str | None = None,
        types: Iterable[type] | type | None = None,
        safe: bool | None = None,
        replace: bool = False,
    ) -> Entry:
        """Registers ``serializer`` in this instance's layer (see :func:`freight.register`)."""
        return self.registry.register(serializer, tag=tag, types=types, safe=safe, replace=replace)

    def unregister(self, tag: str) -> None:
        self.registry.unregister(tag)

    def dump(self, obj: Any, file: str | os.PathLike[str] | IO[bytes], **options: Any) -> None:
        """Writes ``dumps(obj)`` to a path (atomically: temp file, then rename) or a binary file,
        with frame checksums unless ``checksum=False`` is passed (payloads at rest are checked)."""
        options.setdefault("checksum", True)
        files.write_payload(self.dumps(obj, **options), file)

    def load(self, file: str | os.PathLike[str] | IO[bytes], **options: Any) -> Any:
        """Reads a payload from a path or a binary file and decodes it.

        A path of 1 MiB or more is memory-mapped rather than read: read-only arrays (and, with
        ``zero_copy=True``, all arrays) are then views of the mapped file, and writable arrays are
        copied out of it once."""
        return self.loads(files.read_payload(file), **options)

    def __reduce__(self) -> str | tuple[Any, ...]:
        """Pickles as its options and its registry: a call that builds an equivalent instance.

        The global registry travels by reference (the unpickling side uses its own, with what
        its imports registered); this instance's own layer travels with its serializers, which
        must pickle themselves (by reference for module-level classes, as pickle does), else
        :class:`SerializationError` says to register them in a module the workers import.
        ``copy.copy`` shares the registry layer; ``copy.deepcopy`` copies it."""
        if self is _DEFAULT:
            return "_DEFAULT"  # the module-level instance: the unpickling side's own one
        return (_rebuild, (type(self), self._options, self.registry))

    def __repr__(self) -> str:
        return f"<freight.Freight registry={self.registry!r}>"


def _rebuild(cls: type[Freight], options: dict[str, Any], registry: Registry) -> Freight:
    """Unpickles a :class:`Freight` (see ``Freight.__reduce__``)."""
    return cls(registry=registry, **options)


_DEFAULT = Freight(registry=GLOBAL)

dumps = _DEFAULT.dumps
loads = _DEFAULT.loads
dumps_frames = _DEFAULT.dumps_frames
loads_frames = _DEFAULT.loads_frames
dump = _DEFAULT.dump
load = _DEFAULT.load


def register(
    serializer: Any,
    *,
    tag: str | None = None,
    types: Iterable[type] | type | None = None,
    safe: bool | None = None,
    replace: bool = False,
) -> Entry:
    """Registers a serializer globally.

    Args:
        serializer: an instance or class with ``serialize``/``deserialize`` (full protocol or
            Scaler's bytes shape) and optionally ``tag``, ``types``, ``safe``, ``supported``.
        tag: the stable id written into payloads; defaults to ``serializer.tag`` or its class path.
        types: the classes it handles; defaults to ``serializer.types``.
        safe: whether its decoding runs no arbitrary code (allowed under ``allow_pickle=False``).
        replace: replace an existing serializer with the same tag instead of raising.

    Raises:
        SerializationError: the tag is taken (and ``replace`` is False) or the serializer is malformed.
    """
    return GLOBAL.register(serializer, tag=tag, types=types, safe=safe, replace=replace)


def unregister(tag: str) -> None:
    """Removes the globally registered serializer with this tag (UnknownTagError if none)."""
    GLOBAL.unregister(tag)


def inspect(data: Buffer | Sequence[Buffer], key: bytes | list[bytes] | None = None) -> PayloadInfo:
    """Describes a payload without decoding it: format version, header flags, tags, producer
    versions, frames (codec, sizes, ratio, shuffle, checksums and whether they match), whether
    it is signed and, given ``key``, whether the signature matches (``signature_ok``), and the
    node tree's shape. The keys are those of :class:`freight._freight.PayloadInfo`.

    ``data`` is a buffer (``dumps`` output) or a list of buffers (``dumps_frames`` output).

    Raises:
        DeserializationError: the header cannot be parsed (not a freight payload, truncated).
    """
    return _freight.inspect(data, key)


def verify(data: Buffer | Sequence[Buffer], key: bytes | list[bytes] | None = None) -> None:
    """Checks a payload without decoding it (so without running anything it holds): the header,
    the frame table, every frame checksum, the node tree's structure and, given ``key``, the
    signature. Returns None when all of it holds.

    ``data`` is a buffer (``dumps`` output) or a list of buffers (``dumps_frames`` output).
    Frames written without a checksum (``checksum=False``) cannot be checked; :func:`inspect`
    shows which ones.

    Raises:
        IntegrityError: a checksum or the signature does not match (or a key was given and the
            payload is not signed).
        DeserializationError: the header, frame table or node tree is malformed.
    """
    _freight.verify(data, key)

