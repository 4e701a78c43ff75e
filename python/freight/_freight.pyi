"""Type stubs of the Rust extension ``freight._freight`` (see crates/freight-py)."""

from typing import Any, Final, Protocol, Sequence

from typing_extensions import Buffer

__version__: Final[str]
FORMAT_VERSION: Final[int]
FRAME_ALIGN: Final[int]
DEBUG_BUILD: Final[bool]

class _Registry(Protocol):
    _predicate_view: list[Any]
    def by_tag(self, tag: str) -> Any: ...

class Codec:
    """The configured encoder/decoder behind :class:`freight.Freight`."""

    def __init__(
        self,
        types: dict[type, Any],
        registry: _Registry,
        *,
        allow_pickle: bool = True,
        zero_copy: bool = False,
        verify: bool | None = None,
        checksum: bool = True,
    ) -> None: ...
    def dumps(self, obj: Any, /, *, checksum: bool | None = None) -> bytes:
        """Serializes ``obj`` into one ``bytes`` (each frame copied exactly once).

        Args:
            obj: any Python object.
            checksum: write per-frame xxh3-64 checksums (default: the codec's setting, True).

        Raises:
            SerializationError: nothing (native encoder, registry, pickle, cloudpickle) can encode it.
        """
    def dumps_frames(self, obj: Any, /, *, checksum: bool = False) -> list[memoryview]:
        """Serializes ``obj`` into ``[header, frame, ...]``; frames are read-only views of the
        original memory (no copy). No checksums unless asked (computing them reads every byte)."""
    def loads(
        self,
        data: Buffer,
        /,
        *,
        allow_pickle: bool | None = None,
        zero_copy: bool | None = None,
        verify: bool | None = None,
    ) -> Any:
        """Deserializes a payload from any buffer (bytes, bytearray, memoryview, mmap, ...).

        Args:
            allow_pickle: False refuses payloads that would run pickle (UnsafePayloadError).
            zero_copy: True returns read-only views of ``data`` for arrays (constant time).
            verify: check frame checksums; default True unless zero_copy.

        Raises:
            DeserializationError: truncated, corrupt or not a freight payload (or a subclass:
                IntegrityError, UnsafePayloadError, UnknownTagError, FormatVersionError,
                MissingDependencyError).
        """
    def loads_frames(
        self,
        frames: Sequence[Buffer],
        /,
        *,
        allow_pickle: bool | None = None,
        zero_copy: bool | None = None,
        verify: bool | None = None,
    ) -> Any:
        """Deserializes the output of ``dumps_frames`` (a header buffer, then one per frame)."""

class FrameBuffer:
    """Memory owned by something else (an input payload, an array), exposed as a buffer."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

class PickleSink: ...
class PickleSource: ...
class ChainedReduce: ...

def inspect(data: Buffer) -> dict[str, Any]:
    """Describes a payload (header, tags, producer versions, frames and checksums, tree shape)
    without decoding it."""

def inspect_frames(parts: list[Buffer]) -> dict[str, Any]:
    """``inspect`` for the output of ``dumps_frames``."""
