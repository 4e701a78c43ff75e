"""Each thread keeps the island pickler of its last payload for the next one (issue 34: building a
cloudpickle pickler costs about a tenth of pickling a lambda). A reused pickler must write the
bytes a new one writes, hold nothing of the last payload, never serve a payload pickled inside
another, and be freed on its own thread (its hook and sink are Rust objects that must be)."""

from __future__ import annotations

import fractions
import gc
import os
import sys
import threading
import weakref

import numpy as np
import pytest

import freight
from freight import _pickle


def _forget_idle_pickler():
    _pickle._idle.holder = None  # the next payload builds a new pickler


def _idle_pickler():
    holder = getattr(_pickle._idle, "holder", None)
    return None if holder is None or holder.session is None else holder.session[1]


def _values():
    # k is a Fraction, which freight's function node does not hold: these functions stay pickle
    # islands, written by the island pickler under test.
    k, table = fractions.Fraction(7), list(range(100))

    def lookup(i):
        return int(table[i % len(table)] * k)

    def twice(i):
        return lookup(lookup(i))  # shares lookup's globals and refers to it

    arrays = {f"x{i}": np.arange(50.0) + i for i in range(3)}
    return [
        lambda x: x + k,
        lookup,
        twice,
        {"fn": lookup, "again": lookup, **arrays},
        [twice, {"n": 1}, (lookup, "s")],
    ]


@pytest.mark.parametrize("index", range(5))
def test_a_reused_pickler_writes_the_bytes_of_a_new_one(index):
    value = _values()[index]
    _forget_idle_pickler()
    fresh = freight.dumps(value)
    pickler = _idle_pickler()
    assert pickler is not None
    for _ in range(3):
        assert freight.dumps(value) == fresh
    assert _idle_pickler() is pickler  # the same pickler served each payload
    got = freight.loads(fresh)
    if callable(value):
        assert got(3) == value(3)


class Payload:
    pass


def _dump_a_closure_over_a_new_object():
    inner = Payload()
    freight.dumps({"f": lambda: inner, "n": np.arange(3)})
    return weakref.ref(inner)


def test_the_idle_pickler_holds_nothing_of_the_last_payload():
    ref = _dump_a_closure_over_a_new_object()
    gc.collect()
    assert ref() is None
    assert not _idle_pickler().memo.copy()


class DumpsWhilePickled:
    """Its reduction calls freight.dumps, while the payload's island pickler is busy."""

    def __init__(self, k):
        self.k = k

    def __reduce__(self):
        k = fractions.Fraction(self.k)  # no function node holds a Fraction: an island
        inner = freight.dumps(lambda x: x * k)
        return (_rebuild, (inner,))


def _rebuild(inner):
    return freight.loads(inner)


def test_a_payload_pickled_inside_another_gets_its_own_pickler():
    shift = fractions.Fraction(1)
    value = {"f": lambda x: x + shift, "obj": DumpsWhilePickled(5), "g": lambda x: x - shift}
    data = freight.dumps(value)
    got = freight.loads(data)
    assert got["f"](1) == 2 and got["obj"](2) == 10 and got["g"](1) == 0
    assert freight.dumps(value) == data
    _forget_idle_pickler()
    assert freight.dumps(value) == data


def test_a_registry_that_needs_persistent_id_gets_a_pickler_that_asks_it():
    codec = freight.Freight()
    k = 2
    f = lambda x: x * k  # noqa: E731
    before = codec.dumps(f)  # leaves an idle pickler without persistent_id

    class Ints:
        tag = "test.reuse.ints"

        def serialize(self, obj):
            return {"v": str(obj)}, []

        def deserialize(self, meta, frames):
            return int(meta["v"])

    codec.register(Ints(), types=(int,))
    after = codec.dumps(f)
    assert after != before  # the captured int went to the serializer
    assert codec.loads(after)(3) == 6


def _unraisable_during(fn):
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        fn()
        gc.collect()
    finally:
        sys.unraisablehook = old
    return [f"{u.exc_type.__name__}: {u.exc_value}" for u in seen]


def test_a_threads_idle_pickler_is_freed_on_that_thread():
    def work():
        k = 3
        freight.loads(freight.dumps(lambda x: x + k))

    def run_threads():
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert _unraisable_during(run_threads) == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_neither_drops_nor_uses_other_threads_picklers():
    ready, done = threading.Event(), threading.Event()

    def other_thread():
        k = 4
        freight.dumps(lambda x: x + k)  # this thread now has an idle pickler
        ready.set()
        done.wait(10)

    t = threading.Thread(target=other_thread)
    t.start()
    ready.wait(10)
    freight.dumps(lambda: 1)  # and so does this one
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            ok = False
            try:
                k = 5
                ok = freight.loads(freight.dumps(lambda x: x * k))(2) == 10 and not seen
            finally:
                os._exit(0 if ok else 1)
    finally:
        sys.unraisablehook = old
        done.set()
        t.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
