"""Pickle islands (issue 34): an object with no native encoding is pickled where the walker meets
it, by one pickler whose memo spans the payload; the rest of the payload stays native. A value
that holds a function is walked once, not once natively and again by pickle and cloudpickle."""

from __future__ import annotations

import dataclasses
import fractions

import numpy as np
import pytest

import freight


class CountsReductions:
    """Counts how often pickle reduces it: once per pickling pass over the payload."""

    reductions = 0

    def __reduce_ex__(self, protocol):
        type(self).reductions += 1
        return (CountsReductions, ())


class AsksAbout:
    """A predicate serializer that accepts nothing and counts the objects it is asked about: the
    walker asks for each object it has no native encoding for, so do the picklers' hooks."""

    tag = "test.asks-about"

    def __init__(self):
        self.asked: list[int] = []

    def supported(self, obj):
        self.asked.append(id(obj))
        return False

    def serialize(self, obj):  # pragma: no cover - supports nothing
        raise AssertionError

    def deserialize(self, meta, frames):  # pragma: no cover
        raise AssertionError


@dataclasses.dataclass
class Holder:
    items: object


def _value(k=3):
    arrays = {f"a{i}": np.arange(1000.0) + i for i in range(4)}
    return {"counter": CountsReductions(), **arrays, "f": lambda x: x * k}


@pytest.mark.parametrize("k", [3, fractions.Fraction(3)], ids=["function node", "function island"])
def test_a_value_holding_a_function_is_walked_once(k):
    CountsReductions.reductions = 0
    value = _value(k)
    data = freight.dumps(value)
    # One pass: before islands, the native walk gave up at the counter, plain pickle reduced it
    # and gave up at the lambda, and cloudpickle reduced it again.
    assert CountsReductions.reductions == 1
    tree = freight.inspect(data)["tree"]
    assert tree["node_tags"]["NdArray"] == 4  # the arrays stay native nodes
    if isinstance(k, int):
        # a lambda over an int is freight's own function node; the counter is an island
        assert tree["pickle_nodes"] == 1 and freight.inspect(data)["tags"] == ["builtins.function"]
    else:
        assert tree["pickle_nodes"] == 2  # the counter and the lambda, each where it was met
    got = freight.loads(data)
    assert got["f"](2) == 6 and type(got["counter"]) is CountsReductions
    assert all(np.array_equal(got[key], value[key]) for key in value if key.startswith("a"))


def test_each_object_is_looked_up_once():
    codec = freight.Freight()
    asks = AsksAbout()
    codec.register(asks)
    value = _value()
    codec.loads(codec.dumps(value))
    # The walker asks about the counter and the lambda once each; the island pickler does not
    # ask again about the object it was handed.
    assert asks.asked.count(id(value["counter"])) == 1
    assert asks.asked.count(id(value["f"])) == 1


def test_islands_share_one_memo():
    half = fractions.Fraction(1, 2)
    f = lambda: half  # noqa: E731
    value = {"half": half, "again": [half, (half,)], "f": f, "g": [f], "n": np.arange(3)}
    got = freight.loads(freight.dumps(value))
    assert got["half"] is got["again"][0] is got["again"][1][0] is got["f"]()
    assert got["f"] is got["g"][0]
    assert freight.inspect(freight.dumps(value))["tree"]["node_tags"]["NdArray"] == 1


def test_an_array_inside_an_island_and_in_the_tree_stays_one_array():
    arr = np.arange(10.0)
    f = lambda: arr  # noqa: E731
    for value in ({"arr": arr, "f": f}, {"f": f, "arr": arr}, [Holder(arr), arr]):
        got = freight.loads(freight.dumps(value))
        if isinstance(got, dict):
            assert got["f"]() is got["arr"]
        else:
            assert got[0].items is got[1]


def test_a_cycle_through_an_island_is_kept():
    d: dict = {"n": [1, 2]}
    d["h"] = Holder(d)
    got = freight.loads(freight.dumps(d))
    assert got["h"].items is got
    lst: list = [1]
    lst.append(Holder(lst))
    got = freight.loads(freight.dumps(lst))
    assert got[1].items is got


def test_islands_inside_tuples_and_sets():
    value = ([fractions.Fraction(1, 3), (fractions.Fraction(2, 3),)], frozenset([fractions.Fraction(1, 5)]))
    got = freight.loads(freight.dumps(value))
    assert got == value


def test_many_islands_round_trip():
    value = {"xs": [fractions.Fraction(i, 7) for i in range(300)], "holders": [Holder(i) for i in range(50)]}
    assert freight.loads(freight.dumps(value)) == value


def test_island_payloads_are_deterministic():
    value = _value()
    assert freight.dumps(value) == freight.dumps(value)
    other = _value()
    assert freight.dumps(other) == freight.dumps(value)


def test_allow_pickle_false_refuses_a_payload_with_islands():
    data = freight.dumps({"x": [1, 2], "f": fractions.Fraction(1, 2)})
    assert freight.inspect(data)["needs_pickle"]
    with pytest.raises(freight.UnsafePayloadError):
        freight.loads(data, allow_pickle=False)


def test_a_failure_inside_an_island_says_where_as_before():
    class Refuses:
        def __reduce__(self):
            raise ValueError("the object refuses")

    with pytest.raises(ValueError, match="the object refuses") as info:
        freight.dumps({"data": np.arange(3), "nested": [Refuses()]})
    assert any("freight pickled" in note for note in info.value.__notes__)
