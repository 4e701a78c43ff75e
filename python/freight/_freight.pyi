"""Type stubs of the Rust extension ``freight._freight`` (see crates/freight-py)."""

from typing import Any, Final, Literal, Protocol, Sequence

from typing_extensions import Buffer

__version__: Final[str]
FORMAT_VERSION: Final[int]
FRAME_ALIGN: Final[int]
DEBUG_BUILD: Final[bool]

Compression = None | Literal["none", "lz4", "zstd", "auto"] | tuple[Literal["zstd", "lz4"], int]
Key = None | bytes | list[bytes] | tuple[bytes, ...]

def _envelope(tree: bytes, frames: list[Buffer] = ..., tags: list[str] = ..., needs_pickle: bool = False) -> bytes:
    """Wraps a raw node tree and frames in a valid envelope (for tests and fuzzers)."""

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
        compression: Compression = None,
        key: Key = None,
        max_size: int | None = None,
    ) -> None: ...
    def dumps(
        self, obj: Any, /, *, checksum: bool | None = None, compression: Compression = None, key: Key = None
    ) -> bytes:
        """Serializes ``obj`` into one ``bytes`` (each frame copied exactly once).

        Args:
            obj: any Python object.
            checksum: write per-frame xxh3-64 checksums (default: the codec's setting, True).
            compression: None (the codec's default), "none", "lz4", "zstd", ("zstd", level), "auto".
            key: sign with HMAC-SHA256 (default: the codec's first key, if any).

        Raises:
            SerializationError: nothing (native encoder, registry, pickle, cloudpickle) can encode it.
        """
    def dumps_frames(
        self, obj: Any, /, *, checksum: bool = False, compression: Compression = None, key: Key = None
    ) -> list[memoryview | bytes]:
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
        key: Key = None,
        max_size: int | None = None,
    ) -> Any:
        """Deserializes a payload from any buffer (bytes, bytearray, memoryview, mmap, ...).

        Args:
            allow_pickle: False refuses payloads that would run pickle (UnsafePayloadError).
            zero_copy: True returns read-only views of ``data`` for arrays (constant time).
            verify: check frame checksums; default True unless zero_copy.
            key: require a valid signature under this key (or any of a list of keys).
            max_size: largest decompressed frame accepted (default 16 GiB).

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
        key: Key = None,
        max_size: int | None = None,
    ) -> Any:
        """Deserializes the output of ``dumps_frames`` (a header buffer, then one per frame)."""

class FrameBuffer:
    """Memory owned by something else (an input payload, an array), exposed as a buffer."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

class PickleSink: ...
class PickleSource: ...
class ChainedReduce: ...

def inspect(data: Buffer, key: Key = None) -> dict[str, Any]:
    """Describes a payload (header, tags, producer versions, frames and checksums, tree shape)
    without decoding it."""

def inspect_frames(parts: list[Buffer], key: Key = None) -> dict[str, Any]:
    """``inspect`` for the output of ``dumps_frames``."""

def string_array_valid(offsets: Buffer, data: Buffer | None, wide: bool, start: int, length: int) -> bool:
    """Whether an Arrow string array's buffers hold ``length`` valid values from value ``start``:
    offsets (int32, or int64 when ``wide``) in bounds and non-decreasing, every value valid
    UTF-8. Used by freight's pyarrow serializer on arrays read from a payload."""
