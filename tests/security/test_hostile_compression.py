"""Compressed payloads that were damaged or crafted: every corruption of a compressed frame or
its table gives a clean freight error, and max_size stops decompression bombs before anything is
allocated for them."""

from __future__ import annotations

import json
import pathlib
import random
import subprocess
import sys

import numpy as np
import pytest

import freight
from support.compression import BLOCK, assert_array_same
from support.wire import uvarint

# ---------------------------------------------------------------------------------------------
# Corruption


def corruption_payload(compression):
    rng = np.random.default_rng(11)
    obj = {
        "ints": rng.integers(0, 50, 300_000, dtype=np.int64),  # 2.4 MiB raw: several blocks
        "floats": rng.standard_normal(20_000),  # raw under lz4
        "text": "freight " * 12_000,
        "blob": b"\x00\x01\x02\x03" * 20_000,
        "small": [1, 2.5, "three", b"four", None],
    }
    return obj, freight.dumps(obj, compression=compression)


def corruption_positions(blob: bytes, count: int, seed: int) -> list[int]:
    """Every byte before the first frame (header, header checksum, padding), then random ones
    elsewhere (in and between frames, each frame's first bytes: the block table)."""
    info = freight.inspect(blob)
    first = info["frames"][0]["offset"]
    positions = set(range(first))
    for frame in info["frames"]:
        positions.update(range(frame["offset"], min(frame["offset"] + 16, len(blob))))
        positions.add(frame["offset"] + frame["stored_length"] - 1)
    rng = random.Random(seed)
    while len(positions) < count:
        positions.add(rng.randrange(len(blob)))
    return sorted(positions)


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_every_corrupted_byte_raises_deserialization_error(compression):
    _, blob = corruption_payload(compression)
    rng = random.Random(1234)
    for pos in corruption_positions(blob, 300, seed=99):
        bad = bytearray(blob)
        bad[pos] ^= rng.randrange(1, 256)
        for kwargs in ({}, {"zero_copy": True, "verify": True}):
            try:
                freight.loads(bytes(bad), **kwargs)
            except freight.DeserializationError:
                pass
            except Exception as exc:  # pragma: no cover - the failure message is the point
                pytest.fail(f"byte {pos}: {type(exc).__name__}: {exc}")
            else:
                pytest.fail(f"corrupting byte {pos} of a {compression} payload went unnoticed")


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_corrupted_frames_in_frame_lists_raise_deserialization_error(compression):
    obj, _ = corruption_payload(compression)
    frames = [bytes(f) for f in freight.dumps_frames(obj, compression=compression, checksum=True)]
    rng = random.Random(77)
    for _ in range(150):
        which = rng.randrange(len(frames))
        if not frames[which]:
            continue
        pos = rng.randrange(len(frames[which]))
        bad = list(frames)
        mutated = bytearray(bad[which])
        mutated[pos] ^= rng.randrange(1, 256)
        bad[which] = bytes(mutated)
        with pytest.raises(freight.DeserializationError):
            freight.loads_frames(bad)


VERIFY_FALSE_SCRIPT = """
import random, sys
import numpy as np
import freight

rng = np.random.default_rng(11)
obj = {
    "ints": rng.integers(0, 50, 300_000, dtype=np.int64),
    "floats": rng.standard_normal(20_000),
    "text": "freight " * 12_000,
    "blob": b"\\x00\\x01\\x02\\x03" * 20_000,
    "small": [1, 2.5, "three", b"four", None],
}
outcomes = {"ok": 0, "error": 0}
for compression in ("lz4", "zstd"):
    blob = freight.dumps(obj, compression=compression)
    frames = freight.dumps_frames(obj, compression=compression)
    pick = random.Random(2024)
    for _ in range(300):
        pos = pick.randrange(len(blob))
        bad = bytearray(blob)
        bad[pos] ^= pick.randrange(1, 256)
        which = pick.randrange(len(frames))
        parts = [bytes(f) for f in frames]
        if parts[which]:
            p = bytearray(parts[which])
            p[pick.randrange(len(p))] ^= pick.randrange(1, 256)
            parts[which] = bytes(p)
        for call in (
            lambda: freight.loads(bytes(bad), verify=False),
            lambda: freight.loads(bytes(bad), verify=False, zero_copy=True),
            lambda: freight.loads_frames(parts),
            lambda: freight.loads_frames(parts, zero_copy=True),
        ):
            try:
                call()
                outcomes["ok"] += 1
            except freight.DeserializationError:
                outcomes["error"] += 1
            except BaseException as exc:
                print(f"{compression} byte {pos}: {type(exc).__name__}: {exc}", file=sys.stderr)
                sys.exit(3)
print(outcomes)
"""


def test_corruption_without_verification_never_escapes_or_crashes():
    proc = subprocess.run([sys.executable, "-c", VERIFY_FALSE_SCRIPT], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout={proc.stdout}\nstderr={proc.stderr[-4000:]}"


def _uvarint(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


_put_uvarint = uvarint


def _block_table_mutations(stored: bytes):
    """Compressed frames whose block table lies (docs/FORMAT.md, "Compressed frames")."""
    block, i = _uvarint(stored, 0)
    n, j = _uvarint(stored, i)
    lengths = []
    k = j
    for _ in range(n):
        length, k = _uvarint(stored, k)
        lengths.append(length)
    blocks = stored[k:]
    assert block == BLOCK and n >= 2 and sum(lengths) == len(blocks)

    def table(b, count, lens):
        return _put_uvarint(b) + _put_uvarint(count) + b"".join(_put_uvarint(x) for x in lens)

    yield "block size one more", table(block + 1, n, lengths) + blocks
    yield "block size one less", table(block - 1, n, lengths) + blocks
    yield "block size doubled", table(2 * block, n, lengths) + blocks
    yield "block size zero", table(0, n, lengths) + blocks
    yield "block size over 64 MiB", table((64 << 20) + 1, n, lengths) + blocks
    yield "block size huge", table(2**63, n, lengths) + blocks
    yield "one block fewer", table(block, n - 1, lengths[:-1]) + blocks
    yield "one block more", table(block, n + 1, lengths + [0]) + blocks
    yield "count huge", table(block, 2**40, lengths) + blocks
    yield "first block longer", table(block, n, [lengths[0] + 1] + lengths[1:]) + blocks
    yield "first block shorter", table(block, n, [lengths[0] - 1] + lengths[1:]) + blocks
    yield "lengths swapped", table(block, n, [lengths[0] - 1, lengths[1] + 1] + lengths[2:]) + blocks
    yield "a block emptied", table(block, n, [0, lengths[1] + lengths[0]] + lengths[2:]) + blocks
    yield "truncated table", stored[: j + 1]
    yield "empty", b""


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_lying_block_tables_raise_deserialization_error(compression):
    arr = (np.arange(4 * BLOCK + 123) % 251).astype(np.uint8)
    header, stored = (bytes(f) for f in freight.dumps_frames(arr, compression=compression))
    assert freight.inspect([header, stored])["frames"][0]["codec"] == compression
    for name, mutated in _block_table_mutations(stored):
        for kwargs in ({}, {"zero_copy": True}):
            with pytest.raises(freight.DeserializationError):
                freight.loads_frames([header, mutated], **kwargs)
                pytest.fail(name)
    # The same lies inside a single-buffer payload, loaded without checksum verification.
    blob = freight.dumps(arr, compression=compression)
    frame = freight.inspect(blob)["frames"][0]
    start, end = frame["offset"], frame["offset"] + frame["stored_length"]
    for name, mutated in _block_table_mutations(blob[start:end]):
        if len(mutated) != end - start:
            continue  # would move the frame: caught by the length checks already covered
        with pytest.raises(freight.DeserializationError):
            freight.loads(blob[:start] + mutated + blob[end:], verify=False)
            pytest.fail(name)


def test_frame_from_another_payload_is_refused():
    big = np.zeros(4 * BLOCK, np.uint8)
    other = np.zeros(2 * BLOCK, np.uint8)
    for compression in ("lz4", "zstd"):
        h_big, f_big = freight.dumps_frames(big, compression=compression)
        h_other, f_other = freight.dumps_frames(other, compression=compression)
        with pytest.raises(freight.DeserializationError):
            freight.loads_frames([h_big, f_other])
        with pytest.raises(freight.DeserializationError):
            freight.loads_frames([h_other, f_big])


# ---------------------------------------------------------------------------------------------
# max_size: decompression bombs


def test_max_size_refuses_large_frames_and_names_the_limit():
    arr = np.zeros(2 * BLOCK, np.uint8)
    for compression in ("zstd", "lz4", "none"):
        blob = freight.dumps(arr, compression=compression)
        assert_array_same(freight.loads(blob, max_size=arr.nbytes), arr)  # the limit is inclusive
        with pytest.raises(freight.DeserializationError, match=str(arr.nbytes - 1)):
            freight.loads(blob, max_size=arr.nbytes - 1)
        frames = freight.dumps_frames(arr, compression=compression)
        assert_array_same(freight.loads_frames(frames, max_size=arr.nbytes), arr)
        with pytest.raises(freight.DeserializationError, match=str(2**20)):
            freight.loads_frames(frames, max_size=2**20)
        limited = freight.Freight(max_size=2**20)
        with pytest.raises(freight.DeserializationError):
            limited.loads(blob)
        assert_array_same(limited.loads(blob, max_size=arr.nbytes), arr)  # per call overrides
    # bytes and str frames are limited too; inline values are not frames.
    for value in (b"x" * 100_000, "y" * 100_000, bytearray(b"z" * 100_000)):
        with pytest.raises(freight.DeserializationError):
            freight.loads(freight.dumps(value, compression="zstd"), max_size=1000)
    assert freight.loads(freight.dumps(b"x" * 5000), max_size=1000) == b"x" * 5000


BOMB_SCRIPT = """
import json, resource, sys
import numpy as np
import freight

with open(sys.argv[1], "rb") as fh:
    blob = fh.read()
frames = [blob]
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
def hwm():  # the same peak, read from the kernel's per-address-space counter
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
before, hwm_before = peak(), hwm()
message = None
try:
    freight.loads(blob, max_size=2**20)
except freight.DeserializationError as exc:
    message = str(exc)
refused, hwm_refused = peak(), hwm()
got = freight.loads(blob)  # control: a real load of the same payload does allocate 256 MiB
loaded, hwm_loaded = peak(), hwm()
ok = got.shape == (2**28,) and not got.any()
print(json.dumps({"before": before, "refused": refused, "loaded": loaded, "hwm_before": hwm_before,
                  "hwm_refused": hwm_refused, "hwm_loaded": hwm_loaded, "message": message, "ok": bool(ok)}))
"""

# ru_maxrss survives fork and exec on Linux: a child of the (large) pytest process starts with
# the parent's peak. The measuring process is therefore a grandchild, started by a small
# interpreter, so that its baseline is its own.
SPAWN_SCRIPT = "import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-c'] + sys.argv[1:]))"


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_decompression_bomb_is_refused_before_allocating(compression, tmp_path: pathlib.Path):
    bomb = np.zeros(2**28, np.uint8)  # 256 MiB raw
    blob = freight.dumps(bomb, compression=compression)
    del bomb
    assert len(blob) < 2 * 2**20  # tiny next to what it declares
    assert freight.inspect(blob)["frames"][0]["length"] == 2**28

    with pytest.raises(freight.DeserializationError, match=r"limit") as excinfo:
        freight.loads(blob, max_size=2**20)
    assert str(2**20) in str(excinfo.value)
    with pytest.raises(freight.DeserializationError, match=r"limit"):
        freight.loads_frames(freight.dumps_frames(np.zeros(2**24, np.uint8), compression=compression), max_size=2**20)

    path = tmp_path / "bomb.frt"
    path.write_bytes(blob)
    proc = subprocess.run(
        [sys.executable, "-c", SPAWN_SCRIPT, BOMB_SCRIPT, str(path)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["message"] is not None and "limit" in result["message"]
    grew_kib = result["refused"] - result["before"]
    assert grew_kib < 16 * 1024, f"refused load still raised peak RSS by {grew_kib} KiB: {result}"
    assert result["hwm_refused"] - result["hwm_before"] < 16 * 1024, result
    # The measurement can see a 256 MiB allocation: the unrestricted load shows it.
    assert result["ok"]
    assert result["loaded"] - result["before"] > 200 * 1024, result
    assert result["hwm_loaded"] - result["hwm_before"] > 200 * 1024, result
