"""Pieces of the wire format (docs/FORMAT.md) that tests use to build payloads by hand."""

from __future__ import annotations

import hashlib
import hmac

MAGIC = b"\x89FRT"
# Header flags (docs/FORMAT.md, "Flags").
FRAMES, META, SIGNED, PACKED, HEAD_SIGNED = 0x02, 0x04, 0x08, 0x10, 0x20
# Frame flags.
CHECKSUM, DIGESTS = 0x01, 0x08
SIG_LEN = 32


def uvarint(value: int) -> bytes:
    """An unsigned LEB128 varint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    value = shift = 0
    while True:
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7


def header_bounds(buf: bytes) -> tuple[int, int]:
    """(where the header body starts, where the header checksum ends): in a head-signed payload
    (format 1.2) the signature is the 32 bytes after that end, and covers every byte before it."""
    body_len, body_start = read_uvarint(buf, len(MAGIC) + 2)
    return body_start, body_start + body_len + 8


def header_mac(key: bytes, buf: bytes) -> bytes:
    """The header signature of a head-signed payload, computed here: HMAC-SHA256 of every byte
    up to the end of the header checksum."""
    return hmac.new(key, bytes(buf[: header_bounds(buf)[1]]), hashlib.sha256).digest()


def frame_start(end: int, stored_len: int) -> int:
    """Where a frame starts after ``end`` in a packed payload (16-byte aligned below 4096 bytes,
    64 from there)."""
    align = 16 if stored_len < 4096 else 64
    return -(-end // align) * align


def envelope(flags: int, body: bytes, frames: list[bytes], key: bytes | None = None) -> bytes:
    """A contiguous payload written here from its parts, as docs/FORMAT.md lays it out: preamble,
    header body, header checksum (xxh3-64), the header signature when ``key`` is given, then each
    frame after its zero padding."""
    head = MAGIC + bytes([1, flags]) + uvarint(len(body)) + body
    head += xxh3_64(head).to_bytes(8, "little")
    if key is not None:
        head += hmac.new(key, head, hashlib.sha256).digest()
    out = bytearray(head)
    for frame in frames:
        out += bytes(frame_start(len(out), len(frame)) - len(out))
        out += frame
    return bytes(out)


def frame_entry(frame: bytes, seal: str | None, block_log2: int = 18) -> bytes:
    """A frame table entry of a stored (uncompressed) frame sealed by ``seal``: None, "checksum"
    (xxh3-64 of the frame), "sha256" or "xxh3" (block digests of 2**block_log2 bytes)."""
    flags = {None: 0, "checksum": CHECKSUM, "sha256": DIGESTS, "xxh3": DIGESTS}[seal]
    out = bytes([flags, 0]) + uvarint(len(frame))
    if seal == "checksum":
        out += xxh3_64(frame).to_bytes(8, "little")
    elif seal is not None:
        block = 1 << block_log2
        blocks = [frame[i : i + block] for i in range(0, len(frame), block)]
        if seal == "sha256":
            digests = b"".join(hashlib.sha256(b).digest() for b in blocks)
        else:
            digests = b"".join(xxh3_64(b).to_bytes(8, "little") for b in blocks)
        out += bytes([1 if seal == "sha256" else 0, block_log2]) + digests
    return out


_M64 = (1 << 64) - 1
_P32_1, _P32_2, _P32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
_P64_1, _P64_2, _P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P64_4, _P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e"
)


def _r32(b: bytes, i: int) -> int:
    return int.from_bytes(b[i : i + 4], "little")


def _r64(b: bytes, i: int) -> int:
    return int.from_bytes(b[i : i + 8], "little")


def _fold(a: int, b: int) -> int:
    p = a * b
    return (p & _M64) ^ (p >> 64)


def _avalanche(h: int) -> int:
    h ^= h >> 37
    h = (h * 0x165667919E3779F9) & _M64
    return h ^ (h >> 32)


def _xxh64_avalanche(h: int) -> int:
    h ^= h >> 33
    h = (h * _P64_2) & _M64
    h ^= h >> 29
    h = (h * _P64_3) & _M64
    return h ^ (h >> 32)


def _rotl(v: int, r: int) -> int:
    return ((v << r) | (v >> (64 - r))) & _M64


def _mix16(data: bytes, i: int, s: int) -> int:
    return _fold(_r64(data, i) ^ _r64(_SECRET, s), _r64(data, i + 8) ^ _r64(_SECRET, s + 8))


def xxh3_64(data: bytes) -> int:
    """XXH3-64 with seed 0 and the default secret (pure Python; only for short test inputs)."""
    n = len(data)
    S = _SECRET
    if n == 0:
        return _xxh64_avalanche(_r64(S, 56) ^ _r64(S, 64))
    if n <= 3:
        combo = (data[0] << 16) | (data[n >> 1] << 24) | data[-1] | (n << 8)
        return _xxh64_avalanche(combo ^ (_r32(S, 0) ^ _r32(S, 4)))
    if n <= 8:
        keyed = ((_r32(data, n - 4) + (_r32(data, 0) << 32)) & _M64) ^ (_r64(S, 8) ^ _r64(S, 16))
        h = keyed ^ _rotl(keyed, 49) ^ _rotl(keyed, 24)
        h = (h * 0x9FB21C651E98DF25) & _M64
        h ^= ((h >> 35) + n) & _M64
        h = (h * 0x9FB21C651E98DF25) & _M64
        return h ^ (h >> 28)
    if n <= 16:
        lo = _r64(data, 0) ^ (_r64(S, 24) ^ _r64(S, 32))
        hi = _r64(data, n - 8) ^ (_r64(S, 40) ^ _r64(S, 48))
        swapped = int.from_bytes(lo.to_bytes(8, "little"), "big")
        return _avalanche((n + swapped + hi + _fold(lo, hi)) & _M64)
    if n <= 128:
        acc = (n * _P64_1) & _M64
        if n > 32:
            if n > 64:
                if n > 96:
                    acc += _mix16(data, 48, 96) + _mix16(data, n - 64, 112)
                acc += _mix16(data, 32, 64) + _mix16(data, n - 48, 80)
            acc += _mix16(data, 16, 32) + _mix16(data, n - 32, 48)
        acc += _mix16(data, 0, 0) + _mix16(data, n - 16, 16)
        return _avalanche(acc & _M64)
    if n <= 240:
        acc = (n * _P64_1) & _M64
        for i in range(8):
            acc += _mix16(data, 16 * i, 16 * i)
        acc = _avalanche(acc & _M64)
        for i in range(8, n // 16):
            acc += _mix16(data, 16 * i, 16 * (i - 8) + 3)
        acc += _mix16(data, n - 16, 136 - 17)
        return _avalanche(acc & _M64)
    # Long inputs.
    acc = [_P32_3, _P64_1, _P64_2, _P64_3, _P64_4, _P32_2, _P64_5, _P32_1]

    def accumulate(offset: int, secret_offset: int) -> None:
        for i in range(8):
            value = _r64(data, offset + 8 * i)
            key = value ^ _r64(S, secret_offset + 8 * i)
            acc[i ^ 1] = (acc[i ^ 1] + value) & _M64
            acc[i] = (acc[i] + (key & 0xFFFFFFFF) * (key >> 32)) & _M64

    stripes_per_block = (len(S) - 64) // 8
    block_len = 64 * stripes_per_block
    blocks = (n - 1) // block_len
    for b in range(blocks):
        for s in range(stripes_per_block):
            accumulate(b * block_len + 64 * s, 8 * s)
        for i in range(8):
            v = acc[i] ^ (acc[i] >> 47) ^ _r64(S, len(S) - 64 + 8 * i)
            acc[i] = (v * _P32_1) & _M64
    for s in range(((n - 1) - block_len * blocks) // 64):
        accumulate(blocks * block_len + 64 * s, 8 * s)
    accumulate(n - 64, len(S) - 64 - 7)
    result = (n * _P64_1) & _M64
    for i in range(4):
        result += _fold(acc[2 * i] ^ _r64(S, 11 + 16 * i), acc[2 * i + 1] ^ _r64(S, 11 + 16 * i + 8))
    return _avalanche(result & _M64)
