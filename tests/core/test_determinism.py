"""The same value and options give the same bytes in any process: whatever else holds
references to the value's parts, whatever the process's hash seed, however busy the machine.

Each property encodes values here and in a child process that received them by pickle (which
keeps their aliasing), runs with another hash seed and, in one mode, holds an extra reference
to every part of every value; the payloads must be equal byte for byte, and still decode to the
value with its aliasing.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

import freight

CHILD = textwrap.dedent(
    """
    import pickle, sys
    import numpy as np
    import freight

    held = []

    def hold(obj, seen):
        # An extra reference to every part: what a cache or another data structure would hold.
        if id(obj) in seen:
            return
        seen.add(id(obj))
        held.append(obj)
        if isinstance(obj, dict):
            for k, v in obj.items():
                hold(k, seen)
                hold(v, seen)
        elif isinstance(obj, (list, tuple, set, frozenset)):
            for item in obj:
                hold(item, seen)

    values, options, mode = pickle.load(sys.stdin.buffer)
    if mode == "hold":
        seen = set()
        for value in values:
            hold(value, seen)
    out = [freight.dumps(value, **options) for value in values]
    sys.stdout.buffer.write(pickle.dumps(out))
    """
)


def dumps_in_child(values: list, options: dict, mode: str, seed: str) -> list[bytes]:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=pickle.dumps((values, options, mode), protocol=5),
        capture_output=True,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr.decode()
    return pickle.loads(out.stdout)


# --------------------------------------------------------------------------------------------
# Values with shared parts
# --------------------------------------------------------------------------------------------

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=6),
    st.binary(max_size=6),
    st.builds(lambda n, f: np.arange(n, dtype=f), st.integers(0, 5), st.sampled_from(["i8", "f4", "u1"])),
)

# Sets whose items Python can order (all str, all int, all bytes): freight writes them sorted.
sets = st.one_of(
    st.sets(st.text(max_size=4), max_size=6),
    st.frozensets(st.integers(-(2**70), 2**70), max_size=6),
    st.sets(st.binary(max_size=4), max_size=6),
)


def extend(children):
    return st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=4), children, max_size=4),
        st.tuples(children, children),
        sets,
        # Aliasing: one object twice, in a list and in a dict.
        children.map(lambda c: [c, c]),
        children.map(lambda c: {"a": c, "b": [c]}),
    )


values = st.recursive(leaves, extend, max_leaves=12)


@settings(max_examples=4)
@given(st.lists(values, min_size=10, max_size=10))
def test_same_bytes_in_another_process_holding_references(batch):
    here = [freight.dumps(value) for value in batch]
    for mode, seed in (("plain", "1"), ("hold", "2")):
        there = dumps_in_child(batch, {}, mode, seed)
        for value, a, b in zip(batch, here, there):
            assert a == b, f"{mode}: different bytes for {value!r}"
    for blob in here:
        # What comes back encodes to the same bytes: the same value, with the same aliasing.
        assert freight.dumps(freight.loads(blob)) == blob


def test_the_issues_three_values_give_one_payload():
    shared = {"k": [1, 2, 3]}
    nested = {"x": shared, "y": [shared, {"z": shared}], "w": ("t", "t")}
    strings = [f"item-{i}" for i in range(50)] + ["a", "a", "b"]
    arrays = {f"a{i}": np.full(1000, i, dtype=np.float64) for i in range(5)}
    batch = [nested, strings, arrays]
    here = [freight.dumps(v) for v in batch]
    extra = [nested["x"], nested["y"], strings[3], strings[10], arrays["a1"], arrays["a3"]]  # noqa: F841
    assert [freight.dumps(v) for v in batch] == here  # extra references here change nothing
    for mode, seed in (("plain", "3"), ("hold", "4")):
        assert dumps_in_child(batch, {}, mode, seed) == here
    got = freight.loads(here[0])
    assert got["x"] is got["y"][0] is got["y"][1]["z"]  # aliasing is still kept exactly


def test_aliasing_is_written_only_where_it_exists():
    a = [1, 2]
    held = [a, a]  # a is referenced from outside the value too  # noqa: F841
    alone = freight.dumps({"v": a})
    assert alone == freight.dumps({"v": [1, 2]})
    twice = freight.loads(freight.dumps([a, a]))
    assert twice[0] is twice[1]


def test_sets_are_written_in_one_order():
    words = [f"w{i}" for i in range(200)]
    forward, backward = set(words), set(reversed(words))
    assert freight.dumps(forward) == freight.dumps(backward)
    assert freight.dumps(frozenset(range(1000))) == freight.dumps(frozenset(reversed(range(1000))))
    assert freight.loads(freight.dumps(forward)) == forward
    # Mixed sets keep their iteration order (sorting them could run user code): still equal values.
    mixed = {1, "a", b"b", 2.5}
    assert freight.loads(freight.dumps(mixed)) == mixed


@pytest.fixture
def busy_cores():
    """Both cores busy with other processes while the test runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for p in procs:
        p.kill()
        p.wait()


def half_noise_half_zeros() -> np.ndarray:
    noise = np.random.default_rng(7).integers(0, 256, 4 << 20, dtype=np.uint8)
    return np.concatenate([noise, np.zeros(4 << 20, np.uint8)])


@pytest.mark.parametrize("compression", ["auto", ("auto", 1e6), ("auto", 1e12)])
def test_auto_decides_from_the_data_alone(busy_cores, compression):
    arr = half_noise_half_zeros()
    ints = np.random.default_rng(3).integers(0, 100, 1 << 18)
    value = {"half": arr, "ints": ints, "floats": np.random.default_rng(1).random(1 << 18)}
    options = {"compression": compression}
    here = freight.dumps(value, **options)
    for seed in ("5", "6"):
        assert dumps_in_child([value], options, "hold", seed) == [here]
    assert all(freight.dumps(value, **options) == here for _ in range(3))
    got = freight.loads(here)
    assert all(np.array_equal(got[k], value[k]) for k in value)


def test_the_transport_speed_is_an_option_not_process_state():
    floats = np.random.default_rng(3).random(1 << 18)  # 2 MiB of random float64: ~12% smaller shuffled

    def codec(blob: bytes) -> str:
        return freight.inspect(blob)["frames"][0]["codec"]

    assert codec(freight.dumps(floats, compression="auto")) == "none"  # 1 GB/s by default
    assert codec(freight.dumps(floats, compression=("auto", 1e6))) == "lz4"  # 1 MB/s: worth it
    slow = freight.Freight(compression=("auto", 1e6))
    assert codec(slow.dumps(floats)) == "lz4"
    assert codec(freight.dumps(floats, compression="auto")) == "none"  # nothing else changed
    assert not hasattr(freight, "set_transport_speed")
    for bad in (0, -5, float("nan"), float("inf"), "fast"):
        with pytest.raises(freight.OptionError, match="bytes per second"):
            freight.dumps(floats, compression=("auto", bad))


@pytest.mark.parametrize(
    "value",
    [None, True, 12345, 2**80, 3.25, "hello, freight", b"raw", (1, "two", 3.0), {f"key{i}": i for i in range(10)},
     [{"id": i, "name": f"user-{i}"} for i in range(50)], frozenset({1, 2})],
)  # fmt: skip
def test_a_value_of_its_tree_alone_is_written_as_any_other(value):
    # `dumps` writes such a payload by a shorter path (no frames, tags or versions): the bytes are
    # those of the general one (`dumps_frames` of the same value), whatever the frame options.
    payload = freight.dumps(value)
    (header,) = freight.dumps_frames(value, checksum=False)  # an option given: the general path
    assert payload == bytes(header)
    assert freight.dumps_frames(value)[0] == payload
    assert freight.dumps(value, compression="zstd", checksum=True) == payload
    assert freight.loads(payload) == value
    with pytest.raises(freight.OptionError):
        freight.dumps(value, compression="snappy")
    with pytest.raises(freight.OptionError):
        freight.dumps(value, checksum="yes")
    # signed: the general path, which the key changes
    assert freight.loads(freight.dumps(value, key=b"k" * 32), key=b"k" * 32) == value


_DUP = "a str held twice"
_KEY = "a key that is also a value"


@pytest.mark.parametrize(
    "value",
    [None, True, False, 0, -1, 2**63 - 1, -(2**63), 2**63, -0.0, 1e308, "", "héllo ✓", "\ud800 lone",
     "x" * 5000, "y" * (64 * 1024), (), [], {}, (1, "two", 3.0), [None, True, -7, 2.5, "s"],
     {"k": "v", "n": None}, tuple(range(32)), tuple(range(33)), list(range(32)), list(range(33)),
     {f"k{i}": i for i in range(32)}, {f"k{i}": i for i in range(33)}, (_DUP, _DUP), [1, _DUP, 2, _DUP],
     {"x": _DUP, "y": _DUP}, {_KEY: 1, "other": _KEY}, {"first": _KEY, _KEY: 2}, ((1,),), [[]], (2**70,),
     ("\udfff",), {1: "int key"}, {"v": b"bytes"}, (1, 2**64)],
)  # fmt: skip
def test_a_small_root_is_written_as_the_walk_writes_it(value):
    # Scalars and flat containers of up to 32 of them are written without the walk (a str held
    # twice, a big int, a nested or larger container fall back to it): the same bytes as the
    # general path (a call with an option), the same value back, a str held twice still one object.
    payload = freight.dumps(value)
    general = freight.dumps_frames(value, checksum=False)  # an option given: the walk
    assert payload == bytes(general[0]) or len(general) > 1
    assert bytes(freight.dumps_frames(value)[0]) == bytes(general[0])
    back = freight.loads(payload)
    assert back == value and type(back) is type(value)
    if isinstance(value, (tuple, list)) and value.count(_DUP) == 2:
        first, second = (x for x in back if x == _DUP)
        assert first is second
    if isinstance(value, dict) and _KEY in value.values():
        keys = [k for k in back if k == _KEY]
        values = [v for v in back.values() if v == _KEY]
        assert keys[0] is values[0]
