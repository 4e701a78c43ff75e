"""freight.inspect's fixed set of keys (freight._freight.PayloadInfo, FrameInfo, TreeInfo) and
freight.verify: every check it makes, on buffers and on dumps_frames lists, without decoding."""

from __future__ import annotations

import numpy as np
import pytest

import freight
from freight._freight import _envelope

KEY = b"k" * 32
WRONG_KEY = b"w" * 32
LIST = 0x10

PAYLOAD_KEYS = {
    "format_version",
    "flags",
    "needs_pickle",
    "signed",
    "signature_ok",
    "header_length",
    "total_length",
    "tags",
    "producer",
    "frames",
    "tree",
}
FRAME_KEYS = {
    "index",
    "offset",
    "length",
    "stored_length",
    "codec",
    "shuffle",
    "ratio",
    "block_checksum",
    "checksum",
    "checksum_ok",
    "digests",
}
TREE_KEYS_OK = {"ok", "length", "nodes", "max_depth", "pickle_nodes", "node_tags"}
TREE_KEYS_BAD = {"ok", "length", "error"}
# The header's flag bits (docs/FORMAT.md, "Envelope"): byte 5 of a payload.
FLAG_BITS = {"needs_pickle": 1, "frames": 2, "meta": 4, "signed": 8, "packed": 16, "head_signed": 32}

# Unpickling side effects: anything in here means a payload was decoded.
SIDE_EFFECTS: list[str] = []


def record_side_effect(tag: str) -> str:
    SIDE_EFFECTS.append(tag)
    return tag


class Sneaky:
    def __reduce__(self):
        return (record_side_effect, ("decoded",))


def payloads() -> dict[str, bytes]:
    pd = pytest.importorskip("pandas")
    return {
        "ints": freight.dumps([1, 2, 3]),
        "array": freight.dumps(np.arange(1000.0), checksum=True),
        "large array": freight.dumps(np.arange(300_000.0), checksum=True),  # > 1 MiB: a block checksum
        "compressed": freight.dumps({"z": np.zeros(100_000), "r": np.arange(10_000)}, compression="zstd"),
        "no checksum": freight.dumps(np.arange(1000.0), checksum=False),
        "pandas": freight.dumps(pd.DataFrame({"a": np.arange(10), "s": list("abcdefghij")}), checksum=True),
        "array, no checksum by default": freight.dumps(np.arange(1000.0)),
        "lambda": freight.dumps(lambda x: x + 1),
        "signed": freight.dumps({"a": np.arange(100)}, key=KEY, checksum=True),
    }


def corrupt_last_frame(blob: bytes) -> bytes:
    info = freight.inspect(blob)
    frame = info["frames"][-1]
    out = bytearray(blob)
    out[frame["offset"] + frame["stored_length"] // 2] ^= 0xFF
    return bytes(out)


# --------------------------------------------------------------------------------------------
# inspect
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(payloads()))
def test_inspect_returns_exactly_the_documented_keys(name):
    blob = payloads()[name]
    info = freight.inspect(blob)
    assert set(info) == PAYLOAD_KEYS
    for frame in info["frames"]:
        assert set(frame) == FRAME_KEYS
        assert frame["codec"] in ("none", "lz4", "zstd")
        assert frame["checksum"] is None or (len(frame["checksum"]) == 16 and int(frame["checksum"], 16) >= 0)
        # Block digests (format 1.2): a signed payload's frames carry SHA-256 of 256 KiB blocks,
        # a checksummed frame larger than 1 MiB xxh3 of 64 KiB blocks.
        assert frame["digests"] in (None, ("xxh3", 1 << 16), ("sha256", 1 << 18))
        if info["signed"]:
            assert frame["digests"] == ("sha256", 1 << 18)
    assert set(info["tree"]) == TREE_KEYS_OK and info["tree"]["ok"] is True
    assert info["total_length"] == len(blob)
    assert info["signature_ok"] is None


@pytest.mark.parametrize("name", sorted(payloads()))
def test_flags_name_the_header_bits_that_are_set(name):
    blob = payloads()[name]
    flags = freight.inspect(blob)["flags"]
    assert set(flags) == {flag for flag, bit in FLAG_BITS.items() if blob[5] & bit}
    assert len(flags) == len(set(flags))
    info = freight.inspect(blob)
    assert ("needs_pickle" in flags) == info["needs_pickle"]
    assert ("signed" in flags) == info["signed"]
    assert ("frames" in flags) == bool(info["frames"])
    # Every signing writer since format 1.2 signs the header (the signature follows it).
    assert ("head_signed" in flags) == info["signed"]


def test_flags_of_known_payloads():
    assert freight.inspect(freight.dumps([1, 2, 3]))["flags"] == []
    # "meta": the payload records numpy's version.
    assert freight.inspect(freight.dumps(np.arange(10)))["flags"] == ["frames", "meta", "packed"]
    assert set(freight.inspect(freight.dumps(lambda: 1, key=KEY))["flags"]) >= {"needs_pickle", "signed", "head_signed"}


def test_inspect_takes_a_buffer_or_a_list_or_tuple_of_buffers():
    obj = {"a": np.arange(1000.0), "b": "x" * 100_000}
    blob = freight.dumps(obj, checksum=True)
    parts = freight.dumps_frames(obj, checksum=True)
    from_blob = freight.inspect(blob)
    for data in (parts, tuple(parts)):
        info = freight.inspect(data)
        assert set(info) == PAYLOAD_KEYS
        assert [f["offset"] for f in info["frames"]] == [None, None]
        assert [f["checksum"] for f in info["frames"]] == [f["checksum"] for f in from_blob["frames"]]
        assert all(f["checksum_ok"] for f in info["frames"])
    assert all(isinstance(f["offset"], int) for f in from_blob["frames"])


def test_a_malformed_tree_is_described_not_raised():
    tree = freight.inspect(_envelope(bytes([LIST, 5])))["tree"]
    assert set(tree) == TREE_KEYS_BAD
    assert tree["ok"] is False and tree["length"] == 2 and "5 items" in tree["error"]


# --------------------------------------------------------------------------------------------
# verify
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(payloads()))
def test_verify_accepts_every_valid_payload(name):
    blob = payloads()[name]
    assert freight.verify(blob) is None
    if name == "signed":
        assert freight.verify(blob, key=KEY) is None
        assert freight.verify(blob, key=[WRONG_KEY, KEY]) is None


def test_verify_accepts_memoryviews_bytearrays_and_frame_lists():
    obj = {"a": np.arange(1000.0), "s": "x" * 100_000}
    blob = freight.dumps(obj, key=KEY)
    freight.verify(memoryview(blob))
    freight.verify(bytearray(blob), key=KEY)
    parts = freight.dumps_frames(obj, checksum=True, key=KEY)
    freight.verify(parts, key=KEY)


@pytest.mark.parametrize("name", ["array", "large array", "compressed", "pandas", "signed"])
def test_verify_names_the_frame_whose_checksum_fails(name):
    blob = payloads()[name]
    last = len(freight.inspect(blob)["frames"]) - 1
    with pytest.raises(freight.IntegrityError, match=f"frame {last}"):
        freight.verify(corrupt_last_frame(blob))


def test_verify_checks_frames_of_a_frame_list():
    header, frame = freight.dumps_frames(np.arange(1000.0), checksum=True)
    bad = bytearray(frame)
    bad[0] ^= 1
    with pytest.raises(freight.IntegrityError, match="frame 0"):
        freight.verify([header, bad])
    with pytest.raises(freight.DeserializationError):
        freight.verify([header])  # a frame missing


def test_verify_checks_the_signature_only_with_a_key():
    original = freight.dumps({"a": np.arange(100)}, key=KEY)
    blob = bytearray(original)
    signature_end = freight.inspect(original)["header_length"]  # it follows the header checksum
    blob[signature_end - 1] ^= 1
    freight.verify(bytes(blob))  # nothing else changed
    with pytest.raises(freight.IntegrityError, match="signature"):
        freight.verify(bytes(blob), key=KEY)
    # A frame byte: its signed block digest no longer matches, with or without the key.
    blob = bytearray(original)
    blob[-1] ^= 1
    for key in (None, KEY):
        with pytest.raises(freight.IntegrityError, match="block 0 of frame 0"):
            freight.verify(bytes(blob), key=key)
    with pytest.raises(freight.IntegrityError):
        freight.verify(freight.dumps(1, key=KEY), key=WRONG_KEY)
    with pytest.raises(freight.IntegrityError, match="not signed"):
        freight.verify(freight.dumps(1), key=KEY)


def test_verify_rejects_a_malformed_tree_header_or_truncation():
    with pytest.raises(freight.DeserializationError, match="5 items"):
        freight.verify(_envelope(bytes([LIST, 5])))
    blob = freight.dumps({"a": np.arange(1000.0)})
    for bad in (b"", b"not a freight payload", blob[:10], blob[:-8]):
        with pytest.raises(freight.DeserializationError):
            freight.verify(bad)
    header_corrupt = bytearray(blob)
    header_corrupt[8] ^= 0xFF
    with pytest.raises(freight.DeserializationError):
        freight.verify(bytes(header_corrupt))


def test_verify_errors_are_freight_errors():
    with pytest.raises(freight.FreightError):
        freight.verify(corrupt_last_frame(freight.dumps(np.arange(1000.0), checksum=True)))


def test_verify_runs_nothing_in_the_payload():
    SIDE_EFFECTS.clear()
    blob = freight.dumps([Sneaky(), np.arange(10)])
    assert freight.inspect(blob)["needs_pickle"]
    freight.verify(blob)
    assert SIDE_EFFECTS == []
    freight.loads(blob)
    assert SIDE_EFFECTS == ["decoded"]
