"""Deleting side objects on their own: never those of a value that is still there (it would no
longer load), always those of a value that is gone (what a crashed save leaves)."""

from __future__ import annotations

import numpy as np
import pytest

from freight.exceptions import StorageError
from freight.storage.side_objects import SIDE, owners_reached


class Kept:
    """int64 arrays as one side object each."""

    name = "kept"
    types = (np.ndarray,)

    def save(self, obj, side):
        side.put("a.bin", obj.astype(np.int64).tobytes())

    def load(self, ref, side):
        return np.frombuffer(bytes(side.get("a.bin")), dtype=np.int64)


def _side(store, key):
    return [o.key for o in store.list_objects(key + SIDE, side_objects=True)]


def test_the_values_a_prefix_reaches_the_side_objects_of():
    assert owners_reached("v.") == ["v"]
    assert owners_reached("v.freight-side/") == ["v"]
    assert owners_reached("run/v.freight-side/0a/kept-0.ref") == ["run/v"]
    assert owners_reached("v") == [] and owners_reached("v/") == [] and owners_reached(".") == []
    assert owners_reached("v.f") == ["v"] and owners_reached("v.x") == []


def test_a_side_object_of_a_value_that_is_there_is_not_deleted_alone(store):
    """Before, ``delete(side key)`` and ``delete_prefix("v.")`` (also ``freight rm``) removed a
    value's side objects and kept the value, which then failed to load."""
    store.register_persistent(Kept())
    store.save("v", np.arange(3))
    store.save("v.1", 7)
    side = _side(store, "v")
    for prefix in (side[0], "v.", f"v{SIDE}"):
        with pytest.raises(StorageError, match='reaches the side objects of the value "v".*delete the value itself'):
            store.delete_prefix(prefix)
    with pytest.raises(StorageError, match='reaches the side objects of the value "v"'):
        store.delete(side[0])
    assert _side(store, "v") == side and store.list() == ["v", "v.1"]
    np.testing.assert_array_equal(store.load("v"), np.arange(3))
    store.save("v.f", 1)
    store.delete("v.f")  # a value of its own, whose key starts as v's side objects do
    assert store.delete_prefix("v") == 1 + len(side) + 1  # the value, its side objects, v.1
    assert store.list_objects("", side_objects=True) == []


def test_a_prefix_reaching_no_side_object_of_a_value_deletes_what_it_reaches(store):
    store.save("v", 1)  # no side objects
    store.save("v.1", 2)
    assert store.delete_prefix("v.") == 1 and store.list() == ["v"]


def test_the_side_objects_of_a_value_that_is_gone_can_be_deleted(store):
    store.put_bytes(f"gone{SIDE}0a/kept-0/a.bin", b"x")  # a save that crashed before its envelope
    store.put_bytes(f"gone{SIDE}0a/kept-0.ref", b"y")
    store.delete(f"gone{SIDE}0a/kept-0.ref")
    assert store.delete_prefix("gone.") == 1
    assert store.list_objects("", side_objects=True) == []
