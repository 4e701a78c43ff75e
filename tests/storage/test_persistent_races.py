"""Persistent values under concurrency and odd keys: two saves of one key at once (two threads,
two stores), a newer save still writing in another process, keys holding ``..``, and saves that
fail before or while their side objects are written."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import freight
from freight.exceptions import StorageError
from freight.storage import persistent
from freight.storage.side_objects import SIDE


class Gated:
    """Keeps int64 arrays as one side object each; a save of an array whose first element is
    ``gate_on`` stops after writing it until ``proceed`` is set (``inside`` says it got there)."""

    name = "gated"
    types = (np.ndarray,)

    def __init__(self, gate_on: int | None = None):
        self.gate_on = gate_on
        self.inside = threading.Event()
        self.proceed = threading.Event()

    def save(self, obj, side):
        side.put("a.bin", obj.astype(np.int64).tobytes())
        if self.gate_on is not None and obj[0] == self.gate_on:
            self.inside.set()
            self.proceed.wait()
        return {"n": len(obj)}

    def load(self, ref, side):
        return np.frombuffer(bytes(side.get("a.bin")), dtype=np.int64)


def _saves(store, key):
    return {o.key[len(key + SIDE) :].split("/")[0] for o in store.list_objects(key + SIDE, side_objects=True)}


def _waiting_for(url: str, key: str) -> bool:
    """Whether a second save of ``key`` is waiting for the first (holders + waiters of its lock)."""
    entry = getattr(persistent, "_KEY_LOCKS", {}).get((url, key))
    return entry is not None and entry[1] >= 2


def test_two_saves_of_one_key_at_once_leave_the_last_one_whole(store_location):
    """Save A stops midway (its side object written); save B of the same key, from another
    thread and another Store of the same place, runs meanwhile. Before, B's save removed A's side
    objects and A's envelope then landed over B's, referring to them: both saves succeeded and
    the value could not be loaded. Now B waits for A: the value is B's, with B's objects only."""
    first, second = store_location.open(), store_location.open()
    gated = Gated(gate_on=1)
    first.register_persistent(gated)
    second.register_persistent(Gated())
    errors: list[BaseException] = []

    def save(store, value):
        try:
            store.save("k", value)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    a = threading.Thread(target=save, args=(first, np.array([1, 1])))
    a.start()
    gated.inside.wait()
    b = threading.Thread(target=save, args=(second, np.array([2, 2, 2])))
    b.start()
    while b.is_alive() and not _waiting_for(first.url, "k"):  # B done, or waiting for A
        time.sleep(0.001)
    gated.proceed.set()
    a.join()
    b.join()
    assert errors == []
    np.testing.assert_array_equal(first.load("k"), [2, 2, 2])
    np.testing.assert_array_equal(second.load("k"), [2, 2, 2])
    assert len(_saves(first, "k")) == 1  # A's side objects went with A's envelope
    assert persistent._KEY_LOCKS == {}  # no lock kept once nobody saves


def test_a_newer_save_still_writing_elsewhere_keeps_its_side_objects(store):
    """A save removes the side objects of older saves only: another process's newer save of the
    same key, still writing its side objects, is not robbed of them (its envelope lands after)."""
    store.register_persistent(Gated())
    newer = "f" * 24  # sorts after any save id this clock gives
    older, legacy = "0" * 24, "ab" * 8  # legacy: the random 16-digit ids of earlier releases
    for save_id in (newer, older, legacy):
        store.put_bytes(f"k{SIDE}{save_id}/gated-0/a.bin", b"x")
    store.save("k", np.arange(3))
    saves = _saves(store, "k")
    assert newer in saves and older not in saves and legacy not in saves and len(saves) == 2
    np.testing.assert_array_equal(store.load("k"), np.arange(3))
    store.delete("k")  # every save's side objects go with the value
    assert store.list_objects("", side_objects=True) == []


@pytest.mark.parametrize("key", ["x/../y", "..", "a/./b", "100%/é ü"])
def test_a_key_with_dot_segments_or_percent_signs_round_trips_with_its_side_objects(store, key):
    """Before, a key holding a ".." segment saved, but its persistent values refused to load
    ("points outside its value's side area"): the check looked at the whole key."""
    store.register_persistent(Gated())
    store.save(key, np.arange(4))
    assert store.list() == [key]
    np.testing.assert_array_equal(store.load(key), np.arange(4))
    store.delete(key)
    assert store.list_objects("", side_objects=True) == []


@pytest.mark.parametrize("key", ["a//b", "/lead"])
def test_an_invalid_key_is_refused_before_any_side_object(store, key):
    """Before, the error named the first side object's key ("a//b.freight-side/<id>/...")."""
    store.register_persistent(Gated())
    with pytest.raises(StorageError, match=f'invalid key "{key}": a key cannot'):
        store.save(key, np.arange(3))
    assert store.list_objects("", side_objects=True) == []


def test_a_failed_save_whose_cleanup_fails_raises_its_own_error(tmp_path):
    """A key too long for a file name fails the first side object's write; removing the save's
    side objects then fails too (listing the folder). Before, that second error replaced the
    first; now the save's own error is raised and a warning names what stays."""
    store = freight.storage.open(tmp_path / "s")
    store.register_persistent(Gated())
    key = "ä" * 200  # 1,200 bytes once percent-encoded: over NAME_MAX
    with pytest.warns(RuntimeWarning, match="side objects of a failed save stay"):
        with pytest.raises(StorageError, match="File name too long") as info:
            store.save(key, np.arange(3))
    assert 'list "' not in str(info.value)


@pytest.mark.parametrize(
    ("attributes", "match"),
    [
        ({}, "needs types: a non-empty tuple"),  # before: AttributeError 'X' has no attribute 'types'
        ({"types": ()}, "needs types: a non-empty tuple"),
        ({"types": ("ndarray",)}, "needs types: a non-empty tuple"),
        ({"types": (np.ndarray,)}, "has no save or load method"),
        ({"types": (np.ndarray,), "save": lambda self, obj, side: None}, "has no load method"),
    ],
)
def test_a_malformed_persistent_serializer_is_refused_when_registered(attributes, match):
    serializer = type("Serializer", (), {"name": "x", **attributes})()
    store = freight.storage.open("memory://")
    before = store.freight
    with pytest.raises(StorageError, match=match):
        store.register_persistent(serializer)
    assert store.freight is before
    store.save("k", np.arange(3))  # nothing was registered: arrays stay in the envelope
    assert store.list_objects("", side_objects=True)[0].key == "k"


def test_a_persistent_serializer_whose_library_is_missing_says_so():
    class NeedsALibrary:
        name = "needs"

        @property
        def types(self):
            import freight_no_such_library  # noqa: F401 - as DaskZarr imports dask

    with pytest.raises(StorageError, match="needs a library that is not installed .*freight_no_such_library"):
        freight.storage.open("memory://").register_persistent(NeedsALibrary())
