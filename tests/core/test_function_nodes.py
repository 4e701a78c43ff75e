"""Functions made at run time as freight nodes (issue 34, freight._functions): a lambda or closure
whose closure, defaults and globals hold plain values is written as one Ext node (tag
``builtins.function``) instead of a pickle island, and loads back behaving as the original; the
rest (recursive closures, local functions calling each other, dynamic classes, values that are
not plain) keep cloudpickle's path."""

from __future__ import annotations

import copy
import fractions
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import freight
from freight import _functions

TAG = "builtins.function"


def _round_trip(fn, **options):
    data = freight.dumps(fn)
    return data, freight.loads(data, **options)


def _is_node(data) -> bool:
    info = freight.inspect(data)
    return TAG in info["tags"] and info["tree"]["pickle_nodes"] == 0


def _made():
    offset, table = 7, list(range(100))
    weights = np.arange(1000.0)

    def lookup(i: int, scale: float = 2.0, *, shift: int = 0) -> float:
        """Looks i up."""
        return table[i % len(table)] * scale + offset + shift + float(weights[i] if i < 1000 else 0) + math.floor(0.5)

    lookup.note = {"kind": "lookup"}
    return lookup


def test_a_closure_is_one_node_and_behaves_as_the_original():
    fn = _made()
    data, got = _round_trip(fn)
    assert _is_node(data)
    assert [got(i) for i in (0, 3, 99)] == [fn(i) for i in (0, 3, 99)]
    assert got(5, 3.0, shift=1) == fn(5, 3.0, shift=1)
    assert got.__name__ == "lookup" and got.__qualname__ == fn.__qualname__ and got.__module__ == fn.__module__
    assert got.__doc__ == "Looks i up." and got.__defaults__ == (2.0,) and got.__kwdefaults__ == {"shift": 0}
    assert got.__annotations__ == fn.__annotations__ and got.note == {"kind": "lookup"}
    assert got.__globals__["math"] is math  # a module global, imported on this side
    # the array in the closure travels as a frame, not inside the node's metadata
    assert freight.inspect(data)["frames"][0]["length"] == 8000


def test_lambdas_nested_code_generators_and_empty_cells():
    k = 3
    nested = lambda xs: [x * k for x in xs if x is not ...]  # noqa: E731 - comprehension, Ellipsis constant

    def gen(n):
        yield from (i * k for i in range(n))

    def late():
        return later

    data, got = _round_trip(nested)
    assert _is_node(data) and got([1, 2, ...]) == [3, 6]
    data, got = _round_trip(gen)
    assert _is_node(data) and list(got(3)) == [0, 3, 6]
    data, got = _round_trip(late)  # `later` is not assigned yet: an empty cell
    assert _is_node(data)
    with pytest.raises(NameError):
        got()
    later = 1
    assert late() == later


def test_the_same_function_twice_is_one_function_and_globals_are_shared():
    f = lambda x: x + 1  # noqa: E731
    g = lambda: COUNTER["n"]  # noqa: E731
    got = freight.loads(freight.dumps({"a": f, "b": [f], "g": g, "h": _bump}))
    assert got["a"] is got["b"][0]
    # functions of one module share one rebuilt globals dict, as with cloudpickle
    assert got["g"].__globals__ is got["a"].__globals__


COUNTER = {"n": 0}


def _bump():
    return None


def test_a_global_written_by_one_function_is_seen_by_the_other():
    data = freight.dumps([_writer(), _reader()])
    writer, reader = freight.loads(data)
    writer(5)
    assert reader() == 5


def _writer():
    def write(v):
        global SHARED_VALUE
        SHARED_VALUE = v

    return write


def _reader():
    return lambda: SHARED_VALUE


SHARED_VALUE = 0


def test_what_the_node_cannot_hold_keeps_cloudpickles_path():
    half = fractions.Fraction(1, 2)

    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    def helper(x):
        return x + 1

    def calls_helper(x):
        return helper(x) * 2

    class Local:
        pass

    make_local = lambda: Local()  # noqa: E731
    for fn, probe in ((lambda: half, None), (fact, 5), (calls_helper, 1), (make_local, None)):
        data, got = _round_trip(fn)
        info = freight.inspect(data)
        assert TAG not in info["tags"] and info["tree"]["pickle_nodes"] == 1
        if probe is not None:
            assert got(probe) == fn(probe)
    assert isinstance(make_local(), Local)


def test_importable_functions_stay_references():
    data = freight.dumps(math.floor)
    assert TAG not in freight.inspect(data)["tags"]
    assert freight.loads(data) is math.floor
    assert _functions.native(_bump) is None  # found by name in its module


def test_allow_pickle_false_refuses_the_node():
    data = freight.dumps(_made())
    assert freight.inspect(data)["needs_pickle"]
    with pytest.raises(freight.UnsafePayloadError, match=TAG):
        freight.loads(data, allow_pickle=False)


def test_same_bytes_every_time_and_in_other_processes():
    first = freight.dumps(_made())
    assert freight.dumps(_made()) == first
    code = (
        "import sys, freight; sys.path.insert(0, sys.argv[1]); import test_function_nodes as t; "
        "sys.stdout.buffer.write(freight.dumps(t._made()))"
    )
    here = os.path.dirname(os.path.abspath(__file__))
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code, here],
            capture_output=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1 and TAG.encode() in outputs.pop()


def test_another_python_version_is_refused_with_what_to_do():
    # a copy: the encoder's metadata holds the module's shared base dict, which rebuild changes
    meta = copy.deepcopy(_functions.native(_made())[0])
    forged = ([3, 99], *meta[1:])
    with pytest.raises(freight.ProducerVersionError, match="Python 3.99"):
        _functions.rebuild(forged, [])


def test_malformed_metadata_is_a_deserialization_error():
    meta = copy.deepcopy(_functions.native(lambda: 1)[0])
    for bad in ((meta[0], {"co_code": 3}, *meta[2:]), meta[:5], (meta[0], meta[1], 5, *meta[3:])):
        with pytest.raises(freight.DeserializationError):
            _functions.rebuild(copy.deepcopy(bad), [])
    broken = list(meta)
    broken[12] = {"np": ("m", "no_such_module_freight")}
    with pytest.raises(freight.DeserializationError, match="install it"):
        _functions.rebuild(tuple(broken), [])


def test_mutated_metadata_gives_a_function_or_a_deserialization_error():
    # Seeded: each field (and an item of the code's fields) replaced by a value of another kind,
    # or the tuple cut short; never an exception other than DeserializationError.
    import random

    rng = random.Random(0)
    base = _functions.native(_made())[0]
    kinds = [None, 0, -1, 2**70, 1.5, "", b"\x00", (), [], {}, ("v",), ("m", "os", ()), ("r", "os", "path"), ("q",)]
    for _ in range(2000):
        meta = list(copy.deepcopy(base))
        at = rng.randrange(len(meta))
        if isinstance(meta[at], list) and meta[at] and rng.random() < 0.5:
            meta[at][rng.randrange(len(meta[at]))] = rng.choice(kinds)
        else:
            meta[at] = rng.choice(kinds)
        if rng.random() < 0.1:
            meta = meta[: rng.randrange(len(meta))]
        try:
            _functions.rebuild(tuple(meta), [])
        except freight.DeserializationError:
            pass
