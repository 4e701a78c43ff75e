"""Signed frame lists (`dumps_frames(key=...)`): round trips, tampered frames and frame-list
headers refused (each an IntegrityError) before any pickle runs, dropped or extra buffers."""

from __future__ import annotations

import random

import numpy as np
import pytest

import freight
from support.signing import (
    KEY,
    PREAMBLE,
    SIDE_EFFECTS,
    SIG_LEN,
    WRONG_KEY,
    Sneaky,
    _clear_side_effects,  # noqa: F401  (autouse fixture)
    assert_equal,
    mac_range,
    sample_objects,
)
from support.wire import header_mac


@pytest.mark.parametrize("compression", [None, "lz4", "zstd"], ids=["plain", "lz4", "zstd"])
def test_signed_frames_round_trip(compression):
    obj = sample_objects()["mixed"]
    frames = freight.dumps_frames(obj, key=KEY, compression=compression)
    unsigned = freight.dumps_frames(obj, compression=compression)
    # No signature buffer: the header buffer ends with the signature, over the header alone.
    assert len(frames) == len(unsigned)
    header = bytes(frames[0])
    assert len(header) == mac_range(header).stop
    assert header[-SIG_LEN:] == header_mac(KEY, header)
    assert [bytes(f) for f in frames[1:]] == [bytes(f) for f in unsigned[1:]]
    # The same header as the single buffer's.
    assert header == freight.dumps(obj, key=KEY, compression=compression)[: len(header)]
    assert_equal(freight.loads_frames(frames, key=KEY), obj)
    assert_equal(freight.loads_frames([bytes(f) for f in frames], key=[WRONG_KEY, KEY]), obj)
    assert_equal(freight.loads_frames([bytearray(f) for f in frames], key=KEY, zero_copy=True), obj)
    assert_equal(freight.loads_frames(frames), obj)  # no key: not required
    with pytest.raises(freight.IntegrityError):
        freight.loads_frames(frames, key=WRONG_KEY)
    with pytest.raises(freight.IntegrityError):
        freight.loads_frames(unsigned, key=KEY)
    # With checksums as well.
    checked = freight.dumps_frames(obj, key=KEY, compression=compression, checksum=True)
    assert_equal(freight.loads_frames(checked, key=KEY), obj)


@pytest.mark.parametrize("compression", [None, "zstd"], ids=["plain", "zstd"])
def test_tampered_frames_are_refused(compression):
    obj = {"x": Sneaky("frames"), "arr": np.arange(40_000), "text": "t" * 70_000}
    frames = [bytes(f) for f in freight.dumps_frames(obj, key=KEY, compression=compression)]
    assert len(frames) == 3  # header (ending with the signature), two frames
    rng = random.Random(17)
    decoded_before_refusal = []
    for which, part in enumerate(frames):
        positions = set(range(min(len(part), 40))) | {len(part) - 1}
        positions |= {rng.randrange(len(part)) for _ in range(30)}
        for pos in sorted(positions):
            bad = list(frames)
            mutated = bytearray(part)
            mutated[pos] ^= rng.randrange(1, 256)
            bad[which] = bytes(mutated)
            # Header flags and header length: see test_tampered_frame_list_header_is_an_integrity_error.
            if which == 0 and pos < PREAMBLE + 2:
                with pytest.raises(freight.DeserializationError):
                    freight.loads_frames(bad, key=KEY)
            else:
                with pytest.raises(freight.IntegrityError):
                    freight.loads_frames(bad, key=KEY)
                    pytest.fail(f"buffer {which} byte {pos}")
            if SIDE_EFFECTS:
                decoded_before_refusal.append((which, pos))
                SIDE_EFFECTS.clear()
    # Nothing decodes when the header (and its signature) was changed; a changed frame of a payload
    # that runs pickle is caught before any node is decoded: see
    # test_a_tampered_frame_is_refused_before_any_pickle_runs.
    assert not [c for c in decoded_before_refusal if c[0] == 0], decoded_before_refusal
    # Swapped, truncated, extended buffers: their lengths are in the signed header, so each is
    # refused before anything is decoded (an IntegrityError when the lengths agree).
    for bad in (
        [frames[0], frames[2], frames[1]],
        [frames[0], frames[1], frames[2][:-1]],
        [frames[0], frames[1][:-1], frames[2]],
        [frames[0], frames[1], frames[2] + b"\0"],
        [*frames, header_mac(KEY, frames[0])],  # a 1.0 signature buffer added
        [frames[0][:-SIG_LEN], *frames[1:]],  # the header signature dropped
        [frames[0] + bytes(1), *frames[1:]],
    ):
        with pytest.raises(freight.DeserializationError):
            freight.loads_frames(bad, key=KEY)
    with pytest.raises(freight.IntegrityError):
        freight.loads_frames([frames[0][:-SIG_LEN] + bytes(SIG_LEN), *frames[1:]], key=KEY)
    assert SIDE_EFFECTS == []
    # A frame's content replaced: refused (before any pickle runs: see the test below).
    with pytest.raises(freight.IntegrityError, match="of frame 1"):
        freight.loads_frames([frames[0], frames[1], b"y" * len(frames[2])], key=KEY)


@pytest.mark.parametrize("layout", ["single", "frames"])
def test_a_tampered_frame_is_refused_before_any_pickle_runs(layout):
    obj = {"x": Sneaky("frames"), "arr": np.arange(40_000)}
    if layout == "single":
        blob = freight.dumps(obj, key=KEY)
        frame = freight.inspect(blob)["frames"][0]
        bad = bytearray(blob)
        bad[frame["offset"] + 5] ^= 1
        load, data = freight.loads, bytes(bad)
    else:
        parts = [bytes(p) for p in freight.dumps_frames(obj, key=KEY)]
        load, data = freight.loads_frames, [parts[0], b"\1" + parts[1][1:]]
    for kwargs in ({}, {"verify": False}):
        with pytest.raises(freight.IntegrityError, match="block 0 of frame 0"):
            load(data, key=KEY, **kwargs)
        assert SIDE_EFFECTS == [], "a pickle ran before the tampered frame was refused"


@pytest.mark.parametrize("compression", [None, "zstd"], ids=["plain", "zstd"])
def test_tampered_frame_list_header_is_an_integrity_error(compression):
    """Like loads, loads_frames given a key must check the signature before it parses the header
    (docs/FORMAT.md, "Signatures"): every tampered header byte after magic and version is an
    IntegrityError, as it is for the same bytes of a single-buffer payload."""
    obj = {"arr": np.arange(40_000), "text": "t" * 70_000}
    frames = [bytes(f) for f in freight.dumps_frames(obj, key=KEY, compression=compression)]
    blob = freight.dumps(obj, key=KEY, compression=compression)
    header = frames[0]
    failures = []
    for pos in range(PREAMBLE, len(header)):
        for flip in (0x01, 0x10, 0x80, 0xFF):
            bad = bytearray(header)
            bad[pos] ^= flip
            try:
                freight.loads_frames([bytes(bad)] + frames[1:], key=KEY)
            except freight.IntegrityError:
                pass
            except freight.DeserializationError as exc:
                failures.append(f"header byte {pos} ^ {flip:#x}: {type(exc).__name__}: {exc}")
            else:
                failures.append(f"header byte {pos} ^ {flip:#x}: accepted")
            # The single-buffer payload starts with the same bytes up to the frame table.
            if pos < 7:
                single = bytearray(blob)
                single[pos] ^= flip
                with pytest.raises(freight.IntegrityError):
                    freight.loads(bytes(single), key=KEY)
    assert not failures, "\n".join(failures[:10])


def test_dropped_or_extra_buffers_are_refused():
    obj = {"x": Sneaky("frames"), "arr": np.arange(40_000)}
    frames = freight.dumps_frames(obj, key=KEY)
    assert len(frames) == 2  # header (ending with the signature), the array's frame
    header = bytes(frames[0])
    for bad in (
        frames[:-1],
        frames + [frames[-1]],
        frames + [header[-SIG_LEN:]],  # a signature buffer, as format 1.0 had
        [frames[0], header[-SIG_LEN:]],
        [header[:-SIG_LEN], frames[1], header[-SIG_LEN:]],  # the signature moved to the end
    ):
        with pytest.raises((freight.IntegrityError, freight.DeserializationError)):
            freight.loads_frames(bad, key=KEY)
        with pytest.raises(freight.DeserializationError):
            freight.loads_frames(bad)
    assert SIDE_EFFECTS == []
