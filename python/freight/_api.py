"""The public entry points: :class:`Freight` (a configured codec with its own registry layer)
and the module-level functions, which use a default :class:`Freight` over the global registry."""

from __future__ import annotations

import datetime
import os
import sys
import warnings
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any

from freight import _freight
from freight.exceptions import OptionError, checks_options
from freight.registry import GLOBAL, Entry, Registry
from freight.storage import files

if TYPE_CHECKING:
    from collections.abc import Sequence

    from typing_extensions import Buffer

    from freight._freight import PayloadInfo


def _codec_options(method: str) -> list[str]:
    """The keyword options of ``Codec.<method>``, from the signature the extension declares."""
    signature = getattr(_freight.Codec, method).__text_signature__ or "()"
    names = (part.split("=")[0].strip() for part in signature.strip("()").split(","))
    return [n for n in names if n and n not in ("$self", "/", "*", "obj", "data", "frames") and not n.startswith("**")]


def codec_option_error(exc: TypeError, public: str, method: str, extra: Iterable[str] = ()) -> OptionError | None:
    """The :class:`OptionError` for a TypeError the codec raised about an unexpected keyword
    argument (its text names the internal ``Codec.<method>``), or None for any other TypeError.
    ``extra``: the options the caller (``public``) takes itself."""
    message = str(exc)
    marker = "() got an unexpected keyword argument '"
    # The codec names itself as the public function (an OptionError) or, from older builds, as
    # Codec.<method> (Python's TypeError).
    for prefix in (f"freight.{method}{marker}", f"Codec.{method}{marker}"):
        if message.startswith(prefix):
            name = message[len(prefix) :].split("'", 1)[0]
            return OptionError.unexpected(public, name, [*_codec_options(method), *extra])
    return None


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

    @checks_options("freight.Freight")
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
        # For stores: the dumps layout as parts over the objects' memory (NativeStore.put_parts).
        self._dumps_parts = self._codec.dumps_parts
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
        with frame checksums unless ``checksum=False`` is passed (payloads at rest are checked).

        Raises:
            PathError: the file cannot be written (PathNotFoundError: its folder is missing).
        """
        options.setdefault("checksum", True)
        try:
            data = self.dumps(obj, **options)
        except TypeError as exc:
            error = codec_option_error(exc, "freight.dump" if self is _DEFAULT else "Freight.dump", "dumps")
            if error is None:
                raise
            raise error from None
        files.write_payload(data, file)

    def load(self, file: str | os.PathLike[str] | IO[bytes], *, mmap: bool = False, **options: Any) -> Any:
        """Reads a payload from a path or a binary file and decodes it.

        Args:
            mmap: map the file rather than read it, whatever its size, and decode with
                ``zero_copy=True`` unless told otherwise: arrays come back as read-only views of
                the mapping (constant time), which lives as long as they do; as
                ``Store.load(key, mmap=True)`` does. Compressed frames cannot be viewed: they are
                decompressed into new memory, with a :class:`FreightWarning`.
            **options: for :meth:`loads` (``allow_pickle``, ``zero_copy``, ``verify``, ``key``, ...).

        Without ``mmap``, a path of 1 MiB or more is mapped too, but arrays are copied out of the
        mapping unless ``zero_copy=True``.

        Raises:
            PathNotFoundError: there is no file at the path (also a ``FileNotFoundError``).
            PathError: it cannot be read.
            DeserializationError: it is not a valid payload (or a subclass).
        """
        data = files.read_payload(file, mmap=mmap)
        if mmap:
            options.setdefault("zero_copy", True)
            compressed = files.compressed_frames(data)
            if compressed:
                fix = 'write it with dump(obj, path, compression="none")'
                warnings.warn(files.mapped_compressed_warning(str(file), compressed, fix), stacklevel=2)
        try:
            return self.loads(data, **options)
        except TypeError as exc:
            public = "freight.load" if self is _DEFAULT else "Freight.load"
            error = codec_option_error(exc, public, "loads", extra=["mmap"])
            if error is None:
                raise
            raise error from None

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


@checks_options("freight.register")
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


@checks_options("freight.unregister")
def unregister(tag: str) -> None:
    """Removes the globally registered serializer with this tag (UnknownTagError if none)."""
    GLOBAL.unregister(tag)


@checks_options("freight.inspect")
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


@checks_options("freight.verify")
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


def _warm_up() -> None:
    """Does at import what the first calls would otherwise do (issue 23: the first calls looked
    slow), where it is cheap: the walker's table of stdlib types (its lookup of
    ``zoneinfo.ZoneInfo`` imports zoneinfo, about 2 ms: most of a first ``dumps``), the probe of
    this thread's stack limits that nested values need (glibc reads /proc/self/maps: 0.2-0.3 ms
    with numpy loaded), and freight's numpy module when numpy is already imported (its first
    array, 0.35 ms). Other threads probe their own stack on their first nested value."""
    _DEFAULT.loads(_DEFAULT.dumps([[datetime.date(2000, 1, 1)]]))
    if "numpy" in sys.modules:
        import freight.serializers.numpy  # noqa: F401


_warm_up()
