"""Mutation testing of the decoder: corrupted, truncated and random inputs.

Every input here that is not the untouched output of ``dumps`` must make ``freight.loads``
raise ``freight.DeserializationError`` (or a subclass): never another exception, never a crash,
never a hang, and never a result. A mutation could in principle produce another valid payload,
but the header and frame checksums make that astronomically unlikely, so the error is required.
The payloads are written with frame checksums (``checksum=True``, as files and stores write them):
without them a flipped byte of array data is, by design, a different array (the header, which
is always checksummed, still catches every change to the structure).

All randomness comes from ``random.Random(seed)``: failures reproduce.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import pathlib
import random
import subprocess
import sys
import textwrap
import uuid
from decimal import Decimal
from zoneinfo import ZoneInfo

import numpy as np
import pytest

import freight
from support.wire import read_uvarint, uvarint, xxh3_64

MIN_MUTATIONS_PER_PAYLOAD = 1000


@dataclasses.dataclass
class Point:
    x: float
    y: float
    label: str


@dataclasses.dataclass
class WithArray:
    name: str
    data: np.ndarray


def _make_closure():
    captured = {"scale": 3, "offset": [1, 2, 3]}

    def scaled(v):
        return v * captured["scale"] + sum(captured["offset"])

    return scaled


def _payload_objects() -> dict[str, object]:
    rng = random.Random(1234)
    shared = [1, 2, 3]
    cyclic: list = [shared, {"again": shared}]
    cyclic.append(cyclic)
    return {
        "none": None,
        "small-dict": {"a": [1, 2.5, "three"]},
        "bigint": 2**300 - 7,
        "text": "héllo wörld 🙂 \ud800 " * 3,
        "bytes": bytes(range(256)),
        "nested": {
            "l": [1, [2, [3, (4, 5)]]],
            "s": {1, 2, 3},
            "f": frozenset({"a", "b"}),
            "t": (None, True, False),
            "c": 1 + 2j,
            "neg": -(2**70),
        },
        "stdlib": [
            dt.datetime(2021, 10, 31, 2, 30, fold=1, tzinfo=ZoneInfo("Europe/Paris")),
            dt.datetime(2000, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=45), "NPT")),
            dt.date(1999, 12, 31),
            dt.time(23, 59, 59, 999999, tzinfo=dt.timezone.utc),
            dt.timedelta(days=-3, seconds=5, microseconds=7),
            Decimal("1.10"),
            Decimal("-NaN"),
            uuid.UUID("12345678-1234-5678-1234-567812345678"),
            pathlib.PurePosixPath("/a/b/c.txt"),
            pathlib.PureWindowsPath("C:/x/y"),
        ],
        "shared-and-cycle": cyclic,
        "floats": [float("nan"), -0.0, float("inf"), 1e-310, 3.141592653589793],
        "int64-array": np.arange(200, dtype=np.int64),
        "f32-fortran": np.asfortranarray(np.linspace(0, 1, 60, dtype=np.float32).reshape(6, 10)),
        "structured-array": np.zeros(8, dtype=[("a", "<i4"), ("b", ">f8"), ("c", "S3")]),
        "unicode-array": np.array(["α", "beta", "γγγ"]),
        "datetime-array": np.arange("2020-01-01", "2020-02-01", dtype="M8[D]"),
        "several-arrays": {"a": np.ones(10), "b": [np.zeros(3, dtype=np.int8), np.arange(5.0)]},
        "lambda": lambda x: x + 1,
        "closure": _make_closure(),
        "dataclass": Point(1.0, 2.0, "p"),
        "dataclass-with-array": WithArray("w", np.arange(50.0)),
        "large-bytes": rng.randbytes(100_000),
        "object-array": np.array([1, "a", None, [1, 2]], dtype=object),
    }


PAYLOADS: dict[str, bytes] = {}


def _payload(name: str) -> bytes:
    if not PAYLOADS:
        for key, obj in _payload_objects().items():
            PAYLOADS[key] = freight.dumps(obj, checksum=True)
    return PAYLOADS[name]


PAYLOAD_NAMES = list(_payload_objects())


def _mutations(blob: bytes, seed: int) -> list[tuple[str, bytes]]:
    """Truncations, single-byte flips, insertions, deletions and multi-byte flips of ``blob``."""
    rng = random.Random(seed)
    n = len(blob)
    out: list[tuple[str, bytes]] = []
    dense = 1500
    # Every truncation length for short payloads; for long ones, every length in the first
    # 600 bytes (the header) and a random sample of the rest.
    if n <= dense:
        cuts = range(n)
    else:
        cuts = sorted(set(range(600)) | set(rng.sample(range(600, n), dense - 600)) | {n - 1})
    for cut in cuts:
        out.append((f"truncate to {cut}", blob[:cut]))
    # A flip at every position (or the header plus a random sample).
    if n <= dense:
        positions = range(n)
    else:
        positions = sorted(set(range(600)) | set(rng.sample(range(600, n), dense - 600)) | {n - 1})
    for pos in positions:
        mutated = bytearray(blob)
        mutated[pos] ^= rng.randrange(1, 256)
        out.append((f"flip byte {pos}", bytes(mutated)))
    for _ in range(100):
        pos = rng.randrange(n + 1)
        byte = rng.randrange(256)
        out.append((f"insert {byte:#04x} at {pos}", blob[:pos] + bytes([byte]) + blob[pos:]))
    for _ in range(100):
        pos = rng.randrange(n)
        out.append((f"delete byte {pos}", blob[:pos] + blob[pos + 1 :]))
    for k in (1, 7, 64):
        out.append((f"append {k} random bytes", blob + rng.randbytes(k)))
    out.append(("append a zero byte", blob + b"\x00"))
    # Top up with multi-byte flips.
    while len(out) < MIN_MUTATIONS_PER_PAYLOAD:
        mutated = bytearray(blob)
        picks = [rng.randrange(n) for _ in range(rng.randrange(2, 6))]
        for pos in picks:
            mutated[pos] ^= rng.randrange(1, 256)
        if bytes(mutated) != blob:
            out.append((f"flip bytes {picks}", bytes(mutated)))
    return out


def _require_deserialization_errors(cases: list[tuple[str, object]], loads=None) -> None:
    loads = loads or freight.loads
    failures = []
    for desc, data in cases:
        try:
            result = loads(data)
        except freight.DeserializationError:
            continue
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - a Rust panic is a BaseException
            failures.append(f"{desc}: raised {type(exc).__module__}.{type(exc).__name__}: {exc}"[:300])
        else:
            failures.append(f"{desc}: loaded without error, giving {type(result).__name__}: {result!r}"[:300])
    assert not failures, (
        f"{len(failures)} of {len(cases)} corrupted inputs did not raise freight.DeserializationError:\n"
        + "\n".join(failures[:25])
    )


def test_payloads_are_valid_and_varied():
    objects = _payload_objects()
    assert len(objects) >= 20
    for name in PAYLOAD_NAMES:
        blob = _payload(name)
        assert isinstance(blob, bytes) and len(blob) > 5
        freight.loads(blob)  # the untouched payloads load
    # Enough mutations in total: at least 20,000 corrupted payloads.
    total = sum(len(_mutations(_payload(name), seed=i)) for i, name in enumerate(PAYLOAD_NAMES))
    assert total >= 20_000


@pytest.mark.timeout(300)
@pytest.mark.parametrize("index,name", list(enumerate(PAYLOAD_NAMES)))
def test_mutated_payloads_raise_deserialization_error(index, name):
    blob = _payload(name)
    mutants = _mutations(blob, seed=1000 + index)
    assert len(mutants) >= MIN_MUTATIONS_PER_PAYLOAD
    _require_deserialization_errors(mutants)


@pytest.mark.timeout(300)
def test_random_bytes_raise_deserialization_error():
    rng = random.Random(7)
    cases = [("empty", b"")]
    for i in range(3000):
        data = rng.randbytes(rng.randrange(0, 300))
        cases.append((f"random #{i} ({data[:16].hex()}...)", data))
    _require_deserialization_errors(cases)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("prefix_len", [4, 5, 6])
def test_random_bytes_after_the_magic_prefix_raise_deserialization_error(prefix_len):
    rng = random.Random(11 + prefix_len)
    prefix = _payload("small-dict")[:prefix_len]
    cases = [(f"prefix only ({prefix.hex()})", prefix)]
    for i in range(2000):
        tail = rng.randbytes(rng.randrange(0, 400))
        cases.append((f"prefix + random #{i} ({tail[:16].hex()}...)", prefix + tail))
    # Plausible small header lengths followed by garbage.
    for i in range(500):
        body_len = rng.randrange(0, 200)
        tail = bytes([body_len]) + rng.randbytes(rng.randrange(0, 300))
        cases.append((f"prefix + length {body_len} + random #{i}", prefix + tail))
    _require_deserialization_errors(cases)


def test_other_buffer_kinds_of_corrupt_data_raise_deserialization_error():
    blob = _payload("several-arrays")
    cases = []
    for cut in range(0, len(blob), 7):
        cases.append((f"bytearray truncated to {cut}", bytearray(blob[:cut])))
        cases.append((f"memoryview truncated to {cut}", memoryview(blob)[:cut]))
    _require_deserialization_errors(cases)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["int64-array", "several-arrays", "dataclass-with-array", "large-bytes", "small-dict"])
def test_mutated_frames_raise_deserialization_error(name):
    obj = _payload_objects()[name]
    frames = [bytes(memoryview(f)) for f in freight.dumps_frames(obj)]
    freight.loads_frames(frames)  # the untouched frames load
    rng = random.Random(len(name))
    header = frames[0]
    cases: list[tuple[str, object]] = [("no frames at all", [])]
    for cut in range(len(header)):
        cases.append((f"header truncated to {cut}", [header[:cut], *frames[1:]]))
    for pos in range(len(header)):
        mutated = bytearray(header)
        mutated[pos] ^= rng.randrange(1, 256)
        cases.append((f"header byte {pos} flipped", [bytes(mutated), *frames[1:]]))
    cases.append(("header plus a trailing byte", [header + b"\x00", *frames[1:]]))
    cases.append(("an extra frame", [*frames, b"extra"]))
    if len(frames) > 1:
        cases.append(("last frame dropped", frames[:-1]))
        cases.append(("last frame one byte short", [*frames[:-1], frames[-1][:-1]]))
        cases.append(("last frame one byte long", [*frames[:-1], frames[-1] + b"\x00"]))
        cases.append(("frames swapped with the header", [*frames[1:], header]))
    _require_deserialization_errors(cases, loads=freight.loads_frames)


# --------------------------------------------------------------------------------------------
# Payloads that claim huge sizes must not allocate them.
# --------------------------------------------------------------------------------------------

_uvarint = uvarint


_read_uvarint = read_uvarint


# The envelope layout these tests rely on (docs/FORMAT.md): 4 magic bytes, the format version,
# a flags byte, the header length as an unsigned LEB128 varint, the header, then its xxh3-64
# checksum (8 bytes, little-endian) over everything before it.
_PREAMBLE = 6


_ALIGN = 64  # frames start at offsets that are multiples of 64 (16 for small ones when packed)


def _align_up(n: int, align: int = _ALIGN) -> int:
    return (n + align - 1) // align * align


class _Frames(bytes):
    """The bytes after a header from its first frame on, with the alignment that frame has."""

    align = _ALIGN


def _split(blob: bytes) -> tuple[bytes, bytes, bytes | None]:
    """(preamble without the length, header body, frames from the first aligned offset on, or
    None when nothing follows the header)."""
    body_len, body_start = _read_uvarint(blob, _PREAMBLE)
    body = blob[body_start : body_start + body_len]
    header_end = body_start + body_len + 8
    stored = int.from_bytes(blob[header_end - 8 : header_end], "little")
    assert stored == xxh3_64(blob[: header_end - 8]), (
        "test assumption broken: the header checksum is not xxh3-64 of the bytes before it "
        "(the envelope layout changed; update this test)"
    )
    if len(blob) <= header_end:
        return blob[:_PREAMBLE], body, None
    first = freight.inspect(blob)["frames"][0]
    frames = _Frames(blob[first["offset"] :])
    frames.align = _ALIGN if first["offset"] % _ALIGN == 0 and first["length"] >= 4096 else 16
    return blob[:_PREAMBLE], body, frames


def _join(preamble: bytes, body: bytes, frames: bytes | None = None) -> bytes:
    head = preamble + _uvarint(len(body)) + body
    out = head + xxh3_64(head).to_bytes(8, "little")
    if frames is not None:
        align = getattr(frames, "align", _ALIGN)
        out += bytes(_align_up(len(out), align) - len(out)) + frames
    return out


def test_pure_python_xxh3_matches_freight_header_checksums():
    """The fixture used to forge headers below reproduces the checksums freight writes."""
    assert xxh3_64(b"") == 0x2D06800538D394C2  # published test vector
    for name in PAYLOAD_NAMES:
        blob = _payload(name)
        preamble, body, rest = _split(blob)
        assert _join(preamble, body, rest) == blob


def _count_claims() -> list[tuple[str, bytes]]:
    """Payloads whose tree claims a huge element count or byte length, with valid checksums.

    Found without knowing node encodings: the first header byte where the payloads of two
    values that differ by one element (or one byte) differ is that count."""
    pairs = {
        "list": ([None] * 3, [None] * 4),
        "tuple": ((None,) * 3, (None,) * 4),
        "dict": ({0: None, 1: None, 2: None}, {0: None, 1: None, 2: None, 3: None}),
        "set": ({0, 1, 2}, {0, 1, 2, 3}),
        "str": ("abc", "abcd"),
        "bytes": (b"abc", b"abcd"),
        "bigint": (2**100, 2**108),
        "decimal": (Decimal("1.5"), Decimal("1.55")),
    }
    claims = []
    for kind, (small, bigger) in pairs.items():
        pre_a, body_a, rest_a = _split(freight.dumps(small))
        _, body_b, _ = _split(freight.dumps(bigger))
        i = next(i for i, (x, y) in enumerate(zip(body_a, body_b)) if x != y)
        assert body_b[i] == body_a[i] + 1 and body_a[i] < 0x7F, (
            f"test assumption broken for {kind}: the first difference is not a one-byte count"
        )
        for huge in (10**8, 2**31, 2**40, 2**62, 2**64 - 1):
            forged = _join(pre_a, body_a[:i] + _uvarint(huge) + body_a[i + 1 :], rest_a)
            claims.append((f"{kind} claiming {huge}", forged))
    # A frame table entry claiming a huge frame.
    pre_a, body_a, rest_a = _split(freight.dumps(np.zeros(3)))
    _, body_b, _ = _split(freight.dumps(np.zeros(4)))
    i = next(i for i, (x, y) in enumerate(zip(body_a, body_b)) if x != y)
    for huge in (2**31, 2**39, 2**62):
        claims.append((f"frame length {huge}", _join(pre_a, body_a[:i] + _uvarint(huge) + body_a[i + 1 :], rest_a)))
    # Array shapes that disagree with their frame, or whose element count overflows.
    for small, bigger in (
        (np.zeros(3), np.zeros(4)),
        (np.zeros((0, 3)), np.zeros((0, 4))),
        (np.zeros((2, 3)), np.zeros((2, 4))),
    ):
        pre_a, body_a, rest_a = _split(freight.dumps(small))
        _, body_b, _ = _split(freight.dumps(bigger))
        assert len(body_a) == len(body_b)
        spots = [i for i, (x, y) in enumerate(zip(body_a, body_b)) if (x, y) == (3, 4)]
        assert spots, "test assumption broken: no shape entry found"
        for i in spots:
            # (0, 2**31) is a valid empty array; the larger claims are more than numpy can hold.
            for huge in (2**31, 2**62, 2**64 - 1) if small.size else (2**62, 2**64 - 1):
                forged = _join(pre_a, body_a[:i] + _uvarint(huge) + body_a[i + 1 :], rest_a)
                claims.append((f"array {small.shape} with a dimension of {huge}", forged))
    # The header length itself (no checksum involved: the reader must not trust it).
    blob = freight.dumps([1, 2, 3])
    _, body_start = _read_uvarint(blob, _PREAMBLE)
    for huge in (2**30, 2**33, 2**34 - 1, 2**62):
        claims.append((f"header length {huge}", blob[:_PREAMBLE] + _uvarint(huge) + blob[body_start:]))
    return claims


_MEMORY_PROBE = textwrap.dedent(
    """
    import json, resource, sys, tracemalloc
    import freight

    with open(sys.argv[1]) as fh:
        cases = json.load(fh)
    tracemalloc.start()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = []
    for desc, hexdata in cases:
        data = bytes.fromhex(hexdata)
        tracemalloc.reset_peak()
        try:
            freight.loads(data)
            outcome = "loaded"
        except freight.DeserializationError as exc:
            outcome = "DeserializationError"
        except BaseException as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        peak = tracemalloc.get_traced_memory()[1]
        report.append([desc, outcome, peak])
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rss_growth_kib": after - before, "report": report}))
    """
)


@pytest.mark.timeout(300)
def test_huge_claims_do_not_allocate(tmp_path):
    claims = _count_claims()
    cases_file = tmp_path / "cases.json"
    cases_file.write_text(json.dumps([[desc, data.hex()] for desc, data in claims]))
    script = tmp_path / "probe.py"
    script.write_text(_MEMORY_PROBE)
    proc = subprocess.run(
        [sys.executable, str(script), str(cases_file)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"the decoder crashed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    bad = [(d, o) for d, o, _ in result["report"] if o != "DeserializationError"]
    assert not bad, f"forged payloads did not raise DeserializationError: {bad}"
    hungry = [(d, peak) for d, _, peak in result["report"] if peak > 32 * 2**20]
    assert not hungry, f"Python-side allocations over 32 MiB for forged payloads: {hungry}"
    assert result["rss_growth_kib"] < 100 * 1024, f"peak RSS grew by {result['rss_growth_kib']} KiB"
