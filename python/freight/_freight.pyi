"""Type stubs of the Rust extension ``freight._freight`` (see crates/freight-py).

Checked against the compiled module by ``make lint`` (``python -m mypy.stubtest freight._freight``,
with ``tools/stubtest-allowlist.txt``).
"""

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TypeAlias, TypedDict, final, type_check_only

from typing_extensions import Buffer, NotRequired, Self, disjoint_base

__all__ = [
    "__version__",
    "FORMAT_VERSION",
    "FRAME_ALIGN",
    "DEBUG_BUILD",
    "Codec",
    "DispatchTables",
    "FrameBuffer",
    "NativeStore",
    "StoredBuffer",
    "PayloadParts",
    "ArrowMeta",
    "CArrays",
    "PickleSink",
    "PickleSource",
    "ChainedReduce",
    "inspect",
    "verify",
    "compressed_frames",
    "_envelope",
    "_huge_pages_ready",
    "buffer_span",
    "string_array_valid",
    "compressed_indices_error",
    "arrow_dumps",
    "arrow_loads",
    "LazyHeader",
    "header_length",
    "decompress_blocks",
    "frames_raw",
    "arrow_project",
]

__version__: Final[str]
FORMAT_VERSION: Final[int]
FRAME_ALIGN: Final[int]
DEBUG_BUILD: Final[bool]

_Compression = (
    None | Literal["none", "lz4", "zstd", "auto"] | tuple[Literal["zstd", "lz4"], int] | tuple[Literal["auto"], float]
)
_Key = None | bytes | list[bytes] | tuple[bytes, ...]
_Payload = Buffer | Sequence[Buffer]  # ``dumps`` output, or ``dumps_frames`` output

# --------------------------------------------------------------------------------------------
# What the Rust side reads from a registry (freight.registry.Registry and Entry satisfy these)
# --------------------------------------------------------------------------------------------

@type_check_only
class _Entry(Protocol):
    @property
    def tag(self) -> str: ...
    @property
    def safe(self) -> bool: ...
    @property
    def subclasses(self) -> bool: ...
    def encode(self, obj: Any, /) -> tuple[Any, list[Any]]: ...
    def decode(self, meta: Any, frames: list[memoryview], /) -> Any: ...
    def accepts(self, obj: Any, /) -> bool: ...

@type_check_only
class _Registry(Protocol):
    # All a Codec asks of its registry: the dispatch tables (encoding) and by_tag (decoding).
    def dispatch_tables(self) -> DispatchTables: ...
    def by_tag(self, tag: str, /) -> _Entry: ...

@final
class DispatchTables:
    """The dispatch tables of one registry layer (its parents merged in): what ``dumps`` looks
    serializers up in. A :class:`freight.Registry` owns one and replaces its contents whenever
    a registration changes."""

    def __new__(cls, pending: dict[str, str], load_library: Callable[[str], bool]) -> Self: ...
    def update(
        self,
        types: dict[type, _Entry],
        native: dict[type, _Entry],
        predicates: Iterable[_Entry],
        tags: dict[str, _Entry],
    ) -> None:
        """Replaces the contents: exact type -> entry over all layers, its part for natively
        encoded types, the entries that decide per object, in order, and tag -> entry over all
        layers (what decoding looks a payload's tags up in)."""
    def types(self) -> dict[type, _Entry]:
        """Exact type -> entry (a new dict)."""
    def predicates(self) -> list[_Entry]:
        """The predicate entries, in order (a new list)."""

# --------------------------------------------------------------------------------------------
# What inspect() returns
# --------------------------------------------------------------------------------------------

@type_check_only
class FrameInfo(TypedDict):
    """One frame of a payload, as :func:`inspect` describes it."""

    index: int
    offset: int | None  # where the frame starts in the payload; None for a dumps_frames list (and in Store.info)
    length: int  # raw (decompressed) length
    stored_length: int  # length as stored (compressed)
    codec: Literal["none", "lz4", "zstd"]
    shuffle: int | None  # byte-shuffle element size, None when not shuffled
    ratio: float  # stored_length / length (1.0 for an empty frame)
    block_checksum: bool  # checksummed per 1 MiB block rather than as a whole
    checksum: str | None  # the stored xxh3-64, 16 hex digits; None when none was written
    checksum_ok: bool | None  # whether the frame's bytes match it; None without a checksum (or when not read)
    digests: tuple[Literal["xxh3", "sha256"], int] | None  # block digests (format 1.2): kind, block size

@type_check_only
class TreeInfo(TypedDict):
    """The node tree of a payload, walked without building any object."""

    ok: bool  # whether the walk got through the tree
    length: int  # bytes
    nodes: NotRequired[int]  # present when ok
    max_depth: NotRequired[int]  # present when ok
    pickle_nodes: NotRequired[int]  # present when ok
    node_tags: NotRequired[dict[str, int]]  # node kind -> count; present when ok
    error: NotRequired[str]  # present when not ok: why the walk stopped

@type_check_only
class PayloadInfo(TypedDict):
    """What :func:`inspect` returns."""

    format_version: int
    flags: list[Literal["needs_pickle", "frames", "meta", "signed", "packed"]]  # the header flags that are set
    needs_pickle: bool
    signed: bool
    signature_ok: bool | None  # None when no key was given
    header_length: int
    total_length: int
    tags: list[str]  # serializer tags the payload uses
    producer: dict[str, str]  # library -> version, as the writer recorded them
    frames: list[FrameInfo]
    tree: TreeInfo

# --------------------------------------------------------------------------------------------
# Classes
# --------------------------------------------------------------------------------------------

@disjoint_base
class Codec:
    """The configured encoder and decoder: :class:`freight.Freight` is its Python subclass, so
    that ``Freight.dumps`` & co. are these methods themselves (no Python frame on the call path)."""

    def __new__(
        cls,
        registry: _Registry,
        *,
        allow_pickle: bool | None = None,  # None: True
        zero_copy: bool | None = None,  # None: False
        verify: bool | None = None,
        checksum: bool | None = None,  # None: False
        compression: _Compression = None,
        key: _Key = None,
        max_size: int | None = None,
        allowed_tags: Sequence[str] | None = None,
        strict_versions: bool | None = None,  # None: False
    ) -> Self: ...
    def dumps(
        self, obj: Any, /, *, checksum: bool | None = None, compression: _Compression = None, key: _Key = None
    ) -> bytes:
        """Serializes ``obj`` into one ``bytes`` (each frame copied exactly once, or compressed).

        Args:
            obj: any Python object.
            checksum: write per-frame xxh3-64 checksums (default: the codec's setting, False;
                compressed frames always carry one).
            compression: None (the codec's default), "none", "lz4", "zstd", ("zstd", level), "auto",
                ("auto", link bytes per second).
            key: sign with HMAC-SHA256 (default: the codec's first key, if any).

        Raises:
            SerializationError: nothing (native encoder, registry, pickle, cloudpickle) can encode
                it; the message names the entry that failed.
            OptionError: an option value of the wrong kind, or an option it does not take (the
                message names the closest one)."""
    def dumps_frames(
        self, obj: Any, /, *, checksum: bool | None = None, compression: _Compression = None, key: _Key = None
    ) -> list[memoryview | bytes]:
        """Serializes ``obj`` into ``[header, frame, ...]`` (and the signature when signed).

        Frames are read-only views of the original memory (no copy) unless compressed. Frame
        checksums as ``dumps`` writes them (the codec's setting, False by default: computing them
        reads every byte). Options and errors as ``dumps``."""
    def _dumps_parts(
        self, obj: Any, /, *, checksum: bool | None = None, compression: _Compression = None, key: _Key = None
    ) -> PayloadParts:
        """Encodes ``obj`` once in the ``dumps`` layout, as parts over the objects' memory, for
        ``NativeStore.put_parts`` (what ``Store.save`` writes). Options as ``dumps``."""
    def loads(
        self,
        data: Buffer,
        /,
        *,
        allow_pickle: bool | None = None,
        zero_copy: bool | None = None,
        verify: bool | None = None,
        key: _Key = None,
        max_size: int | None = None,
        allowed_tags: Sequence[str] | None = None,
        strict_versions: bool | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Deserializes a payload from any buffer (bytes, bytearray, memoryview, mmap, ...).

        Args:
            data: the output of ``dumps``.
            allow_pickle: False refuses payloads that would run pickle (UnsafePayloadError).
            zero_copy: True returns read-only views of ``data`` for arrays.
            verify: check the frame checksums a payload carries (default True, zero_copy too: each
                checksummed frame is read once, not copied); False skips them (constant time).
            key: require a valid signature under this key (or any of a list of keys).
            max_size: largest decompressed frame accepted (default 16 GiB).
            allowed_tags: the only serializer tags the payload may use ("pickle" for pickle nodes).
            strict_versions: another major version of a library (outside the promised crossings)
                raises ProducerVersionError instead of a FreightWarning.
            copy: True: nothing returned refers to ``data`` (every array and buffer is copied out),
                so a receive buffer may be reused or freed as soon as this returns. Contradicts
                ``zero_copy=True``.

        Each option left out takes the codec's setting.

        Raises:
            DeserializationError: truncated, corrupt or not a freight payload (or a subclass:
                IntegrityError, UnsafePayloadError, UnknownTagError, FormatVersionError,
                MissingDependencyError).
            OptionError: an option value of the wrong kind, or an option it does not take (the
                message names the closest one)."""
    def loads_frames(
        self,
        frames: Sequence[Buffer],
        /,
        *,
        allow_pickle: bool | None = None,
        zero_copy: bool | None = None,
        verify: bool | None = None,
        key: _Key = None,
        max_size: int | None = None,
        allowed_tags: Sequence[str] | None = None,
        strict_versions: bool | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Deserializes the output of ``dumps_frames`` (a header buffer, then one per frame).

        Options and errors as ``loads``."""

    def _loads_node(
        self,
        data: Buffer,
        node: tuple[int, int, int],
        memo: dict[int, Any],
        /,
        *,
        allow_pickle: bool | None = None,
        zero_copy: bool | None = None,
        verify: bool | None = None,
        key: _Key = None,
        max_size: int | None = None,
        allowed_tags: Sequence[str] | None = None,
        strict_versions: bool | None = None,
    ) -> Any:
        """Decodes one node of a payload (a lazy read's entry): `data` holds the payload's bytes
        where they lie, at least its header and the frames the node uses; `node` is (start, end,
        memo_base) in the tree; `memo` fills the slots the node refers to outside it. Only the
        frames the node uses are read and verified. Options as ``loads``."""

@final
class FrameBuffer:
    """Memory owned by something else (an input payload, an array), exposed as a buffer."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

@type_check_only
class StoreInfo(PayloadInfo):
    """What ``NativeStore.info`` reads from a stored value's header (a ranged read): the
    description :func:`inspect` gives (frames with ``offset`` and ``checksum_ok`` None: their
    bytes are not read; ``signature_ok`` None), and where the value is."""

    key: str
    size: int  # bytes stored (the same as total_length)
    modified: float  # seconds since the epoch
    etag: str | None  # the backend's version tag of the stored bytes, when it has one

@final
class NativeStore:
    """A store of named payloads on a local folder, in memory or in S3 (crates/freight-store);
    every call releases the GIL. ``freight.storage.Store`` wraps it."""

    def __new__(
        cls,
        url: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        allow_http: bool | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
    ) -> Self: ...
    @property
    def url(self) -> str: ...
    @property
    def backend(self) -> Literal["file", "memory", "s3"]: ...
    def put_parts(
        self,
        key: str,
        payload: PayloadParts,
        if_absent: bool = False,
        progress: Callable[[int, int], object] | None = None,
    ) -> None:
        """Writes a payload encoded by ``Codec.dumps_parts``, streamed from the objects' memory."""
    def put_bytes(self, key: str, parts: list[Any], if_absent: bool = False) -> None:
        """Writes the concatenation of ``parts`` as it is, atomically."""
    def get_range(self, key: str, start: int, end: int) -> bytes: ...
    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]], etag: str | None = None) -> list[bytes]:
        """Bytes of several ranges of one version of a value (`etag`, from `head`): one `bytes` per
        range; a value replaced since `head` is refused, never mixed (a lazy reader's frames)."""
    def get(self, key: str, progress: Callable[[int, int], object] | None = None) -> StoredBuffer: ...
    def map(self, key: str) -> StoredBuffer: ...
    def get_ranges_into(self, key: str, ranges: Sequence[tuple[int, int]], etag: str | None, buffer: Buffer) -> None:
        """Reads several ranges of one version of a value (as ``get_ranges``) into ``buffer``, a
        writable buffer of the value's length, each at its offset in the value."""
    def get_head(self, key: str, length: int) -> tuple[bytes, int, float, str | None]:
        """(first ``length`` bytes, size, modified, etag) of a value, from one ranged read."""
    def head(self, key: str) -> tuple[int, float, str | None]:
        """(size, modified, etag) of a stored object."""
    def exists(self, key: str) -> bool: ...
    def delete(self, key: str) -> None: ...
    def list(self, prefix: str = "") -> list[tuple[str, int, float, str | None]]:
        """(key, size, modified, etag) of every object whose key starts with ``prefix``, sorted."""
    def object_path(self, key: str) -> str:
        """The backend's name for ``key``: its percent-encoded object path under the store's prefix."""
    def local_path(self, key: str) -> Path | None:
        """The file of ``key`` in a local folder store; None on other backends."""
    def delete_prefix(self, prefix: str) -> int: ...
    def info(self, key: str) -> StoreInfo: ...

@final
class ArrowMeta:
    """An Arrow Ext node's metadata ``(schema, batches)`` read straight from a payload by the
    decoder, for serializers that declare ``arrow_meta = True``; ``arrow_loads`` takes it as it
    takes the tuple."""

    @property
    def batch_count(self) -> int:
        """How many arrays the stream holds (a record batch of no rows has none)."""

    @property
    def schema(self) -> bytes:
        """The stream field's IPC schema bytes: what the serializers key the pyarrow schema they
        imported once by (see ``CArrays``)."""

@final
class CArrays:
    """The rebuilt arrays as C arrays with no schema (``arrow_loads(..., "arrays")``), for an
    importer that already holds the schema (pyarrow's ``_import_from_c(address, schema)``). The
    addresses hold while this object lives; arrays not imported are released with it."""

    def addresses(self) -> list[int]:
        """The address of each C array, in the stream's order."""

    def __len__(self) -> int: ...

@final
class PayloadParts:
    """An object encoded in the ``dumps`` layout as parts over its memory (header, padding,
    frames, signature), never assembled in one buffer: what a store streams."""

    @property
    def nbytes(self) -> int: ...

@final
class StoredBuffer:
    """A stored value's bytes (read, or a read-only memory map), as a read-only buffer."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    @property
    def mapped(self) -> bool: ...

@final
class PickleSink:
    """The pickler side of the pickle bridge (see freight/_pickle.py); made by the codec."""

    def begin(self, cloud: bool) -> None: ...
    @property
    def needs_persistent_id(self) -> bool: ...
    def persistent_id(self, obj: Any) -> int | None: ...
    def reduce(self, obj: Any) -> Any: ...
    def buffer_callback(self, buffer: Any) -> bool: ...
    def write(self, data: Any) -> int: ...
    def chain(self, fallback: Any, reducers: dict[Any, Any]) -> ChainedReduce: ...

@final
class ChainedReduce:
    """``PickleSink.reduce``, falling back to another ``reducer_override``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def close(self) -> None: ...

@final
class PickleSource:
    """The unpickler side of the pickle bridge: ``persistent_load`` of freight externals."""

    def persistent_load(self, pid: Any) -> Any: ...

# --------------------------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------------------------

# Built with the `testing` cargo feature only (make build turns it on).
def _envelope(
    tree: bytes,
    frames: list[Buffer] = ...,
    tags: list[str] = ...,
    needs_pickle: bool = False,
    versions: list[tuple[str, str]] = ...,
) -> bytes:
    """Wraps a raw node tree and frames in a valid envelope (for tests and fuzzers)."""

# Built with the `testing` cargo feature only.
def _huge_pages_ready(len: int) -> bool:
    """Whether a decode copying ``len`` bytes keeps huge pages now (the kernel has free ones)."""

def inspect(data: _Payload, key: _Key = None) -> PayloadInfo:
    """Describes a payload (header, tags, producer versions, frames and checksums, tree shape)
    without decoding it. ``data`` is ``dumps`` output or a ``dumps_frames`` list."""

def verify(data: _Payload, key: _Key = None) -> None:
    """Checks a payload without decoding it: header, frame table, every frame checksum, the
    tree's structure and, given ``key``, the signature. Raises IntegrityError or
    DeserializationError naming the problem."""

def compressed_frames(data: Buffer) -> int | None:
    """How many frames of a ``dumps`` payload are compressed, from its header alone (no frame is
    read): None when the header cannot be read. Behind the ``mmap=True`` warning."""

def buffer_span(obj: Buffer) -> tuple[int, int]:
    """``(address, nbytes)`` of a C-contiguous buffer (BufferError otherwise): where a frame lies,
    for the shared-memory integrations."""

def string_array_valid(offsets: Buffer, data: Buffer | None, wide: bool, start: int, length: int) -> bool:
    """Whether an Arrow string array's buffers hold ``length`` valid values from value ``start``:
    offsets (int32, or int64 when ``wide``) in bounds and non-decreasing, every value valid
    UTF-8. Used by freight's pyarrow serializer on arrays read from a payload."""

def arrow_dumps(obj: Any) -> tuple[tuple[bytes, list[Any]], list[FrameBuffer]]:
    """``(meta, frames)`` of an object exporting ``__arrow_c_stream__`` or ``__arrow_c_array__``
    (pyarrow, polars, ...): ``meta`` is ``(schema, batches)``, the Arrow IPC bytes of a schema of
    the stream's one field and a node ``(length, offset, validity, buffers, children)`` per array,
    with frame indices; ``frames`` view the arrays' buffers (no copy). The walker writes the same
    metadata itself for serializers with ``arrow_node``; this is what their ``serialize`` returns.
    Raises SerializationError for data arrow-rs cannot read (the serializers then use another
    form), and passes on what the object's export raises."""

def arrow_loads(meta: Any, frames: Sequence[Buffer], form: str) -> Any:
    """The arrays of ``meta`` (as ``arrow_dumps`` writes it, or an ``ArrowMeta``) rebuilt over ``frames`` and validated
    in full, as an ``arrow_array_stream`` capsule (``form="stream"``), a pair of
    ``arrow_schema`` and ``arrow_array`` capsules of its one array (``form="array"``), or a
    ``CArrays`` of every array without the schema (``form="arrays"``). Raises
    DeserializationError for anything malformed."""

def compressed_indices_error(indptr: Buffer, indices: Buffer, wide: bool, major: int, minor: int) -> str | None:
    """None when ``indptr``/``indices`` (native int32, or int64 when ``wide``) form a compressed
    sparse structure (CSR/CSC/BSR) every kernel can trust for ``major`` rows and ``minor``
    columns (``indptr`` starts at 0, never decreases, ends at ``len(indices)``; every index in
    ``0..minor``); else why not. Used by freight's scipy.sparse serializer."""

def header_length(prefix: Buffer) -> int | None:
    """Bytes the header of the payload starting with `prefix` takes (preamble, header, checksum and
    signature when head-signed); None when `prefix` is too short to tell."""

def decompress_blocks(codec: int, stored: Buffer, raw_len: int, shuffle: int | None = None) -> bytes:
    """Decompresses `stored`, a compressed frame's layout (block size, block count, block lengths,
    blocks) holding some of a frame's blocks, into `raw_len` bytes: a lazy read's slice of a
    compressed frame decompresses only its blocks. Every size is checked as in a whole load."""

def arrow_project(schema: bytes, names: list[str]) -> tuple[list[str], bytes | None]:
    """(the columns' names, the IPC schema bytes of columns ``names`` in that order, or None when
    one of them is not a column) of a stored table's IPC schema bytes (lazy column reads)."""

def frames_raw(data: Buffer, indices: list[int], keys: _Key = None, verify: bool = True) -> list[bytes | memoryview]:
    """The raw bytes of frames `indices` of the payload in `data` (its bytes where they lie: at
    least the header and those frames), each checked against its checksum or digests (always
    when `keys` are given and the payload is head-signed; the header's signature is checked
    first): a read-only view of `data` for an uncompressed frame (a mapped file is not copied),
    new memory for a compressed one. The payload is opened once and the checks run on all cores.
    A lazy read of some columns of a table reads only their frames."""

_Span: TypeAlias = tuple[int, int, int, list[int], list[int], int, str, bool]

@final
class LazyHeader:
    """A stored payload's header, read alone."""

    def __new__(cls, head: Buffer, size: int, keys: _Key = None) -> LazyHeader: ...
    @property
    def frames(self) -> list[tuple[int, int]]:
        """(start, stop) of each frame's stored bytes in the object."""
    @property
    def length(self) -> int:
        """Length of the header (where the first frame's padding starts)."""
    @property
    def head(self) -> bytes:
        """The header's bytes (the start of a buffer that decodes entries)."""
    @property
    def tree_length(self) -> int:
        """Length of the node tree (the root node's span is `0..tree_length`)."""
    @property
    def signed(self) -> bool: ...
    @property
    def needs_pickle(self) -> bool: ...
    @property
    def tags(self) -> list[str]:
        """The serializer tags the payload uses (Ext nodes refer to them by index)."""
    def frame(self, index: int) -> dict[str, Any]:
        """Frame `index`'s table entry: codec, lengths, shuffle, digest block size (None without
        block digests)."""
    def root(self) -> tuple[int, str]:
        """The tree offset and tag name of the root node (past any memo marker)."""
    def container(self, at: int) -> tuple[str, list[tuple[_Span | None, _Span]], list[tuple[int, int]]] | None:
        """The entries of the dict, list or tuple at tree offset `at`: (tag name, [(key span or
        None, value span)], slot spans), each span (start, end, memo_base, frames, outside
        slots, node offset, node tag name, whether it holds pickler-session islands); None when
        the node there is another kind."""
    def span(self, start: int, end: int, memo_base: int) -> _Span:
        """The span of the node at `start..end` whose memo slots start at `memo_base` (a memo slot's
        node, from `container`'s slot spans), as `container` gives entries."""
    def array(self, at: int, memo_base: int) -> tuple[_Span, int, list[int], int]:
        """The NdArray node at tree offset `at` (memo slots before its dtype node: `memo_base`):
        (dtype node span, flags, shape, frame index)."""
    def ext(self, at: int, memo_base: int) -> tuple[str, _Span, list[int]]:
        """The Ext node (a registered serializer's value) at tree offset `at` (memo slots before
        its meta node: `memo_base`): (tag, meta node span, frame indices)."""
    def check_blocks(self, index: int, first: int, data: Buffer) -> None:
        """Checks `data`, frame `index`'s stored bytes from block `first` on, against its block
        digests (raises `IntegrityError` naming the block)."""
