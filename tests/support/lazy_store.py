"""What the lazy-read tests (tests/storage/test_lazy*.py) share: the keys, the block sizes of
the stored formats, a store on a test location, and ways to look at and damage stored bytes."""

from __future__ import annotations

import freight
from freight import _freight

KEY = b"k" * 32
OTHER_KEY = b"j" * 32
XXH3_BLOCK = 64 << 10  # the digest block of a checksummed frame over 1 MiB
SHA_BLOCK = 256 << 10  # the digest block of a signed payload's frames
RAW_BLOCK = 1 << 20  # the raw bytes of one compressed block


def lazy_store(store_location, signed: bool = False, compression: str = "none"):
    """A store on the location; frames stored raw unless told (the store's default is "auto")."""
    codec = freight.Freight(key=KEY) if signed else None
    return store_location.open(freight=codec, compression=compression)


def materialize(x):
    if isinstance(x, (freight.LazyValue, freight.LazyArray)):
        return x.load()
    return x


def layout(data: bytes) -> _freight.LazyHeader:
    """The stored object's header, parsed (where each frame lies, its digest block)."""
    return _freight.LazyHeader(bytes(data), len(data))


def raw(store, key: str) -> bytearray:
    return bytearray(memoryview(store.get_bytes(key)))


def flip(data: bytearray, offset: int) -> bytearray:
    data[offset] ^= 0x40
    return data


def header_read(lv) -> int:
    """What opening read: the first ranged read (the header, 64 KiB or the whole object)."""
    return lv._reader.source.bytes_read
