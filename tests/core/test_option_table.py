"""The codec's options are declared once (freight._options.OPTIONS); tools/check_options.py,
which `make lint` runs, finds any place that disagrees: the extension's signatures, the stubs,
FreightOptions, Freight's signature and defaults, the docs' options table."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from freight._options import OPTIONS, Option, taken_by
from support import ROOT

spec = importlib.util.spec_from_file_location("check_options", ROOT / "tools" / "check_options.py")
check_options = importlib.util.module_from_spec(spec)
sys.modules["check_options"] = check_options
spec.loader.exec_module(check_options)


def test_every_place_agrees_with_the_declaration():
    assert check_options.problems() == []


def test_an_option_declared_but_missing_elsewhere_is_reported_in_each_place():
    found = check_options.problems(options=(*OPTIONS, Option("colour", "dumps", None)))
    places = {line.split(":")[0] for line in found if "'colour'" in line}
    assert any(p.startswith("crates/freight-py/src/call_options.rs Codec.dumps ") for p in places), found
    assert any(p.startswith("crates/freight-py/src/codec.rs Codec.__new__ ") for p in places), found
    assert "python/freight/_freight.pyi Codec.dumps" in places, found
    assert "freight.FreightOptions" in places, found
    assert "freight.Freight's signature" in places, found
    assert "docs/guide/options.md's options table" in places, found


def test_an_option_the_docs_give_to_the_wrong_calls_is_reported():
    docs = check_options.DOCS.read_text().replace("| `checksum` | `dumps` |", "| `checksum` | `loads` |")
    found = check_options.problems(docs=docs)
    assert any("'checksum' is an option of 'loads' there" in line for line in found), found


def test_an_option_the_stubs_leave_out_is_reported():
    stubs = check_options.STUBS.read_text().replace("strict_versions: bool | None = None,\n        copy", "copy", 1)
    found = check_options.problems(stubs=stubs)
    assert any(
        line.startswith("python/freight/_freight.pyi Codec.loads:") and "'strict_versions'" in line for line in found
    ), found


@pytest.mark.parametrize("call", ["dumps", "loads"])
def test_taken_by_lists_what_the_codec_takes(call):
    from freight._freight import Codec

    assert set(taken_by(call)) == set(check_options._keywords(getattr(Codec, call).__text_signature__))
