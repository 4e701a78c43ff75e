"""The producer-version policy (freight._versions): another major version of a library a payload
uses, or pickle from another Python minor version, gives a FreightWarning naming both versions,
or a ProducerVersionError under strict_versions=True; minor differences say nothing."""

from __future__ import annotations

import fractions
import sys
import warnings

import pandas as pd
import pytest

import freight
from freight import _versions


@pytest.fixture
def fake_library(monkeypatch):
    """A module "fakelib" whose version a test sets, with a serializer tagged "fakelib.Thing"."""
    import sys
    import types

    module = types.ModuleType("fakelib")
    module.__version__ = "2.4.1"

    class Thing:
        pass

    Thing.__module__ = "fakelib"
    module.Thing = Thing
    monkeypatch.setitem(sys.modules, "fakelib", module)
    monkeypatch.setattr(_versions, "_INSTALLED", {})
    codec = freight.Freight()

    class Serializer:
        tag = "fakelib.Thing"
        types = (Thing,)

        def serialize(self, obj):
            return None, []

        def deserialize(self, meta, frames):
            return Thing()

    codec.register(Serializer())
    return module, codec


def test_same_major_version_says_nothing(fake_library):
    module, codec = fake_library
    blob = codec.dumps(module.Thing())
    assert freight.inspect(blob)["producer"] == {"fakelib": "2.4.1"}
    module.__version__ = "2.9.0"
    _versions._INSTALLED.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(codec.loads(blob), module.Thing)


def test_another_major_version_warns_or_raises_naming_both(fake_library):
    module, codec = fake_library
    blob = codec.dumps(module.Thing())
    module.__version__ = "3.0.0"
    _versions._INSTALLED.clear()
    with pytest.warns(freight.FreightWarning, match=r"fakelib 2\.4\.1.*fakelib 3\.0\.0"):
        codec.loads(blob)
    with pytest.raises(freight.ProducerVersionError, match=r"fakelib 2\.4\.1.*fakelib 3\.0\.0"):
        codec.loads(blob, strict_versions=True)
    strict = freight.Freight(strict_versions=True, registry=codec.registry)
    with pytest.raises(freight.ProducerVersionError):
        strict.loads(blob)


def test_pickle_from_another_python_minor_version():
    import pickle

    from freight._freight import _envelope

    half = fractions.Fraction(1, 2)
    assert "python" in freight.inspect(freight.dumps(lambda: half))["producer"]  # a pickled closure
    # A pickle node written by "Python 3.2" (the versions this process runs are told apart in
    # Rust, so the payload itself must claim another one).
    data = pickle.dumps(1, protocol=5)
    tree = bytes([0x32, 0, 0]) + bytes([len(data)]) + data + bytes([0, 0])
    blob = _envelope(tree, needs_pickle=True, versions=[("python", "3.2")])
    here = f"Python {sys.version_info.major}.{sys.version_info.minor}"
    with pytest.warns(freight.FreightWarning, match=rf"Python 3\.2.*{here}"):
        assert freight.loads(blob) == 1
    with pytest.raises(freight.ProducerVersionError, match="Python 3.2"):
        freight.loads(blob, strict_versions=True)


def test_real_library_payloads_load_quietly():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = pd.DataFrame({"a": [1]})
        assert freight.loads(freight.dumps(df), strict_versions=True).equals(df)
