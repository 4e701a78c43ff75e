"""Every golden payload ever written still decodes, to what its case builds today.

The files under tests/golden/v*/ are a record of what earlier builds wrote; this test must keep
passing forever (a format change that breaks it needs a new format version, not new files)."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

import freight
from cases import CASES, PointSerializer
from support import GOLDEN

FILES = sorted(GOLDEN.glob("v*/*.frt"))


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


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_golden_payload_decodes(path: pathlib.Path):
    codec = freight.Freight()
    codec.register(PointSerializer())
    data = path.read_bytes()
    got = codec.loads(data)
    assert_same(got, CASES[path.stem]())
    info = freight.inspect(data)
    assert all(frame["checksum_ok"] for frame in info["frames"])
    # What needs pickle says so in the header, and refuses to load without it.
    if info["needs_pickle"]:
        with pytest.raises(freight.UnsafePayloadError):
            codec.loads(data, allow_pickle=False)
    else:
        assert_same(codec.loads(data, allow_pickle=False), CASES[path.stem]())


def test_golden_cyclic_case_keeps_its_cycle():
    data = (GOLDEN / "v1" / "nested_containers.frt").read_bytes()
    got = freight.loads(data)
    assert got["cyclic"][1] is got["cyclic"]
    assert got["shared"][0] is got["shared"][1]
