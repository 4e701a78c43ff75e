"""The public entry points: :class:`Freight` (a configured codec with its own registry layer)
and the module-level functions, which use a default :class:`Freight` over the global registry."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any, ClassVar

from freight import _files
from freight._freight import Codec
from freight._freight import inspect as _inspect_payload
from freight._freight import verify as _verify_payload
from freight._options import (  # the options' normal forms live with their declaration
    INSTANCE_NAMES,
    _normal_compression,
    _normal_key,
    _normal_max_size,
    _normal_tags,
    flag,
    tags_list,
)
from freight.exceptions import OptionError, checks_options
from freight.registry import GLOBAL, Entry, Registry

if TYPE_CHECKING:
    from collections.abc import Sequence

    from typing_extensions import Buffer

    from freight._freight import PayloadInfo


def _codec_options(method: str) -> list[str]:
    """The keyword options of ``Codec.<method>``, from the signature the extension declares."""
    signature = getattr(Codec, method).__text_signature__ or "()"
    names = (part.split("=")[0].strip() for part in signature.strip("()").split(","))
    return [n for n in names if n and n not in ("$self", "/", "*", "obj", "data", "frames") and not n.startswith("**")]


def codec_option_error(exc: TypeError, public: str, method: str, extra: Iterable[str] = ()) -> OptionError | None:
    """The :class:`OptionError` naming ``public`` (``freight.load``, ``Store.load``) for the one
    the codec raised about an option its ``method`` does not take (naming ``freight.loads`` or
    ``Freight.loads``), or None for any other TypeError. ``extra``: the options the caller
    (``public``) takes itself."""
    import re  # only on this error path

    match = re.match(rf"[\w.]*\b{method}\(\) got an unexpected keyword argument '([^']*)'", str(exc))
    if not isinstance(exc, OptionError) or match is None:
        return None
    return OptionError.unexpected(public, match.group(1), [*_codec_options(method), *extra])


__all__ = [
    "DEFAULT",
    "Freight",
    "FreightOptions",
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

_NAMES = INSTANCE_NAMES  # declared once, in freight._options


class FreightOptions:
    """The options of a :class:`Freight` (``Freight.options``): read-only, comparable, hashable,
    each in one spelling per behaviour, so equal options mean the same encoding and decoding.

    ``compression``: None (``"none"`` too), ``"lz4"``, ``"zstd"`` or ``("zstd", level)`` (a level
    other than 3), ``"auto"`` or ``("auto", bytes_per_second)`` (other than 1e9, as an int).
    ``key``: bytes, or a tuple of bytes (several keys; a list of one key is that key).
    ``max_size``: None for the default (16 GiB, also when given as such). ``allowed_tags``: None,
    or the tags as a sorted tuple without duplicates (their order means nothing).

    ``as_dict()`` gives them as keyword arguments (``Freight(**options.as_dict())``);
    ``replace(**changes)`` a copy with some changed. The repr never shows the key.
    (A slotted class rather than a frozen dataclass: ``dataclasses`` imports ``inspect``, which
    ``import freight`` does not.)"""

    __slots__ = _NAMES
    NAMES: ClassVar[tuple[str, ...]] = _NAMES

    allow_pickle: bool
    zero_copy: bool
    verify: bool | None
    checksum: bool
    compression: Any
    key: bytes | tuple[bytes, ...] | None
    max_size: int | None
    allowed_tags: tuple[str, ...] | None
    strict_versions: bool

    def __init__(
        self,
        allow_pickle: bool = True,
        zero_copy: bool = False,
        verify: bool | None = None,
        checksum: bool = False,
        compression: Any = None,
        key: Any = None,
        max_size: int | None = None,
        allowed_tags: Iterable[str] | None = None,
        strict_versions: bool = False,
    ) -> None:
        normal = {
            # None is the default, as the codec reads it (Freight(allow_pickle=None) allows pickle).
            "allow_pickle": flag("allow_pickle", allow_pickle, True),
            "zero_copy": flag("zero_copy", zero_copy, False),
            "verify": flag("verify", verify, None),
            "checksum": flag("checksum", checksum, False),
            "compression": _normal_compression(compression),
            "key": _normal_key(key),
            "max_size": _normal_max_size(max_size),
            "allowed_tags": _normal_tags(allowed_tags),
            "strict_versions": flag("strict_versions", strict_versions, False),
        }
        for name, value in normal.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"FreightOptions are read-only (use .replace({name}=...) or Freight.replace)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("FreightOptions are read-only")

    def as_dict(self) -> dict[str, Any]:
        """The options as keyword arguments of :class:`Freight` (a new dict)."""
        return {name: getattr(self, name) for name in _NAMES}

    def replace(self, **changes: Any) -> FreightOptions:
        """A copy with these options changed (normalised).

        Raises:
            OptionError: a name that is not an option.
        """
        for name in changes:
            if name not in _NAMES:
                raise OptionError.unexpected("FreightOptions.replace", name, _NAMES)
        return type(self)(**{**self.as_dict(), **changes})

    def changed(self) -> dict[str, Any]:
        """The options that differ from a plain ``Freight()``'s (a new dict)."""
        return {k: v for k, v in self.as_dict().items() if v != getattr(_PLAIN, k)}

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _NAMES)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self._values())

    def __repr__(self) -> str:
        parts = (f"{k}={'<set>' if k == 'key' and v is not None else repr(v)}" for k, v in self.as_dict().items())
        return f"FreightOptions({', '.join(parts)})"


_PLAIN = FreightOptions()


class Freight(Codec):
    """A configured serializer with its own registry layered over the global one.

    Args:
        allow_pickle: default for :meth:`loads`; False refuses payloads that would run pickle.
        zero_copy: default for :meth:`loads`; True returns read-only views of the input.
        verify: default for :meth:`loads`; check the frame checksums a payload carries (None:
            yes, zero-copy loads too; False: skip them, for constant-time views of trusted bytes).
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
            ``ProducerVersionError`` instead of a ``FreightWarning``. The crossings freight
            promises (numpy 1.26 and 2, pandas 2.2 and 3, pyarrow 15 and later, polars 1 and 2,
            both ways: ``freight._versions.PROMISED``) load silently either way.
        registry: the registry to use; a new layer over the global registry by default.
    """

    registry: Registry
    _opts: FreightOptions

    # Made in __new__ (the Rust codec is built there; Python calls no __init__ of its own): the
    # codec methods dumps, loads, dumps_frames and loads_frames are inherited from Codec as they
    # are, so a call has no Python frame and help() shows their own signatures and docstrings.
    @checks_options("freight.Freight")
    def __new__(
        cls,
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
    ) -> Freight:
        allowed_tags = tags_list(allowed_tags)  # an iterator is read once, for both below
        registry = registry if registry is not None else Registry(parent=GLOBAL)
        # The codec checks every option (and raises its errors) before they are normalised.
        given = {
            "allow_pickle": allow_pickle,
            "zero_copy": zero_copy,
            "verify": verify,
            "checksum": checksum,
            "compression": compression,
            "key": key,
            "max_size": max_size,
            "allowed_tags": allowed_tags,
            "strict_versions": strict_versions,
        }
        self = super().__new__(cls, registry, **given)
        self.registry = registry
        self._opts = FreightOptions(**given)
        return self

    def __init__(self, **options: Any) -> None:
        """Nothing to do: ``__new__`` made it. Here so that a subclass's ``__init__`` can call
        ``super().__init__(**options)`` as it did when Freight was made in ``__init__``."""

    @property
    def options(self) -> FreightOptions:
        """This instance's options (read-only, normalised: see :class:`FreightOptions`)."""
        return self._opts

    @property
    def _options(self) -> dict[str, Any]:
        # Deprecated: use ``options``. Kept for callers of the old private dict (a new dict).
        options = self._opts.as_dict()
        if options["allowed_tags"] is not None:
            options["allowed_tags"] = list(options["allowed_tags"])
        return options

    def replace(self, **changes: Any) -> Freight:
        """A new :class:`Freight` with these options changed, the others as here, over the same
        registry layer (``registry=`` to give another): ``f.replace(allow_pickle=False)``.
        This one itself when nothing changes, so ``freight.DEFAULT.replace(**options)`` is the
        default codec unless ``options`` say otherwise.

        Raises:
            OptionError: a name that is not an option of :class:`Freight`.
        """
        for name in changes:
            if name not in _NAMES and name != "registry":
                raise OptionError.unexpected("Freight.replace", name, [*_NAMES, "registry"])
        if not changes:
            return self
        registry = changes.pop("registry", self.registry)
        return type(self)(registry=registry, **{**self._opts.as_dict(), **changes})

    def __eq__(self, other: object) -> bool:
        """Equal: the same class, equal :attr:`options` and the same registry layer (the same
        object: layers are mutable, so two with the same serializers today may differ later)."""
        if type(other) is not type(self):
            return NotImplemented
        return self.registry is other.registry and self._opts == other._opts  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self._opts, id(self.registry)))

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
        _files.write_payload(data, file)

    def load(self, file: str | os.PathLike[str] | IO[bytes], *, mmap: bool = False, **options: Any) -> Any:
        """Reads a payload from a path or a binary file and decodes it.

        Args:
            mmap: map the file rather than read it, whatever its size, and decode with
                ``zero_copy=True`` unless told otherwise: arrays come back as read-only views of
                the mapping, which lives as long as they do. Frames that carry checksums (``dump``
                writes them) are read once to check them before anything is returned, so a
                damaged file raises :class:`IntegrityError`; ``verify=False`` skips that (constant
                time, for files you trust). As
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
        public = "freight.load" if self is _DEFAULT else "Freight.load"
        mmap = flag("mmap", mmap, False)  # "no" must not map
        data = _files.read_payload(file, mmap=mmap)
        if mmap:
            options.setdefault("zero_copy", True)
            compressed = _files.compressed_frames(data)
            if compressed:
                fix = 'write it with dump(obj, path, compression="none")'
                warnings.warn(_files.mapped_compressed_warning(str(file), compressed, fix), stacklevel=2)
        try:
            return self.loads(data, **options)
        except TypeError as exc:
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
        ``copy.copy`` shares the registry layer; ``copy.deepcopy`` copies it.

        The copy is equal to the original (``==``) when it has the same registry layer: over the
        global registry (which travels by reference) and after ``copy.copy``; a layer of its own
        comes back as a new layer, with the same serializers but changed independently."""
        if self is _DEFAULT:
            return "_DEFAULT"  # the module-level instance: the unpickling side's own one
        return (_rebuild, (type(self), self._opts.as_dict(), self.registry))

    def __repr__(self) -> str:
        changed = "".join(f" {k}={'<set>' if k == 'key' else repr(v)}" for k, v in self._opts.changed().items())
        return f"<freight.Freight{changed} registry={self.registry!r}>"


def _rebuild(cls: type[Freight], options: dict[str, Any], registry: Registry) -> Freight:
    """Unpickles a :class:`Freight` (see ``Freight.__reduce__``)."""
    return cls(registry=registry, **options)


_DEFAULT = Freight(registry=GLOBAL)
#: The Freight behind the module-level functions (``freight.dumps`` is ``DEFAULT.dumps``): default
#: options over the global registry. Integrations derive theirs with ``DEFAULT.replace(**options)``.
DEFAULT = _DEFAULT

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
    return _inspect_payload(data, key)


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
    _verify_payload(data, key)


def _import_numpy_helper() -> None:
    """Imports freight's numpy module when numpy is already imported, so that the first array
    does not pay that import (and the first calls import nothing). Nothing else is done at
    import (issue 32): the walker looks its stdlib types up once their modules are imported,
    and finds a thread's stack limits without reading /proc/self/maps.

    Nothing here is needed: ``import freight`` never fails because of it (issue 30). A numpy
    that cannot be imported, even one blocked with ``sys.modules["numpy"] = None`` (the usual
    way to test a missing dependency, which leaves the name in sys.modules), is left to the
    first call that meets an array."""
    if sys.modules.get("numpy") is not None:  # imported, and not blocked (None)
        try:
            import freight.serializers.numpy  # noqa: F401
        except Exception:  # noqa: BLE001, S110 - a half-imported or broken numpy: the first array says why
            pass


_import_numpy_helper()
