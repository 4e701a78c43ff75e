"""Gadgets: payloads that would run code if unpickled (os.system, builtins.eval,
subprocess.Popen, a class whose __setstate__ has effects), at every level a payload can hold
pickle. With ``allow_pickle=False`` every one is refused before anything runs, which a canary
file proves; forging the header so that it hides the pickle does not help."""

from __future__ import annotations

import builtins
import os
import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import freight
from freight._freight import _envelope
from freight.exceptions import UnsafePayloadError
from support.wire import uvarint


class Effect:
    """Unpickling it writes the canary (through __setstate__)."""

    def __init__(self, canary: str):
        self.canary = canary

    def __getstate__(self):
        return {"canary": self.canary}

    def __setstate__(self, state):
        with open(state["canary"], "w") as fh:
            fh.write("ran")


class Reducer:
    """Unpickling it calls ``call(*args)``."""

    def __init__(self, call, args):
        self.call, self.args = call, args

    def __reduce__(self):
        return self.call, self.args


def _gadgets(canary: str) -> dict:
    return {
        "os.system": Reducer(os.system, (f"touch {canary}",)),
        "builtins.eval": Reducer(builtins.eval, (f"open({canary!r}, 'w').close()",)),
        "subprocess.run": Reducer(subprocess.run, (["touch", canary],)),
        "__setstate__": Effect(canary),
    }


def _places(gadget) -> dict:
    places = {
        "top level": gadget,
        "in a list": [1, gadget, 3],
        "in a dict of arrays": {"a": np.arange(3), "g": gadget},
        "object-array item": np.array([gadget, 1], dtype=object),
        "pandas object column": pd.DataFrame({"a": [1, 2], "g": [gadget, None]}),
    }
    try:
        import torch

        class Holder(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(2, 2)
                self.extra = gadget

        places["inside a torch module"] = Holder()
    except ImportError:  # pragma: no cover - torch is a test dependency
        pass
    return places


@pytest.mark.parametrize("gadget_name", ["os.system", "builtins.eval", "subprocess.run", "__setstate__"])
def test_every_gadget_at_every_level_is_refused_before_it_runs(tmp_path, gadget_name):
    canary = tmp_path / "canary"
    gadget = _gadgets(str(canary))[gadget_name]
    for where, value in _places(gadget).items():
        blob = freight.dumps(value)
        assert freight.inspect(blob)["needs_pickle"], where
        with pytest.raises(UnsafePayloadError):
            freight.loads(blob, allow_pickle=False)
        with pytest.raises(UnsafePayloadError):
            freight.loads_frames(freight.dumps_frames(value), allow_pickle=False)
        assert not canary.exists(), f"the gadget ran ({where})"
    # The gadget is real: trusted loading runs it.
    freight.loads(freight.dumps(gadget))
    assert canary.exists()


def test_a_polars_lazy_plan_with_a_python_function_is_refused(tmp_path):
    pl = pytest.importorskip("polars")
    canary = tmp_path / "canary"
    plan = pl.LazyFrame({"a": [1]}).select(
        pl.col("a").map_elements(lambda v: os.system(f"touch {canary}") or v, return_dtype=pl.Int64)
    )
    with pytest.raises(UnsafePayloadError):
        freight.loads(freight.dumps(plan), allow_pickle=False)
    assert not canary.exists()


def _pickle_node(stream: bytes) -> bytes:
    """A Pickle node (docs/FORMAT.md): plain pickle, stream inline, no buffers, no externals."""
    return bytes([0x32, 0, 0]) + uvarint(len(stream)) + stream + uvarint(0) + uvarint(0)


@pytest.mark.parametrize("nested", [False, True])
def test_a_header_forged_to_hide_the_pickle_is_still_refused(tmp_path, nested):
    canary = tmp_path / "canary"
    stream = pickle.dumps(_gadgets(str(canary))["os.system"], protocol=5)
    tree = _pickle_node(stream)
    if nested:
        tree = bytes([0x10]) + uvarint(2) + bytes([0x00]) + tree  # [None, <pickle>]
    forged = _envelope(tree, needs_pickle=False)  # valid checksums, NEEDS_PICKLE cleared
    assert freight.inspect(forged)["needs_pickle"] is False
    with pytest.raises(UnsafePayloadError):
        freight.loads(forged, allow_pickle=False)
    assert not canary.exists()


def test_an_unsafe_serializer_tag_with_the_flag_cleared_is_refused():
    forged = _envelope(bytes([0x00]), tags=["polars.LazyFrame"], needs_pickle=False)
    with pytest.raises(UnsafePayloadError, match="polars.LazyFrame"):
        freight.loads(forged, allow_pickle=False)


def test_the_gadgets_run_in_a_child_only_when_trusted(tmp_path):
    """End to end in a fresh interpreter: the refused payload leaves no trace."""
    canary = tmp_path / "canary"
    blob = freight.dumps([_gadgets(str(canary))["os.system"]])
    path = tmp_path / "payload.frt"
    path.write_bytes(blob)
    code = (
        "import freight, sys\n"
        "try:\n    freight.load(sys.argv[1], allow_pickle=False)\n"
        "except freight.UnsafePayloadError:\n    print('REFUSED')\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "REFUSED" and not canary.exists()
