"""The codec's Python face: ``Freight.dumps`` & co. are the Rust methods themselves (Freight
subclasses the extension's Codec), so ``help()`` and the API reference show their own
signatures and docstrings, and a call adds no Python frame. The stubs carry the same
docstrings as the extension, so the two cannot drift apart."""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

import pytest

import freight
from freight._freight import Codec

METHODS = ["dumps", "loads", "dumps_frames", "loads_frames"]
STUBS = Path(freight.__file__).with_name("_freight.pyi")


def _stub_docstrings() -> dict[str, str]:
    tree = ast.parse(STUBS.read_text())
    (codec,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Codec"]
    return {
        node.name: ast.get_docstring(node) or ""
        for node in codec.body
        if isinstance(node, ast.FunctionDef) and ast.get_docstring(node)
    }


@pytest.mark.parametrize("name", METHODS)
def test_freight_methods_are_the_codecs_own(name):
    assert getattr(freight.Freight, name) is getattr(Codec, name)
    assert name not in vars(freight.Freight) and name not in vars(freight.Freight())


@pytest.mark.parametrize("name", METHODS)
def test_help_shows_the_signature_and_the_docstring(name):
    method = getattr(freight.Freight, name)
    signature = inspect.signature(method)
    assert list(signature.parameters)[:2] == [
        "self",
        "obj" if name.startswith("dumps") else ("data" if name == "loads" else "frames"),
    ]
    assert "Codec" not in (method.__doc__ or "")
    assert method.__doc__ and len(method.__doc__.splitlines()) >= 3, method.__doc__


@pytest.mark.parametrize("name", [*METHODS, "_dumps_parts"])
def test_the_stubs_carry_the_extensions_docstrings(name):
    assert inspect.cleandoc(getattr(Codec, name).__doc__) == _stub_docstrings()[name]


def test_a_call_adds_no_python_frame():
    """The frames between the caller and pickle's call of ``__reduce__`` are the same whether the
    Rust method is called directly or through ``Freight``/``freight.dumps``."""
    depths = []

    class Probe:
        def __reduce__(self):
            frame, depth = sys._getframe(), 0
            while frame is not None and frame.f_code.co_name != "test_a_call_adds_no_python_frame":
                frame, depth = frame.f_back, depth + 1
            depths.append(depth)
            return (int, (1,))

    f = freight.Freight()
    Codec.dumps(f, Probe())
    f.dumps(Probe())
    freight.dumps(Probe())
    assert len(set(depths)) == 1, depths


def test_a_subclass_made_the_usual_way_still_works():
    class Tuned(freight.Freight):
        def __init__(self, **options):
            super().__init__(**options)
            self.label = "tuned"

    f = Tuned(compression="lz4")
    assert f.label == "tuned" and f.options.compression == "lz4"
    assert f.loads(f.dumps([1, 2])) == [1, 2]
    assert "allow_pickle" in inspect.signature(freight.Freight).parameters
