"""Every golden payload ever written still decodes, to what its case builds today.

The files under tests/golden/v*/ are a record of what earlier builds wrote; this test must keep
passing forever (a format change that breaks it needs a new format version, not new files).
From format 1.2 on a version's folder has one sub-folder per way of writing (generate.py's SETS:
zstd, signed, signed-zstd); the signed ones, and v1.1-signed (the old signatures: a trailer over
everything), are loaded with the key that signed them, and must refuse any other."""

from __future__ import annotations

import hashlib
import hmac
import math
import pathlib

import numpy as np
import pytest

import freight
from cases import CASES, LATER_CASES, PointSerializer
from generate import GOLDEN_KEY
from support import GOLDEN

FILES = sorted([*GOLDEN.glob("v*/*.frt"), *GOLDEN.glob("v*/*/*.frt")])
ALL_CASES = {**CASES, **LATER_CASES}
WRONG_KEY = b"not-the-golden-key-0123456789abc"


def _signed(path: pathlib.Path) -> bool:
    return "signed" in path.relative_to(GOLDEN).parent.as_posix()


def assert_same(got, want, path="root"):
    assert type(got) is type(want), f"{path}: {type(got)} != {type(want)}"
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype, path
        assert got.shape == want.shape, path
        assert got.flags.writeable == want.flags.writeable, path
        assert got.flags.f_contiguous == want.flags.f_contiguous, path
        assert got.tobytes(order="A") == want.tobytes(order="A"), path
    elif isinstance(want, dict):
        assert list(got.keys()) == list(want.keys()), path
        for key in want:
            assert_same(got[key], want[key], f"{path}[{key!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            if g is got and w is want:  # a self-reference, as in the cyclic case
                continue
            assert_same(g, w, f"{path}[{i}]")
    elif isinstance(want, float) and math.isnan(want):
        assert math.isnan(got), path
    elif isinstance(want, float):
        assert math.copysign(1, got) == math.copysign(1, want) and got == want, path
    else:
        assert got == want or (got != got and want != want), f"{path}: {got!r} != {want!r}"


def test_every_case_has_a_file():
    names = {path.stem for path in GOLDEN.glob("v1/*.frt")}
    assert set(CASES) <= names, f"cases without a golden file: {set(CASES) - names}"


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(GOLDEN).with_suffix("").as_posix() for p in FILES])
def test_golden_payload_decodes(path: pathlib.Path):
    signed = _signed(path)
    codec = freight.Freight(key=GOLDEN_KEY) if signed else freight.Freight()
    codec.register(PointSerializer())
    data = path.read_bytes()
    want = ALL_CASES[path.stem]
    got = codec.loads(data)
    assert_same(got, want())
    info = freight.inspect(data)
    assert all(frame["checksum_ok"] for frame in info["frames"])
    # What needs pickle says so in the header, and refuses to load without it.
    if info["needs_pickle"]:
        with pytest.raises(freight.UnsafePayloadError):
            codec.loads(data, allow_pickle=False)
    else:
        assert_same(codec.loads(data, allow_pickle=False), want())
    assert info["signed"] is signed
    if signed:
        assert freight.inspect(data, key=GOLDEN_KEY)["signature_ok"] is True
        freight.verify(data, key=GOLDEN_KEY)
        # Also with verify=False: a head-signed payload's frames are checked against their
        # signed digests whatever verify says.
        assert_same(codec.loads(data, verify=False), want())
        with pytest.raises(freight.IntegrityError):
            freight.loads(data, key=WRONG_KEY)
        assert freight.inspect(data, key=WRONG_KEY)["signature_ok"] is False


def _sets(version: str) -> dict[str, list[pathlib.Path]]:
    folder = GOLDEN / version
    return {
        sub.name if sub != folder else "": sorted(sub.glob("*.frt"))
        for sub in (folder, *sorted(p for p in folder.iterdir() if p.is_dir()))
    }


def test_the_1_2_sets_are_complete_and_sealed_as_written():
    """Every case in every set of format 1.2, each frame sealed as that format's writers seal it:
    signed, SHA-256 digests over 256 KiB blocks behind a header signature (flag head_signed);
    checksummed, xxh3 digests over 64 KiB blocks for a frame larger than 1 MiB, a plain checksum
    for a smaller one."""
    sets = _sets("v1.2")
    assert set(sets) == {"", "zstd", "signed", "signed-zstd"}
    # Every set holds the same cases: the cases of v1.1, and the ones added with format 1.2.
    names = {p.stem for p in sets[""]}
    assert names >= {p.stem for p in (GOLDEN / "v1.1").glob("*.frt")} | set(LATER_CASES)
    big_xxh3 = 0
    for name, paths in sets.items():
        assert {p.stem for p in paths} == names, name
        for path in paths:
            info = freight.inspect(path.read_bytes())
            assert ("head_signed" in info["flags"]) is name.startswith("signed"), path
            for frame in info["frames"]:
                if name.startswith("signed"):
                    assert frame["digests"] == ("sha256", 1 << 18), path
                    assert frame["checksum"] is None, path
                elif frame["stored_length"] > 1 << 20:
                    assert frame["digests"] == ("xxh3", 1 << 16), path
                    big_xxh3 += 1
                else:
                    assert frame["digests"] is None and frame["checksum"] is not None, path
    # The large case is sealed by digests both stored and compressed (zstd keeps it over 1 MiB).
    assert big_xxh3 == 2
    zstd = freight.inspect((GOLDEN / "v1.2" / "zstd" / "digested_frames.frt").read_bytes())
    assert zstd["frames"][0]["codec"] == "zstd"


def test_the_old_signatures_still_load_and_refuse_any_change():
    """v1.1-signed: the format 1.0 signature (a trailer over every byte before it) of the v1.1
    payloads, as the signing writers of 1.0 and 1.1 wrote them: loaded whole, in both layouts,
    with the key; any changed, dropped or added byte is refused."""
    old = sorted((GOLDEN / "v1.1-signed").glob("*.frt"))
    assert {p.stem for p in old} == {p.stem for p in (GOLDEN / "v1.1").glob("*.frt")}
    for path in old:
        data = path.read_bytes()
        info = freight.inspect(data)
        assert "signed" in info["flags"] and "head_signed" not in info["flags"], path
        # The same payload as v1.1's, flag and trailer aside.
        plain = (GOLDEN / "v1.1" / path.name).read_bytes()
        assert len(data) == len(plain) + 32
        assert freight.inspect(plain)["frames"] == info["frames"]
        for pos in (5, len(data) // 2, len(data) - 33, len(data) - 1):
            bad = bytearray(data)
            bad[pos] ^= 0x01
            with pytest.raises(freight.IntegrityError):
                freight.loads(bytes(bad), key=GOLDEN_KEY)
        for bad in (data[:-1], data + b"\0", plain):
            with pytest.raises(freight.IntegrityError):
                freight.loads(bad, key=GOLDEN_KEY)
        if info["needs_pickle"] or info["tags"]:
            continue  # the list layout below is built from the frames alone
        # The list layout of 1.0: header, one buffer per frame, the signature last.
        parts = [data[: info["header_length"]]]
        parts += [data[f["offset"] : f["offset"] + f["stored_length"]] for f in info["frames"]]
        if info["frames"]:
            parts.append(hmac.new(GOLDEN_KEY, b"".join(parts), hashlib.sha256).digest())
            assert_same(freight.loads_frames(parts, key=GOLDEN_KEY), CASES[path.stem]())
            with pytest.raises(freight.IntegrityError):
                freight.loads_frames(parts[:-1], key=GOLDEN_KEY)


def test_golden_cyclic_case_keeps_its_cycle():
    data = (GOLDEN / "v1" / "nested_containers.frt").read_bytes()
    got = freight.loads(data)
    assert got["cyclic"][1] is got["cyclic"]
    assert got["shared"][0] is got["shared"][1]
