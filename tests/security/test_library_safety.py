"""The safe flags of freight's serializers for data libraries: every one declares whether loading
it can run arbitrary code, and a payload made only of the libraries' values (no object columns,
no whole modules) loads with ``allow_pickle=False``; one that needs pickle is refused. Also
the seed documents' examples, reproduced as tests of freight's behaviour."""

from __future__ import annotations

import collections
import dataclasses
import io
import pickle

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
import scipy.sparse as sp
import tensorflow as tf
import torch
import xarray as xr

import freight
from freight.registry import _LIBRARIES, BUILTINS, _register_module

# What loads code: a polars plan (polars unpickles the Python functions it holds) and freight's
# node for a function made at run time (its code object is rebuilt from the payload).
UNSAFE = {"polars.LazyFrame", "builtins.function"}


def one_of_each() -> dict[str, object]:
    """A value of every kind freight's library serializers cover, none needing pickle."""
    frame = pd.DataFrame(
        {
            "i": np.arange(4),
            "when": pd.date_range("2026", periods=4, tz="Asia/Tokyo"),
            "kind": pd.Categorical(list("abab")),
            "text": ["w", "x", None, "z"],
            "n": pd.array([1, None, 3, 4], dtype="Int64"),
        },
        index=pd.MultiIndex.from_product([["a", "b"], [1, 2]]),
    )
    model = torch.nn.Linear(3, 2)
    return {
        "numpy": np.arange(12.0).reshape(3, 4).T,
        "pandas": frame,
        "series": frame["when"],
        "index": pd.CategoricalIndex(list("xyx")),
        "polars": pl.DataFrame({"a": [1, 2], "s": [{"x": 1}, {"x": 2}], "l": [[1], []]}),
        "arrow": pa.table({"a": [1, 2, None]}, metadata={b"k": b"v"}),
        "arrow_parts": [pa.array(["a", None]), pa.chunked_array([[1], [2, 3]]), pa.schema([("x", pa.int8())])],
        "torch": [torch.ones(2, 3, dtype=torch.bfloat16), torch.eye(3).to_sparse_coo()],
        "state_dict": model.state_dict(),
        "tensorflow": [tf.ones([2]), tf.Variable([1.0]), tf.ragged.constant([[1], []]), tf.sparse.eye(2)],
        "xarray": xr.Dataset({"v": (("x",), np.arange(3.0))}, coords={"x": [10, 20, 30]}, attrs={"units": "m"}),
        "scipy": [
            sp.random(5, 5, density=0.3, format=f, random_state=0) for f in ("csr", "csc", "coo", "bsr", "dia", "lil")
        ],
        "ordered": collections.OrderedDict(a=1),
    }


def test_every_library_serializer_declares_whether_it_is_safe():
    for module, _extra in _LIBRARIES.values():
        _register_module(module)  # imports it and registers its SERIALIZERS
    entries = list(BUILTINS._by_tag.values())
    assert {entry.tag.split(".")[0] for entry in entries} == set(_LIBRARIES)
    for entry in entries:
        declared = [klass for klass in type(entry.serializer).__mro__ if "safe" in vars(klass)]
        assert declared, f"{entry.tag} does not declare safe"
        assert entry.safe is (entry.tag not in UNSAFE), f"{entry.tag}: safe={entry.safe}"


def test_a_payload_of_every_library_loads_without_pickle():
    values = one_of_each()
    blob = freight.dumps(values)
    info = freight.inspect(blob)
    assert not info["needs_pickle"] and info["tree"]["pickle_nodes"] == 0
    tops = {tag.split(".")[0] for tag in info["tags"]}
    assert {"pandas", "polars", "pyarrow", "torch", "tensorflow", "xarray", "scipy", "collections"} <= tops
    back = freight.loads(blob, allow_pickle=False)
    pd.testing.assert_frame_equal(back["pandas"], values["pandas"])
    assert back["polars"].equals(values["polars"])
    assert back["arrow"].equals(values["arrow"]) and back["arrow"].schema.metadata == {b"k": b"v"}
    assert torch.equal(back["torch"][1].to_dense(), torch.eye(3))
    assert all(torch.equal(back["state_dict"][k], v) for k, v in values["state_dict"].items())
    assert back["tensorflow"][2].to_list() == [[1], []]
    assert back["xarray"].identical(values["xarray"])
    assert all((a != b).nnz == 0 for a, b in zip(back["scipy"], values["scipy"]))


@dataclasses.dataclass
class Experiment:
    name: str
    inputs: dict[str, object]
    again: object = None


def test_every_library_inside_a_dataclass_keeps_its_serializer_and_identity():
    values = one_of_each()
    exp = Experiment("run-1", values, again=values["pandas"])
    blob = freight.dumps(exp)
    info = freight.inspect(blob)
    assert info["needs_pickle"]  # the dataclass itself
    tops = {tag.split(".")[0] for tag in info["tags"]}
    assert {"pandas", "polars", "pyarrow", "torch", "tensorflow", "xarray", "scipy", "collections"} <= tops
    back = freight.loads(blob)
    assert type(back) is Experiment and back.again is back.inputs["pandas"]
    pd.testing.assert_frame_equal(back.inputs["pandas"], values["pandas"])
    assert back.inputs["polars"].equals(values["polars"])
    assert torch.equal(back.inputs["torch"][0], values["torch"][0])
    assert back.inputs["tensorflow"][1].numpy().tolist() == [1.0]
    assert back.inputs["xarray"].identical(values["xarray"])


@pytest.mark.parametrize(
    "value",
    [
        pd.DataFrame({"objects": [object(), 1]}),
        pd.Series([{"a": 1}, None]),
        torch.nn.Linear(2, 2),
        pd.arrays.SparseArray(["a", None, None]),
    ],
    ids=["object column", "object series", "whole module", "sparse object array"],
)
def test_payloads_that_need_pickle_are_refused_without_it(value):
    blob = freight.dumps({"inside": [value]})
    assert freight.inspect(blob)["needs_pickle"]
    with pytest.raises(freight.UnsafePayloadError):
        freight.loads(blob, allow_pickle=False)
    freight.loads(blob)  # and load when pickle is allowed


def test_dask_collections_keep_their_graph_and_need_pickle():
    import dask.array as da

    x = da.arange(10, chunks=5) * 2
    blob = freight.dumps(x)
    assert freight.inspect(blob)["needs_pickle"]
    with pytest.raises(freight.UnsafePayloadError):
        freight.loads(blob, allow_pickle=False)
    assert np.array_equal(freight.loads(blob).compute(), np.arange(10) * 2)


def test_proxystore_seed_example_a_10000_by_10000_array():
    """ProxyStore's issue compares numpy.save with its pickle-based serialize on
    numpy.random.rand(10000, 10000). freight: no pickle, the payload is the array's bytes plus a
    small header (no larger than numpy.save's), the values come back exactly, and the
    zero-copy forms view the array's memory instead of copying 800 MB."""
    x = np.random.default_rng(591).random((10_000, 10_000))
    saved = io.BytesIO()
    np.save(saved, x)
    pickled_size = len(pickle.dumps(x, protocol=5))

    blob = freight.dumps(x)
    info = freight.inspect(blob)
    assert not info["needs_pickle"]
    assert x.nbytes < len(blob) <= min(saved.tell(), pickled_size)
    assert len(blob) - x.nbytes < 4096
    back = freight.loads(blob, allow_pickle=False)
    assert back.dtype == x.dtype and back.shape == x.shape and np.array_equal(back, x)
    del back, blob

    frames = freight.dumps_frames(x)
    assert np.frombuffer(frames[-1], dtype=np.uint8).__array_interface__["data"][0] == x.__array_interface__["data"][0]
    view = freight.loads_frames(frames, zero_copy=True)
    assert view.__array_interface__["data"][0] == x.__array_interface__["data"][0]
    assert np.array_equal(view[-1], x[-1])
