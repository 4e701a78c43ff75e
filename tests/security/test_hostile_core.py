"""Crafted payloads the encoder never writes, and hostile serializers: each must give a clean
freight error (or the right semantics), never a crash, a hang or a huge allocation. Each test
here reproduces a defect found in review; keep them.

Crafted payloads use ``freight._freight._envelope``, which wraps a raw node tree (docs/FORMAT.md)
in a valid envelope with correct checksums.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import subprocess
import sys
import textwrap
import threading
import zoneinfo

import numpy as np
import pytest

import freight
from freight._freight import _envelope
from support.wire import uvarint

NONE, TRUE, INT, STR, FBYTES = 0x00, 0x02, 0x03, 0x07, 0x0B
LIST, TUPLE, DICT, SET, FROZENSET, REF, MEMO, EXT = 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x31


uv = uvarint


def run_isolated(code: str) -> subprocess.CompletedProcess:
    """Runs code in a fresh interpreter, so that a crash fails the test instead of pytest. The
    code gets `uv` and `_envelope`."""
    prelude = (
        "import freight\nfrom freight._freight import _envelope\n"
        "def uv(v):\n    out = bytearray()\n    while v >= 0x80:\n        out.append((v & 0x7F) | 0x80)\n"
        "        v >>= 7\n    out.append(v)\n    return bytes(out)\n"
    )
    return subprocess.run(
        [sys.executable, "-"], input=prelude + textwrap.dedent(code), capture_output=True, text=True, timeout=300
    )


class Box:
    def __init__(self, items):
        self.items = items


class ShrinkingSerializer:
    """A (buggy) deserializer that empties the list it is given as metadata."""

    tag = "test.shrinking"
    types = (Box,)

    def serialize(self, box):
        return box.items, []

    def deserialize(self, meta, frames):
        meta.clear()
        return Box(meta)


def test_a_deserializer_that_shrinks_a_list_being_decoded_gets_an_error_not_a_crash():
    codec = freight.Freight()
    codec.register(ShrinkingSerializer())
    # A memoized 3-item list whose first item is an Ext whose metadata is the list itself.
    tree = bytes([MEMO, LIST, 3, EXT, 0, REF, 0, 0, INT, 4, INT, 8])
    with pytest.raises(freight.DeserializationError, match="changed size"):
        codec.loads(_envelope(tree, tags=["test.shrinking"]), allow_pickle=False)


def test_one_frame_referenced_many_times_is_refused():
    # 4000 references to one 1 MiB frame would expand to 4 GiB of bytes objects.
    tree = bytes([LIST]) + uv(4000) + bytes([FBYTES, 0]) * 4000
    with pytest.raises(freight.DeserializationError, match="more than one node"):
        freight.loads(_envelope(tree, frames=[bytes(1 << 20)]))


def test_nested_counts_cannot_add_up_to_a_large_allocation():
    # Each tuple claims all the bytes that remain: without accounting for what enclosing
    # containers were promised, preallocation grows with the square of the input.
    result = run_isolated(
        f"""
        import resource
        n = 10_000
        tree = b"".join(bytes([{TUPLE}]) + uv(4 * n) for _ in range(n))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            freight.loads(_envelope(tree))
        except freight.DeserializationError as exc:
            print("refused:", exc)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print("grown KiB", grown)
        assert grown < 200 * 1024, grown
        """
    )
    assert result.returncode == 0, result.stderr
    assert "refused" in result.stdout


def test_deep_tuples_as_set_items_do_not_overflow_the_c_stack():
    # CPython hashes nested tuples recursively on the C stack.
    result = run_isolated(
        f"""
        deep = bytes([{SET}, 1]) + bytes([{TUPLE}, 1]) * 150_000 + bytes([{NONE}])
        try:
            freight.loads(_envelope(deep))
        except freight.DeserializationError as exc:
            print("refused:", exc)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "nest deeper than" in result.stdout


def test_a_deep_tuple_key_under_deep_lists_round_trips():
    # Found in review: a 3000-deep tuple hashed while the decoder ran low on stack crashed.
    result = run_isolated(
        """
        t = None
        for _ in range(3000):
            t = (t,)
        obj = {t}
        for _ in range(11_400):
            obj = [obj]
        back = freight.loads(freight.dumps(obj), allow_pickle=False)
        for _ in range(11_400):
            back = back[0]
        assert len(back) == 1
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def test_tuples_deeper_than_the_hashable_limit_are_a_clean_serialization_error():
    t = None
    for _ in range(5000):
        t = (t,)
    # Past freight's native limit they go to pickle, whose own recursion limit stops them.
    with pytest.raises(freight.SerializationError, match="excessively deep recursion"):
        freight.dumps(t)


def test_inspect_and_verify_walk_deep_payloads_without_overflowing(tmp_path):
    deep = bytes([LIST, 1]) * 150_000 + bytes([NONE])
    path = tmp_path / "deep.frt"
    path.write_bytes(_envelope(deep))
    result = run_isolated(
        f"""
        info = freight.inspect(open({str(path)!r}, "rb").read())
        print(info["tree"]["max_depth"])
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "150000"
    verify = subprocess.run(
        [sys.executable, "-m", "freight", "verify", str(path)], capture_output=True, text=True, timeout=300
    )
    assert verify.returncode == 0, verify.stderr


class Keeper:
    def __init__(self, arr):
        self.arr = arr


class KeeperSerializer:
    tag = "test.keeper"
    types = (Keeper,)

    def serialize(self, k):
        return {"arr": k.arr}, []

    def deserialize(self, meta, frames):
        return Keeper(meta["arr"])


@dataclasses.dataclass
class Pair:
    first: object
    second: object


@pytest.mark.parametrize("order", ["array first", "registered first"])
def test_identity_holds_between_a_serializers_metadata_and_the_pickled_graph(order):
    codec = freight.Freight()
    codec.register(KeeperSerializer())
    arr = np.arange(5.0)
    obj = Pair(arr, Keeper(arr)) if order == "array first" else Pair(Keeper(arr), arr)
    back = codec.loads(codec.dumps(obj))  # Pair is not native: the payload is pickled
    keeper, array = (back.second, back.first) if order == "array first" else (back.first, back.second)
    assert keeper.arr is array


class Interrupting:
    tag = "test.interrupting"
    types = (Box,)

    def serialize(self, box):
        return None, []

    def deserialize(self, meta, frames):
        raise KeyboardInterrupt


def test_keyboard_interrupt_in_a_deserializer_is_not_turned_into_a_decoding_error():
    codec = freight.Freight()
    codec.register(Interrupting())
    blob = codec.dumps(Box(None))
    with pytest.raises(KeyboardInterrupt):
        codec.loads(blob)


def test_concurrent_writes_never_produce_a_payload_that_fails_its_own_checksum():
    # The GIL is released while a large array is copied; whatever bytes end up in the payload,
    # its checksums must describe them.
    arr = np.zeros(8 << 20, dtype=np.float64)  # 64 MiB: copied by two threads
    stop = threading.Event()

    def scribble():
        while not stop.is_set():
            arr[4 << 20 :] += 1

    writer = threading.Thread(target=scribble)
    writer.start()
    try:
        blobs = [freight.dumps(arr, checksum=True) for _ in range(5)]
    finally:
        stop.set()
        writer.join()
    for blob in blobs:
        assert all(frame["checksum_ok"] for frame in freight.inspect(blob)["frames"])


def test_registering_never_hides_other_registrations_from_a_concurrent_dumps():
    codec = freight.Freight()
    codec.register(KeeperSerializer())

    class Other:
        tag = "test.other"
        types = (complex,)

        def serialize(self, obj):
            return None, []

        def deserialize(self, meta, frames):
            return None

    stop = threading.Event()

    def churn():
        while not stop.is_set():
            codec.register(Other(), replace=True)

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        pickled = sum(freight.inspect(codec.dumps(Keeper(1)))["needs_pickle"] for _ in range(3000))
    finally:
        stop.set()
        thread.join()
    assert pickled == 0


class Peeker:
    """A deserializer that looks at every list the garbage collector knows about."""

    tag = "test.peeker"
    types = (Box,)

    def serialize(self, box):
        return None, []

    def deserialize(self, meta, frames):
        for obj in gc.get_objects():
            if type(obj) is list and len(obj) == 3:
                list(obj)  # touches every item: a NULL one would crash
        return Box(None)


def test_no_half_built_list_is_visible_to_python_code():
    codec = freight.Freight()
    codec.register(Peeker())
    back = codec.loads(codec.dumps({"k": [Box(None), 1234567, 7654321]}))
    assert back["k"][1:] == [1234567, 7654321]


def test_pickle_nodes_nested_2000_deep_through_their_externals_load_without_a_crash():
    # A Pickle node whose external is again a Pickle node, 2000 deep, each pickle None: loads as None.
    import pickle

    inner = pickle.dumps(None, protocol=5)
    tree = bytes([NONE])
    for _ in range(2000):
        node = bytes([0x32, 0, 0]) + uv(len(inner)) + inner + uv(0) + uv(1) + uv(len(tree)) + tree
        tree = node
    assert freight.loads(_envelope(tree, needs_pickle=True)) is None


def test_uncached_zoneinfo_stays_uncached():
    cached = dt.datetime(2024, 3, 31, 1, 30, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
    uncached = dt.datetime(2024, 3, 31, 3, 30, tzinfo=zoneinfo.ZoneInfo.no_cache("Europe/Paris"))
    back = freight.loads(freight.dumps([cached, uncached]))
    assert back[1] - back[0] == uncached - cached
    assert back[0].tzinfo is zoneinfo.ZoneInfo("Europe/Paris")
    assert back[1].tzinfo is not back[0].tzinfo


def test_zero_size_dtype_with_an_overflowing_shape_is_refused():
    wire = b"|V0"
    tree = bytes([0x30, STR]) + uv(len(wire)) + wire + bytes([2]) + uv(2) + uv(1 << 40) + uv(1 << 40) + uv(0)
    with pytest.raises(freight.DeserializationError, match="overflows"):
        freight.loads(_envelope(tree, frames=[b""]))


@pytest.mark.parametrize("bad", [5, None, object()])
def test_non_buffer_arguments_give_freight_errors(bad):
    with pytest.raises(freight.DeserializationError):
        freight.loads_frames(bad)
    with pytest.raises(freight.DeserializationError):
        freight.inspect([bad])


class BytesSerializer:
    """Scaler's shape: serialize(obj) -> bytes, deserialize(payload) (here it would unpickle)."""

    def serialize(self, box):
        return b"payload"

    def deserialize(self, payload):
        return Box(payload)


def test_scaler_style_serializers_are_unsafe_unless_they_say_otherwise():
    codec = freight.Freight()
    codec.register(BytesSerializer(), types=Box, tag="test.bytes")
    blob = codec.dumps(Box(None))
    with pytest.raises(freight.UnsafePayloadError, match="test.bytes"):
        codec.loads(blob, allow_pickle=False)
    assert codec.loads(blob).items == b"payload"
    trusting = freight.Freight()
    trusting.register(BytesSerializer(), types=Box, tag="test.bytes", safe=True)
    assert trusting.loads(trusting.dumps(Box(None)), allow_pickle=False).items == b"payload"
