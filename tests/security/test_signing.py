"""Signed payloads (HMAC-SHA256): round trips, every way a signature can fail (each an
IntegrityError), checks made before anything is decoded (no unpickling side effects), inspect,
instance defaults and key rotation; frame lists are test_signed_frames.py's.

Format 1.2 layout (docs/FORMAT.md, "Signatures"): the signature follows the header checksum and
covers the header alone; every frame carries SHA-256 block digests, which the signed header
authenticates. tests/security/test_head_signed.py tests the digests and the header signature
byte by byte."""

from __future__ import annotations

import random

import pytest

import freight
from support import GOLDEN
from support.signing import (
    KEY,
    NEW_KEY,
    OLD_KEY,
    PREAMBLE,
    SIDE_EFFECTS,
    SIG_LEN,
    WRONG_KEY,
    Sneaky,
    _clear_side_effects,  # noqa: F401  (autouse fixture)
    assert_equal,
    mac_range,
    sample_objects,
    seal_len,
)
from support.wire import header_mac, read_uvarint


def signed_payload(compression="zstd"):
    obj = sample_objects()["mixed"]
    return obj, freight.dumps(obj, compression=compression, key=KEY)


# ---------------------------------------------------------------------------------------------
# Round trips


@pytest.mark.parametrize("name", ["builtins", "array", "mixed"])
@pytest.mark.parametrize("compression", [None, "lz4", "zstd", "auto"], ids=["plain", "lz4", "zstd", "auto"])
def test_signed_round_trip(name, compression):
    obj = sample_objects()[name]
    blob = freight.dumps(obj, key=KEY, compression=compression)
    unsigned = freight.dumps(obj, compression=compression)
    # The signature follows the header checksum and covers every byte before it.
    assert blob[mac_range(blob).start : mac_range(blob).stop] == header_mac(KEY, blob)
    signed_info, unsigned_info = freight.inspect(blob), freight.inspect(unsigned)
    assert signed_info["header_length"] == mac_range(blob).stop
    # The header body differs from the unsigned one by the frames' seals alone (SHA-256 digests
    # of 256 KiB blocks instead of checksums), and the frames are the same bytes.
    body = [read_uvarint(b, 6)[0] for b in (blob, unsigned)]
    seals = [sum(seal_len(f) for f in i["frames"]) for i in (signed_info, unsigned_info)]
    assert body[0] - body[1] == seals[0] - seals[1]
    for f in signed_info["frames"]:
        assert f["digests"] == ("sha256", 1 << 18)
    for f, g in zip(signed_info["frames"], unsigned_info["frames"], strict=True):
        assert (
            blob[f["offset"] : f["offset"] + f["stored_length"]]
            == unsigned[g["offset"] : g["offset"] + g["stored_length"]]
        )
    assert_equal(freight.loads(blob, key=KEY), obj)
    assert_equal(freight.loads(bytearray(blob), key=KEY), obj)
    assert_equal(freight.loads(memoryview(blob), key=KEY), obj)
    assert_equal(freight.loads(blob, key=KEY, zero_copy=True), obj)
    # Without a key, the signature is not required (and not checked).
    assert_equal(freight.loads(blob), obj)


def test_signed_lambda_round_trip_with_pickle():
    offset = 41
    func = lambda x: x + offset  # noqa: E731
    blob = freight.dumps(func, key=KEY)
    assert freight.inspect(blob)["needs_pickle"]
    assert freight.loads(blob, key=KEY)(1) == 42
    with pytest.raises(freight.UnsafePayloadError):
        freight.loads(blob, key=KEY, allow_pickle=False)


def test_signed_pickled_object_decodes_with_the_right_key():
    blob = freight.dumps([Sneaky("ok")], key=KEY)
    assert freight.loads(blob, key=KEY) == ["ok"]
    assert SIDE_EFFECTS == ["ok"]  # the probe works: decoding does leave a trace


def test_signing_is_deterministic_and_depends_on_the_key():
    obj = sample_objects()["builtins"]
    a = freight.dumps(obj, key=KEY)
    assert a == freight.dumps(obj, key=KEY)
    b = freight.dumps(obj, key=WRONG_KEY)
    mac = mac_range(a)
    assert a[: mac.start] == b[: mac.start] and a[mac.stop :] == b[mac.stop :]
    assert a[mac.start : mac.stop] != b[mac.start : mac.stop]
    arr = sample_objects()["array"]
    c, d = freight.dumps(arr, key=KEY), freight.dumps(arr, key=WRONG_KEY)
    mac = mac_range(c)
    assert mac.stop < len(c)  # frames follow the signature
    assert c[: mac.start] == d[: mac.start] and c[mac.stop :] == d[mac.stop :]
    assert c[mac.start : mac.stop] != d[mac.start : mac.stop]


def test_memoryview_and_bytearray_keys_are_accepted():
    blob = freight.dumps([1, 2], key=bytearray(KEY))
    assert freight.loads(blob, key=memoryview(KEY)) == [1, 2]
    assert freight.loads(blob, key=[bytearray(WRONG_KEY), KEY]) == [1, 2]


# ---------------------------------------------------------------------------------------------
# Failure modes


def test_unsigned_payload_with_key_is_refused():
    for compression in (None, "zstd"):
        blob = freight.dumps(sample_objects()["mixed"], compression=compression)
        with pytest.raises(freight.IntegrityError, match="not signed"):
            freight.loads(blob, key=KEY)
        with pytest.raises(freight.IntegrityError):
            freight.loads(blob, key=[OLD_KEY, NEW_KEY])
    with pytest.raises(freight.IntegrityError):
        freight.loads(freight.dumps(1), key=KEY)


def test_wrong_key_is_refused():
    _, blob = signed_payload()
    with pytest.raises(freight.IntegrityError):
        freight.loads(blob, key=WRONG_KEY)
    with pytest.raises(freight.IntegrityError):
        freight.loads(blob, key=[WRONG_KEY, OLD_KEY])
    with pytest.raises(freight.IntegrityError):
        freight.loads(blob, key=KEY[:-1])  # a prefix of the key is another key
    # (Not KEY + b"\0": HMAC pads keys shorter than its block with zeros, so that is the same key.)
    with pytest.raises(freight.IntegrityError):
        freight.loads(blob, key=KEY + b"!")


def test_key_rotation_accepts_either_key():
    obj = sample_objects()["builtins"]
    signed_old = freight.dumps(obj, key=OLD_KEY)
    signed_new = freight.dumps(obj, key=NEW_KEY)
    for keys in ([OLD_KEY, NEW_KEY], [NEW_KEY, OLD_KEY], (OLD_KEY, NEW_KEY), [WRONG_KEY, OLD_KEY, NEW_KEY]):
        assert_equal(freight.loads(signed_old, key=keys), obj)
        assert_equal(freight.loads(signed_new, key=keys), obj)
    with pytest.raises(freight.IntegrityError):
        freight.loads(signed_old, key=[NEW_KEY])
    with pytest.raises(freight.IntegrityError):
        freight.loads(freight.dumps(obj, key=WRONG_KEY), key=[OLD_KEY, NEW_KEY])


def test_signature_truncated_stripped_or_extended_is_refused():
    _, blob = signed_payload()
    mac = mac_range(blob)
    head, sig, rest = blob[: mac.start], blob[mac.start : mac.stop], blob[mac.stop :]
    other = freight.dumps([1], key=KEY)
    cases = {
        "half the signature": head + sig[:16] + rest,
        "signature stripped": head + rest,
        "signature and more stripped": head + rest[1:],
        "signature doubled": head + sig + sig + rest,
        "signature zeroed": head + bytes(SIG_LEN) + rest,
        "signature of another payload": head + other[mac_range(other).start : mac_range(other).stop] + rest,
        "signature moved to the end (the 1.0 trailer)": head + rest + sig,
    }
    for name, bad in cases.items():
        with pytest.raises(freight.IntegrityError):
            freight.loads(bad, key=KEY)
            pytest.fail(name)
    # Bytes dropped from the end or added after the last frame: the signature covers the header,
    # which says where the payload ends, so they are refused as not that payload (a
    # DeserializationError, no longer an IntegrityError as under the 1.0 trailer), before
    # anything is decoded.
    for bad, match in (
        (blob[:-1], "truncated"),
        (blob[:-SIG_LEN], "truncated"),
        (blob + b"\0", "trailing"),
        (blob + sig, "trailing"),
    ):
        with pytest.raises(freight.DeserializationError, match=match):
            freight.loads(bad, key=KEY)


def test_stripping_the_signature_of_a_small_payload_is_refused():
    blob = freight.dumps([1, 2, 3], key=KEY)
    for bad in (blob[:-SIG_LEN], blob[:-1], blob[: len(blob) // 2]):
        with pytest.raises(freight.IntegrityError):
            freight.loads(bad, key=KEY)


def tamper_positions(blob: bytes, count: int, seed: int) -> list[int]:
    """The whole header (its signature included) and the padding after it, each frame's first
    and last bytes, the payload's last bytes, and random bytes in between."""
    info = freight.inspect(blob)
    first_frame = info["frames"][0]["offset"] if info["frames"] else len(blob)
    positions = set(range(first_frame)) | set(range(max(0, len(blob) - SIG_LEN), len(blob)))
    assert set(mac_range(blob)) <= positions
    for frame in info["frames"]:
        positions.add(frame["offset"])
        positions.add(frame["offset"] + frame["stored_length"] - 1)
    rng = random.Random(seed)
    while len(positions) < count:
        positions.add(rng.randrange(len(blob)))
    return sorted(positions)


@pytest.mark.parametrize("compression", [None, "lz4", "zstd"], ids=["plain", "lz4", "zstd"])
def test_every_tampered_byte_is_an_integrity_error(compression):
    _, blob = signed_payload(compression)
    rng = random.Random(4321)
    positions = tamper_positions(blob, 200, seed=8)
    assert len(positions) >= 200
    for pos in positions:
        if pos < PREAMBLE:
            continue
        bad = bytearray(blob)
        bad[pos] ^= rng.randrange(1, 256)
        for kwargs in ({"key": KEY}, {"key": [OLD_KEY, KEY]}, {"key": KEY, "verify": False, "zero_copy": True}):
            try:
                freight.loads(bytes(bad), **kwargs)
            except freight.IntegrityError:
                pass
            except Exception as exc:  # pragma: no cover - the message is the point
                pytest.fail(f"byte {pos} of {len(blob)}: {type(exc).__name__}: {exc}")
            else:
                pytest.fail(f"tampering with byte {pos} of {len(blob)} went unnoticed")


def test_tampered_preamble_is_refused():
    _, blob = signed_payload()
    for pos in range(PREAMBLE):
        for flip in (0x01, 0x80, 0xFF):
            bad = bytearray(blob)
            bad[pos] ^= flip
            with pytest.raises(freight.DeserializationError):
                freight.loads(bytes(bad), key=KEY)


def test_integrity_error_is_a_deserialization_error():
    assert issubclass(freight.IntegrityError, freight.DeserializationError)
    _, blob = signed_payload()
    with pytest.raises(freight.DeserializationError):
        freight.loads(blob, key=WRONG_KEY)


# ---------------------------------------------------------------------------------------------
# Nothing is decoded before the signature is checked


def test_tampered_payload_is_refused_before_unpickling():
    blob = freight.dumps({"x": Sneaky("tampered"), "pad": "p" * 100}, key=KEY)
    assert freight.inspect(blob)["needs_pickle"]
    rng = random.Random(5)
    positions = [p for p in tamper_positions(blob, 120, seed=6) if p >= PREAMBLE]
    for pos in positions:
        bad = bytearray(blob)
        bad[pos] ^= rng.randrange(1, 256)
        with pytest.raises(freight.IntegrityError):
            freight.loads(bytes(bad), key=KEY)
        assert SIDE_EFFECTS == [], f"byte {pos}: decoded before the signature check"
    with pytest.raises(freight.IntegrityError):
        freight.loads(blob, key=WRONG_KEY)
    assert SIDE_EFFECTS == []
    # Control: the untampered payload does decode, and leaves its trace.
    assert freight.loads(blob, key=KEY)["x"] == "tampered"
    assert SIDE_EFFECTS == ["tampered"]


def test_attacker_without_the_key_cannot_forge():
    forged = freight.dumps(Sneaky("forged"))  # unsigned
    with pytest.raises(freight.IntegrityError):
        freight.loads(forged, key=KEY)
    forged_signed = freight.dumps(Sneaky("forged"), key=WRONG_KEY)  # signed with the wrong key
    with pytest.raises(freight.IntegrityError):
        freight.loads(forged_signed, key=KEY)
    with pytest.raises(freight.IntegrityError):
        freight.loads(forged_signed, key=[OLD_KEY, NEW_KEY])
    # A genuine signature moved onto a forged header.
    genuine = freight.dumps(Sneaky("genuine"), key=KEY)
    mac, at = mac_range(genuine), mac_range(forged_signed)
    moved = forged_signed[: at.start] + genuine[mac.start : mac.stop] + forged_signed[at.stop :]
    with pytest.raises(freight.IntegrityError):
        freight.loads(moved, key=KEY)
    frames = freight.dumps_frames(Sneaky("forged"))
    with pytest.raises(freight.IntegrityError):
        freight.loads_frames(frames, key=KEY)
    with pytest.raises(freight.IntegrityError):
        freight.loads_frames(freight.dumps_frames(Sneaky("forged"), key=WRONG_KEY), key=KEY)
    assert SIDE_EFFECTS == []


# ---------------------------------------------------------------------------------------------
# inspect


def test_inspect_reports_signatures():
    obj, blob = signed_payload()
    info = freight.inspect(blob)
    assert info["signed"] is True
    assert info["signature_ok"] is None
    assert freight.inspect(blob, key=KEY)["signature_ok"] is True
    assert freight.inspect(blob, key=[WRONG_KEY, KEY])["signature_ok"] is True
    assert freight.inspect(blob, key=WRONG_KEY)["signature_ok"] is False
    # A changed frame byte (its block digest no longer matches) or header byte: not ok.
    for pos in (len(blob) // 2, len(blob) - 1, mac_range(blob).start, mac_range(blob).stop - 1):
        bad = bytearray(blob)
        bad[pos] ^= 1
        assert freight.inspect(bytes(bad), key=KEY)["signature_ok"] is False, pos
    # The frame description is the one of the unsigned payload, but for the seal (and the
    # offsets, which follow the longer header).
    plain = freight.inspect(freight.dumps(obj, compression="zstd"))["frames"]
    seal = {"offset", "checksum", "digests"}
    assert [{k: v for k, v in f.items() if k not in seal} for f in info["frames"]] == [
        {k: v for k, v in f.items() if k not in seal} for f in plain
    ]
    assert all(f["digests"] == ("sha256", 1 << 18) and f["checksum"] is None for f in info["frames"])
    assert info["flags"] == ["frames", "meta", "signed", "packed", "head_signed"]

    unsigned = freight.dumps([1, 2])
    assert freight.inspect(unsigned)["signed"] is False
    assert freight.inspect(unsigned)["signature_ok"] is None
    assert freight.inspect(unsigned, key=KEY)["signature_ok"] in (False, None)

    frames = freight.dumps_frames(sample_objects()["mixed"], key=KEY)
    assert freight.inspect(frames)["signed"] is True
    assert freight.inspect(frames, key=KEY)["signature_ok"] is True
    assert freight.inspect(frames, key=WRONG_KEY)["signature_ok"] is False


# ---------------------------------------------------------------------------------------------
# Instances and options


def test_instance_key_signs_and_requires():
    codec = freight.Freight(key=KEY)
    obj = sample_objects()["mixed"]
    blob = codec.dumps(obj)
    assert freight.inspect(blob)["signed"] is True
    assert freight.inspect(blob, key=KEY)["signature_ok"] is True
    assert_equal(codec.loads(blob), obj)
    assert_equal(freight.loads(blob, key=KEY), obj)
    with pytest.raises(freight.IntegrityError):
        codec.loads(freight.dumps(obj))  # unsigned
    with pytest.raises(freight.IntegrityError):
        codec.loads(freight.dumps(obj, key=WRONG_KEY))
    frames = codec.dumps_frames(obj)
    assert freight.inspect(frames, key=KEY)["signature_ok"] is True
    assert_equal(codec.loads_frames(frames), obj)
    with pytest.raises(freight.IntegrityError):
        codec.loads_frames(freight.dumps_frames(obj))
    # A per-call key overrides the instance's.
    other = codec.dumps(obj, key=WRONG_KEY)
    assert freight.inspect(other, key=WRONG_KEY)["signature_ok"] is True
    assert_equal(codec.loads(other, key=WRONG_KEY), obj)
    # Compression and signing together.
    both = freight.Freight(key=KEY, compression="zstd")
    blob = both.dumps(obj)
    assert freight.inspect(blob, key=KEY)["signature_ok"] is True
    assert "zstd" in {f["codec"] for f in freight.inspect(blob)["frames"]}
    assert_equal(both.loads(blob), obj)


def test_instance_key_rotation_signs_with_the_first_key():
    codec = freight.Freight(key=[NEW_KEY, OLD_KEY])
    blob = codec.dumps([1, 2])
    assert freight.inspect(blob, key=NEW_KEY)["signature_ok"] is True
    assert freight.inspect(blob, key=OLD_KEY)["signature_ok"] is False
    assert codec.loads(freight.dumps([3], key=OLD_KEY)) == [3]
    assert codec.loads(freight.dumps([4], key=NEW_KEY)) == [4]
    with pytest.raises(freight.IntegrityError):
        codec.loads(freight.dumps([5], key=WRONG_KEY))


def test_instance_key_checks_before_unpickling():
    codec = freight.Freight(key=KEY)
    with pytest.raises(freight.IntegrityError):
        codec.loads(freight.dumps(Sneaky("instance")))
    assert SIDE_EFFECTS == []


def test_empty_key_is_an_option_error():
    with pytest.raises(freight.OptionError):
        freight.dumps(1, key=b"")
    with pytest.raises(freight.OptionError):
        freight.dumps_frames(1, key=b"")
    with pytest.raises(freight.OptionError):
        freight.loads(freight.dumps(1, key=KEY), key=b"")
    with pytest.raises(freight.OptionError):
        freight.loads(freight.dumps(1, key=KEY), key=[KEY, b""])
    with pytest.raises(freight.OptionError):
        freight.loads_frames(freight.dumps_frames(1, key=KEY), key=b"")
    with pytest.raises(freight.OptionError):
        freight.Freight(key=b"")
    with pytest.raises(freight.OptionError):
        freight.Freight(key=[KEY, b""])


@pytest.mark.parametrize("key", ["text", 5, [KEY, "text"], [KEY, None]], ids=repr)
def test_key_of_the_wrong_type_is_an_option_error(key):
    with pytest.raises(freight.OptionError):
        freight.dumps(1, key=key)
    with pytest.raises(freight.OptionError):
        freight.loads(freight.dumps(1, key=KEY), key=key)


@pytest.mark.parametrize("keys", [[], ()], ids=["list", "tuple"])
def test_empty_key_list_does_not_disable_verification(keys):
    """An empty list of keys must not silently turn signature checking off (fail open)."""
    unsigned = freight.dumps(Sneaky("empty-list"))
    with pytest.raises((freight.OptionError, freight.IntegrityError)):
        freight.loads(unsigned, key=keys)
    assert SIDE_EFFECTS == []
    with pytest.raises((freight.OptionError, freight.IntegrityError)):
        freight.loads_frames(freight.dumps_frames(Sneaky("empty-list")), key=keys)
    assert SIDE_EFFECTS == []
    with pytest.raises(freight.OptionError):
        freight.Freight(key=keys)


def test_golden_payloads_are_unsigned():
    for path in sorted(GOLDEN.glob("v1/*.frt")):
        data = path.read_bytes()
        assert freight.inspect(data)["signed"] is False
        with pytest.raises(freight.IntegrityError):
            freight.loads(data, key=KEY)
