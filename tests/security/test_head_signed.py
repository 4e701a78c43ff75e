"""Format 1.2's header signature and block digests (docs/FORMAT.md, "Signatures" and "Block
digests"): the HMAC after the header checksum is checked before the header is parsed; each frame
is authenticated by the SHA-256 digests of its 256 KiB blocks, which the signed header holds, so
a changed block is refused by number, whether or not verify was asked for; a header whose frames
lack those digests, or whose signature flags were cleared, is refused; payloads signed in the
1.0 layout still load. The payloads built by hand below follow the format description
(tests/support/wire.py), and the first test checks that they are the bytes freight writes."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import freight
from freight import _freight
from support.wire import (
    FRAMES,
    HEAD_SIGNED,
    PACKED,
    SIG_LEN,
    SIGNED,
    envelope,
    frame_entry,
    header_bounds,
    header_mac,
    read_uvarint,
    uvarint,
    xxh3_64,
)

KEY = b"head-signing-test-key-0123456789"
WRONG_KEY = b"not-the-key-0123456789abcdef-012"
SHA_BLOCK = 1 << 18
XXH3_BLOCK = 1 << 16
PREAMBLE = 5  # magic and version: checked before the signature (they say what the bytes are)

SIDE_EFFECTS: list[str] = []


def record_side_effect(tag: str) -> str:
    SIDE_EFFECTS.append(tag)
    return tag


class Sneaky:
    def __reduce__(self):
        return (record_side_effect, ("decoded",))


@pytest.fixture(autouse=True)
def _clear_side_effects():
    SIDE_EFFECTS.clear()
    yield
    SIDE_EFFECTS.clear()


def _bytes_value(n: int) -> bytes:
    return bytes(range(256)) * (n // 256) + b"z" * (n % 256)


def _tree(blob: bytes) -> bytes:
    """The node tree of a payload: the end of its header body, before the header checksum."""
    end = header_bounds(blob)[1] - 8
    return blob[end - freight.inspect(blob)["tree"]["length"] : end]


def _frame_bytes(blob: bytes, i: int) -> bytes:
    f = freight.inspect(blob)["frames"][i]
    return blob[f["offset"] : f["offset"] + f["stored_length"]]


def _parts(blob: bytes) -> list[bytes]:
    """The list layout of a contiguous payload: header (with its signature), then each frame."""
    info = freight.inspect(blob)
    return [blob[: info["header_length"]]] + [_frame_bytes(blob, i) for i in range(len(info["frames"]))]


# ---------------------------------------------------------------------------------------------
# The layout


@pytest.mark.parametrize("size", [70_000, 600_000, 3 * SHA_BLOCK])
def test_a_signed_payload_is_the_bytes_the_format_describes(size):
    """One frame of a bytes value, written here from docs/FORMAT.md: flags SIGNED and
    HEAD_SIGNED, the frame's entry with flag DIGESTS, kind 1 (SHA-256), log2 block size 18 and
    one digest per 256 KiB block, the header checksum, the HMAC of every byte before it, then the
    frame: no trailer."""
    data = _bytes_value(size)
    blob = freight.dumps(data, key=KEY)
    body = uvarint(1) + frame_entry(data, "sha256") + _tree(blob)
    assert envelope(FRAMES | PACKED | SIGNED | HEAD_SIGNED, body, [data], KEY) == blob
    # dumps_frames: the same header buffer, ending with the signature; no signature buffer.
    parts = [bytes(p) for p in freight.dumps_frames(data, key=KEY)]
    assert parts == _parts(blob)
    assert parts[0][-SIG_LEN:] == header_mac(KEY, blob)


def test_the_header_grows_by_32_bytes_per_256_kib_of_frames():
    """Signing adds the signature, and per frame 2 bytes (digest kind and block size) and one
    32-byte SHA-256 digest per started 256 KiB block, in place of the frame's checksum; the frames
    themselves are the same bytes."""

    def header(value, **kw):
        blob = freight.dumps(value, **kw)
        return freight.inspect(blob)["header_length"], read_uvarint(blob, 6)[0], blob

    for n in (1, SHA_BLOCK - 1, SHA_BLOCK, SHA_BLOCK + 1, 5 * SHA_BLOCK, 5 * SHA_BLOCK + 7):
        value = {"a": np.zeros(n, dtype=np.uint8), "b": np.arange(n % 4096 + 4096, dtype=np.uint8)}
        signed_len, signed_body, signed = header(value, key=KEY)
        plain_len, plain_body, plain = header(value)  # no checksums: unsealed frames
        blocks = -(-n // SHA_BLOCK) + 1
        assert signed_body - plain_body == 2 * 2 + 32 * blocks, n
        assert signed_len - plain_len == signed_body - plain_body + SIG_LEN + (
            len(uvarint(signed_body)) - len(uvarint(plain_body))
        ), n
        assert [_frame_bytes(signed, i) for i in range(2)] == [_frame_bytes(plain, i) for i in range(2)]


# ---------------------------------------------------------------------------------------------
# The header signature: checked before the header is parsed


@pytest.mark.parametrize("layout", ["single", "frames"])
def test_any_changed_header_byte_is_refused_before_parsing(layout):
    """Every header byte after magic and version, the signature's included: an IntegrityError
    with the key (the signature, checked first); and nothing decodes (the tree runs pickle)."""
    blob = freight.dumps({"x": Sneaky(), "arr": np.arange(50_000)}, key=KEY)
    header_len = freight.inspect(blob)["header_length"]
    parts = _parts(blob)
    load = freight.loads if layout == "single" else freight.loads_frames
    failures = []
    for pos in range(PREAMBLE, header_len):
        for flip in (0x01, 0x80):
            bad = bytearray(blob)
            bad[pos] ^= flip
            data = bytes(bad) if layout == "single" else [bytes(bad[:header_len]), *parts[1:]]
            for kwargs in ({"key": KEY}, {"key": [WRONG_KEY, KEY], "verify": False}):
                try:
                    load(data, **kwargs)
                except freight.IntegrityError:
                    continue
                except freight.DeserializationError as exc:
                    failures.append(f"byte {pos} ^ {flip:#x}: {type(exc).__name__}: {exc}")
                else:
                    failures.append(f"byte {pos} ^ {flip:#x}: accepted")
    assert not failures, "\n".join(failures[:10])
    assert SIDE_EFFECTS == []


def test_without_a_key_the_header_checksum_still_guards_the_header():
    """Without a key the signature is not checked (as ever): a changed header byte before it is
    refused by the header checksum (or by the flags check that precedes it), a changed signature
    byte goes unnoticed, and inspect says the signature does not match given the key."""
    blob = freight.dumps({"arr": np.arange(50_000)}, key=KEY)
    _, end = header_bounds(blob)
    for pos in range(PREAMBLE, end):
        bad = bytearray(blob)
        bad[pos] ^= 0x01
        with pytest.raises(freight.DeserializationError):
            freight.loads(bytes(bad))
    for pos in (end, end + SIG_LEN - 1):
        bad = bytearray(blob)
        bad[pos] ^= 0x01
        np.testing.assert_array_equal(freight.loads(bytes(bad))["arr"], np.arange(50_000))
        assert freight.inspect(bytes(bad), key=KEY)["signature_ok"] is False


def test_a_header_resealed_without_the_key_is_refused_by_the_signature():
    """An attacker who changes a frame and its digest in the header and recomputes the header
    checksum (all of which needs no key) is stopped by the signature alone."""
    value = {"arr": np.arange(20_000)}
    blob = freight.dumps(value, key=KEY)
    frame = freight.inspect(blob)["frames"][0]
    body_start, end = header_bounds(blob)
    forged_frame = bytes(frame["stored_length"])  # zeros
    old = _frame_bytes(blob, 0)
    assert len(old) < SHA_BLOCK  # one block: one digest to swap
    at = blob.index(hashlib.sha256(old).digest(), body_start, end)
    forged = bytearray(blob)
    forged[at : at + 32] = hashlib.sha256(forged_frame).digest()
    forged[end - 8 : end] = xxh3_64(bytes(forged[: end - 8])).to_bytes(8, "little")
    forged[frame["offset"] : frame["offset"] + len(forged_frame)] = forged_frame
    forged = bytes(forged)
    # Without a key nothing is checked but the checksum and the digests, which now agree.
    assert not freight.loads(forged)["arr"].any()
    for kwargs in ({}, {"verify": False}, {"zero_copy": True}):
        with pytest.raises(freight.IntegrityError, match="signature"):
            freight.loads(forged, key=KEY, **kwargs)
        with pytest.raises(freight.IntegrityError, match="signature"):
            freight.loads_frames(_parts(forged), key=KEY, **kwargs)
    with pytest.raises(freight.IntegrityError, match="signature"):
        _freight.verify(forged, key=KEY)


# ---------------------------------------------------------------------------------------------
# Block digests: a changed block is refused by number


def _changed_blocks(blob: bytes, block: int):
    """(block index, payload with one byte changed in that block of frame 0), for each block."""
    frame = freight.inspect(blob)["frames"][0]
    n = -(-frame["stored_length"] // block)
    for b in range(n):
        pos = frame["offset"] + min(b * block + 7 * b + 1, frame["stored_length"] - 1)
        bad = bytearray(blob)
        bad[pos] ^= 0x40
        yield b, bytes(bad)


@pytest.mark.parametrize("compression", [None, "zstd"], ids=["stored", "zstd"])
def test_a_changed_block_of_a_signed_frame_is_refused_by_number(compression):
    rng = np.random.default_rng(3)
    # Random bytes then zeros: zstd keeps more than 3 blocks of 256 KiB.
    value = {"arr": np.concatenate([rng.integers(0, 256, 900_000, dtype=np.uint8), np.zeros(100_000, np.uint8)])}
    blob = freight.dumps(value, key=KEY, compression=compression)
    frame = freight.inspect(blob)["frames"][0]
    assert frame["digests"] == ("sha256", SHA_BLOCK) and frame["stored_length"] > 3 * SHA_BLOCK
    assert (frame["codec"] == "zstd") is (compression == "zstd")
    for b, bad in _changed_blocks(blob, SHA_BLOCK):
        message = f"block {b} of frame 0 does not match its digest in the header.*tampered with"
        # With the key, every use is checked against the signed digests, verify or not.
        for kwargs in ({}, {"verify": False}, {"zero_copy": True}, {"verify": False, "zero_copy": True}):
            with pytest.raises(freight.IntegrityError, match=message):
                freight.loads(bad, key=KEY, **kwargs)
            with pytest.raises(freight.IntegrityError, match=message):
                freight.loads_frames(_parts(bad), key=KEY, **kwargs)
        with pytest.raises(freight.IntegrityError, match=message):
            _freight.verify(bad, key=KEY)
        with pytest.raises(freight.IntegrityError, match=message):
            _freight.verify(_parts(bad))  # verify checks every frame, key or not
        assert freight.inspect(bad, key=KEY)["signature_ok"] is False
        assert freight.inspect(bad)["frames"][0]["checksum_ok"] is False


@pytest.mark.parametrize("compression", [None, "zstd"], ids=["stored", "zstd"])
def test_a_changed_block_of_a_checksummed_frame_is_refused_by_number(compression):
    """Unsigned, checksummed: a frame over 1 MiB carries xxh3 digests of 64 KiB blocks, and a
    changed block is refused by number (without "tampered": xxh3 guards against damage only);
    verify=False is the caller's opt-out, as for checksums."""
    rng = np.random.default_rng(4)
    arr = np.concatenate([rng.integers(0, 256, 1_200_000, dtype=np.uint8), np.zeros(100_000, np.uint8)])
    blob = freight.dumps({"arr": arr}, checksum=True, compression=compression)
    frame = freight.inspect(blob)["frames"][0]
    assert frame["digests"] == ("xxh3", XXH3_BLOCK) and frame["checksum"] is None
    assert frame["stored_length"] > 1 << 20
    for b, bad in list(_changed_blocks(blob, XXH3_BLOCK))[::3]:
        message = f"^block {b} of frame 0 does not match its digest in the header: [^(]*$"
        with pytest.raises(freight.IntegrityError, match=message):
            freight.loads(bad)
        with pytest.raises(freight.IntegrityError, match=message):
            freight.loads_frames(_parts(bad))
        with pytest.raises(freight.IntegrityError, match=message):
            _freight.verify(bad)
        if compression is None:
            changed = freight.loads(bad, verify=False)["arr"]
            assert (changed != arr).sum() == 1


# ---------------------------------------------------------------------------------------------
# Headers that a signing writer never writes


@pytest.mark.parametrize("seal", [None, "checksum", "xxh3"], ids=["unsealed", "checksum", "xxh3-digests"])
def test_a_head_signed_frame_without_sha256_digests_is_refused(seal):
    """A head-signed payload whose frame is sealed otherwise (or not at all), with a valid header
    checksum and a valid signature (built here with the key): its frame would be authenticated
    by nothing, so it is refused at parse, with the key or without."""
    data = _bytes_value(70_000)
    blob = freight.dumps(data, key=KEY)
    flags = FRAMES | PACKED | SIGNED | HEAD_SIGNED
    good = envelope(flags, uvarint(1) + frame_entry(data, "sha256") + _tree(blob), [data], KEY)
    assert good == blob  # the builder writes what freight writes
    assert freight.loads(good, key=KEY) == data
    bad = envelope(flags, uvarint(1) + frame_entry(data, seal, block_log2=16) + _tree(blob), [data], KEY)
    assert header_mac(KEY, bad) == bad[header_bounds(bad)[1] :][:SIG_LEN]  # signed all right
    for kwargs in ({"key": KEY}, {"key": KEY, "verify": False}, {}):
        with pytest.raises(freight.DeserializationError, match="no SHA-256 digests"):
            freight.loads(bad, **kwargs)
        with pytest.raises(freight.DeserializationError, match="no SHA-256 digests"):
            freight.loads_frames(_parts_of(bad), **kwargs)
    with pytest.raises(freight.DeserializationError, match="no SHA-256 digests"):
        freight.inspect(bad)
    # The same frame table unsigned is a valid payload.
    unsigned = envelope(FRAMES | PACKED, uvarint(1) + frame_entry(data, seal, block_log2=16) + _tree(blob), [data])
    assert freight.loads(unsigned) == data


def _parts_of(blob: bytes, frame_len: int = 70_000) -> list[bytes]:
    """The list layout of a one-frame payload that freight refuses to inspect: the header (with
    its signature when head-signed), then the frame, which ends the payload."""
    header_end = header_bounds(blob)[1] + (SIG_LEN if blob[5] & HEAD_SIGNED else 0)
    return [blob[:header_end], blob[-frame_len:]]


def test_head_signed_without_signed_is_refused():
    data = _bytes_value(70_000)
    blob = freight.dumps(data, key=KEY)
    bad = envelope(FRAMES | PACKED | HEAD_SIGNED, uvarint(1) + frame_entry(data, "sha256") + _tree(blob), [data], KEY)
    for kwargs in ({"key": KEY}, {}):
        with pytest.raises(freight.DeserializationError):
            freight.loads(bad, **kwargs)


def test_a_stripped_signature_is_refused_with_a_key():
    """The signature flags cleared, the signature dropped and the header checksum recomputed
    (no key needed): a valid unsigned payload, which a reader given a key refuses; nor does the
    signature serve as a 1.0 trailer, or the digests without the flag HEAD_SIGNED."""
    value = {"x": Sneaky(), "arr": np.arange(50_000)}
    blob = freight.dumps(value, key=KEY)
    body_start, end = header_bounds(blob)
    body = blob[body_start : end - 8]
    frames = [_frame_bytes(blob, 0)]
    signature = blob[end : end + SIG_LEN]
    flags = blob[5]
    stripped = envelope(flags & ~(SIGNED | HEAD_SIGNED), body, frames)
    assert freight.inspect(stripped)["signed"] is False
    assert freight.loads(stripped, allow_pickle=True)["arr"].sum() == np.arange(50_000).sum()
    SIDE_EFFECTS.clear()
    as_trailer = envelope(flags & ~HEAD_SIGNED, body, frames) + signature  # the 1.0 layout
    resigned_old_way = envelope(flags & ~HEAD_SIGNED, body, frames)
    cases = {
        "stripped": (stripped, "not signed"),
        "signature as a 1.0 trailer": (as_trailer, "signature"),
        "head_signed cleared, no signature": (resigned_old_way, "signature"),
    }
    for name, (bad, match) in cases.items():
        for kwargs in ({}, {"verify": False}):
            with pytest.raises(freight.IntegrityError, match=match):
                freight.loads(bad, key=KEY, **kwargs)
                pytest.fail(name)
        with pytest.raises(freight.IntegrityError, match=match):
            _freight.verify(bad, key=KEY)
        try:
            assert freight.inspect(bad, key=KEY)["signature_ok"] is False, name
        except freight.DeserializationError:
            pass  # not even readable as a 1.0 payload (its last frame bytes taken for a trailer)
    # The list layout: header stripped of its flags and signature.
    with pytest.raises(freight.IntegrityError, match="not signed"):
        freight.loads_frames(_parts(stripped), key=KEY)
    assert SIDE_EFFECTS == []


# ---------------------------------------------------------------------------------------------
# Signatures of format 1.0


def test_payloads_signed_in_the_1_0_layout_still_load():
    """tests/golden/v1.1-signed: the 1.0 trailer over every byte; loaded whole with the key (the
    golden test checks each against its case), refused with another key or changed."""
    from cases import PointSerializer
    from generate import GOLDEN_KEY
    from support import GOLDEN

    codec = freight.Freight(key=GOLDEN_KEY)
    codec.register(PointSerializer())
    paths = sorted((GOLDEN / "v1.1-signed").glob("*.frt"))
    assert paths
    for path in paths:
        data = path.read_bytes()
        info = freight.inspect(data, key=GOLDEN_KEY)
        assert info["signature_ok"] is True and "head_signed" not in info["flags"]
        codec.loads(data)
        _freight.verify(data, key=GOLDEN_KEY)
        with pytest.raises(freight.IntegrityError):
            codec.loads(data, key=WRONG_KEY)
        # No header signature: the header ends with its checksum, the signature ends the payload.
        assert info["header_length"] == header_bounds(data)[1]
        assert all(f["digests"] is None for f in info["frames"])
