"""One reading contract: ``loads``, ``loads_frames``, ``inspect`` and ``verify`` open payloads
through the same core entry point (freight-core's ``Payload::open``), so they accept and refuse
exactly the same inputs, in both layouts (one buffer, or the ``dumps_frames`` list)."""

from __future__ import annotations

import numpy as np
import pytest

import freight
from freight import _freight
from freight.exceptions import DeserializationError, IntegrityError

KEY = b"k" * 32


def _frames(obj, **kw):
    return [bytes(p) for p in freight.dumps_frames(obj, checksum=True, **kw)]


def _opens(parts):
    """How each reader treats ``parts``: the exception class it raises, or None."""
    outcomes = {}
    readers = {
        "loads_frames": lambda p: freight.loads_frames(p),
        "inspect": lambda p: freight.inspect(p),
        "verify": lambda p: _freight.verify(p),
    }
    for name, read in readers.items():
        try:
            read(parts)
        except DeserializationError as exc:
            outcomes[name] = type(exc)
        else:
            outcomes[name] = None
    return outcomes


VALUE = {"a": np.arange(1000, dtype=np.int64), "b": b"x" * 100_000}


def _broken_layouts():
    parts = _frames(VALUE)
    yield "no buffers", []
    yield "header with a byte more", [parts[0] + b"\0", *parts[1:]]
    yield "a buffer missing", parts[:-1]
    yield "a buffer too many", [*parts, b"extra"]
    yield "a frame one byte short", [parts[0], parts[1][:-1], *parts[2:]]
    yield "frames swapped", [parts[0], parts[2], parts[1]]


@pytest.mark.parametrize("name,parts", list(_broken_layouts()), ids=[n for n, _ in _broken_layouts()])
def test_every_reader_refuses_a_broken_frame_list(name, parts):
    outcomes = _opens(parts)
    assert all(cls is not None for cls in outcomes.values()), outcomes
    # inspect reports what it can read; it refuses exactly the layouts loads refuses.
    assert outcomes["inspect"] == outcomes["loads_frames"], outcomes


def test_every_reader_accepts_an_intact_frame_list():
    parts = _frames(VALUE)
    assert _opens(parts) == {"loads_frames": None, "inspect": None, "verify": None}
    info = freight.inspect(parts)
    assert info["total_length"] == sum(len(p) for p in parts)
    assert [f["offset"] for f in info["frames"]] == [None, None]
    assert all(f["checksum_ok"] for f in info["frames"])


def test_a_changed_frame_byte_is_caught_by_verify_and_loads_and_shown_by_inspect():
    parts = _frames(VALUE)
    bad = bytearray(parts[2])
    bad[10] ^= 1
    parts[2] = bytes(bad)
    with pytest.raises(IntegrityError, match="frame 1"):
        _freight.verify(parts)
    with pytest.raises(IntegrityError, match="frame 1"):
        freight.loads_frames(parts)
    info = freight.inspect(parts)  # describes it, and says which frame is bad
    assert [f["checksum_ok"] for f in info["frames"]] == [True, False]


def test_single_buffer_and_frame_list_describe_the_same_payload():
    blob = freight.dumps(VALUE)
    one, split = freight.inspect(blob), freight.inspect(_frames(VALUE))
    for key in ("format_version", "flags", "needs_pickle", "tags", "producer", "tree"):
        assert one[key] == split[key], key
    assert [f["length"] for f in one["frames"]] == [f["length"] for f in split["frames"]]
    # Large frames 64-byte aligned, small ones 16 (flag "packed", format 1.1).
    assert all(f["offset"] % (freight._freight.FRAME_ALIGN if f["length"] >= 4096 else 16) == 0 for f in one["frames"])
    assert one["flags"] == ["frames", "meta", "packed"]  # meta: numpy's version is recorded


def test_flags_name_the_header_bits():
    signed = freight.dumps(lambda: 1, key=KEY)
    # head_signed (format 1.2): the signature follows the header checksum and covers the header.
    assert freight.inspect(signed)["flags"] == ["needs_pickle", "meta", "signed", "head_signed"]
    assert freight.inspect(freight.dumps(1))["flags"] == []


@pytest.mark.parametrize("layout", ["single", "frames"])
def test_signatures_are_checked_the_same_way_by_every_reader(layout):
    if layout == "single":
        good = freight.dumps(VALUE, key=KEY)
        forged = bytearray(good)
        forged[-40] ^= 1
        forged = bytes(forged)
        unsigned = freight.dumps(VALUE)
        load = freight.loads
    else:
        good = _frames(VALUE, key=KEY)
        assert len(good) == 3  # the header buffer ends with the signature: no separate buffer
        forged = [good[0], good[1], b"y" * len(good[2])]
        unsigned = _frames(VALUE)
        load = freight.loads_frames
    load(good, key=KEY)
    _freight.verify(good, key=KEY)
    assert freight.inspect(good, key=KEY)["signature_ok"] is True
    assert freight.inspect(good)["signature_ok"] is None
    for data in (forged, unsigned):
        with pytest.raises(IntegrityError):
            load(data, key=KEY)
        with pytest.raises(IntegrityError):
            _freight.verify(data, key=KEY)
        assert freight.inspect(data, key=KEY)["signature_ok"] is False


def test_compressed_frames_always_carry_a_checksum_and_their_block_table_is_read_safely():
    parts = [bytes(p) for p in freight.dumps_frames(np.zeros(1 << 18), compression="lz4")]
    _freight.verify(parts)
    frame = freight.inspect(parts)["frames"][0]
    assert frame["codec"] == "lz4" and frame["checksum"] is not None  # checksum=False by default
    # A block size of 0: the checksum catches it; loading without verification reads the block
    # table and refuses it.
    broken = [parts[0], b"\0" + parts[1][1:]]
    with pytest.raises(freight.IntegrityError, match="frame 0"):
        _freight.verify(broken)
    with pytest.raises(DeserializationError, match="block size"):
        freight.loads_frames(broken, verify=False)


def test_verify_refuses_a_tree_that_loads_refuses():
    from freight._freight import _envelope

    for tree in (bytes([0x3F]), bytes([0x10, 0x05])):  # an unknown node tag; a list cut short
        blob = _envelope(tree)
        with pytest.raises(DeserializationError):
            freight.loads(blob)
        with pytest.raises(DeserializationError):
            _freight.verify(blob)
        assert freight.inspect(blob)["tree"]["ok"] is False


def test_a_payload_of_builtins_is_read_by_the_same_contract():
    """Payloads whose header declares no frames, tags, versions or pickle load without the
    general path's set-up; a tree that needs any of those is refused all the same."""
    from freight._freight import _envelope

    STR, NDARRAY, EXT, PICKLE = 0x07, 0x30, 0x31, 0x32
    small = freight.dumps({"a": [1, 2.5, "x"], "b": (None, True)})
    assert freight.loads(small) == {"a": [1, 2.5, "x"], "b": (None, True)}
    with pytest.raises(DeserializationError):
        freight.loads(small + b"\0")  # trailing bytes, as the general path refuses them
    for tree in (
        bytes([NDARRAY, STR, 3]) + b"<f8" + bytes([0, 1, 1, 0]),  # an array whose frame 0 is not declared
        bytes([EXT, 0, 0x00, 0]),  # a serializer node with no tag declared
        bytes([PICKLE, 0, 0, 1, 0x80, 0, 0]),  # pickle, but the header does not say so
    ):
        with pytest.raises(DeserializationError, match="does not declare"):
            freight.loads(_envelope(tree))
