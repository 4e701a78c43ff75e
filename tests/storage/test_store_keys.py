"""Keys of freight.storage.Store on each backend: awkward names round-trip exactly through list(),
invalid keys are refused, list(prefix) is a sorted string-prefix match, delete_prefix removes
exactly those, and the MutableMapping methods behave as a mapping's should."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

import freight.storage as fs
from freight.exceptions import KeyNotFoundError, StorageError

AWKWARD = [
    "_test_storage.<locals>.sum_0000",
    "a b#c%d",
    "dir/x?y*z",
    "%41",
    "k#12",
    "é/ü",
    "k#",
    "100%",
    "a/../b",
    "./dot",
    "back\\slash",
    "quote'\"",
    "tab\tnewline\n",
    "emoji-🚀/日本",
    "~tilde",
    "+plus=eq&amp",
]

INVALID = ["", "/a", "a/", "a//b", "/", "//"]


def test_awkward_names_round_trip_through_list(store_location):
    store = store_location.open()
    for i, name in enumerate(AWKWARD):
        store.save(name, {"name": name, "i": i})
    assert store.list() == sorted(AWKWARD)
    assert sorted(store) == sorted(AWKWARD)
    for i, name in enumerate(AWKWARD):
        assert store.load(name) == {"name": name, "i": i}
        assert store.exists(name) and name in store
        assert store.info(name)["key"] == name
    # A second client of the same location sees the same names.
    assert store_location.open().list() == sorted(AWKWARD)
    files = store_location.files()
    if files is not None:
        assert len(files) == len(AWKWARD)
        # Saved names never look like a local staging file ("<name>#<n>") nor escape the store.
        assert not any("#" in path for path in files)
        assert not any(part in ("..", ".") for path in files for part in path.split("/"))
    for name in AWKWARD:
        store.delete(name)
    assert store.list() == []


def test_names_that_differ_only_by_encoding_stay_apart(store):
    """'%41' is not 'A', 'a%2Fb' is not 'a/b', 'k#12' is not 'k%2312'."""
    pairs = [("%41", "A"), ("a%2Fb", "a/b"), ("k#12", "k%2312"), ("é", "%C3%A9")]
    for one, other in pairs:
        store.save(one, one)
        store.save(other, other)
    for one, other in pairs:
        assert store.load(one) == one and store.load(other) == other
    assert store.list() == sorted(name for pair in pairs for name in pair)


@pytest.mark.parametrize("bad", INVALID)
def test_invalid_keys_are_refused_with_a_clear_message(store, bad):
    store.save("ok", 1)
    calls = {
        "save": lambda: store.save(bad, 1),
        "save if_absent": lambda: store.save(bad, 1, if_absent=True),
        "load": lambda: store.load(bad),
        "exists": lambda: store.exists(bad),
        "info": lambda: store.info(bad),
        "delete": lambda: store.delete(bad),
        "setitem": lambda: store.__setitem__(bad, 1),
        "getitem": lambda: store[bad],
    }
    for what, call in calls.items():
        with pytest.raises(StorageError) as exc:
            call()
        assert not isinstance(exc.value, KeyNotFoundError), what
        message = str(exc.value)
        assert f'invalid key "{bad}"' in message, (what, message)
        assert "empty" in message or "'/'" in message, (what, message)
    assert store.list() == ["ok"]


def test_list_prefix_is_a_sorted_string_prefix(store):
    names = [
        "run-30/b",
        "run-3/a",
        "run-3/sub/c",
        "run-3x",
        "run-300",
        "run-3/A",
        "run-4/a",
        "other",
        "a b#c%d",
        "a b#z",
        "%41",
        "é/ü",
        "dir/x?y*z",
        "dir/x",
    ]
    for name in names:
        store.save(name, name)
    assert store.list() == sorted(names)
    assert store.list("run-3/") == ["run-3/A", "run-3/a", "run-3/sub/c"]
    assert store.list("run-30/") == ["run-30/b"]
    assert store.list("run-3") == sorted(n for n in names if n.startswith("run-3"))
    assert store.list("run-3/s") == ["run-3/sub/c"]
    assert store.list("run-3/sub/") == ["run-3/sub/c"]
    assert store.list("r") == sorted(n for n in names if n.startswith("r"))
    assert store.list("a b#") == ["a b#c%d", "a b#z"]
    assert store.list("a b#c") == ["a b#c%d"]
    assert store.list("%4") == ["%41"]
    assert store.list("é") == ["é/ü"]
    assert store.list("é/") == ["é/ü"]
    assert store.list("dir/x?") == ["dir/x?y*z"]
    assert store.list("dir/x") == ["dir/x", "dir/x?y*z"]
    assert store.list("other") == ["other"]
    for prefix in ["nope", "nope/", "run-5/", "/", "run-3//", "zzz/deeper/still/"]:
        assert store.list(prefix) == [], prefix


def test_delete_prefix_removes_exactly_the_matching_keys(store):
    names = ["run-3/a", "run-3/b/c", "run-30/a", "run-3x", "run-4/a", "x"]
    for name in names:
        store.save(name, name)
    assert store.delete_prefix("run-3/") == 2
    assert store.list() == ["run-30/a", "run-3x", "run-4/a", "x"]
    assert store.delete_prefix("run-3/") == 0
    assert store.delete_prefix("nothing-here") == 0
    assert store.delete_prefix("run-3") == 2  # a string prefix: run-30/a and run-3x
    assert store.list() == ["run-4/a", "x"]
    with pytest.raises(StorageError, match="non-empty prefix"):
        store.delete_prefix("")
    assert store.list() == ["run-4/a", "x"]
    assert store.load("run-4/a") == "run-4/a"


def test_delete_prefix_with_awkward_names(store):
    for name in AWKWARD:
        store.save(name, name)
    assert store.delete_prefix("a") == sum(n.startswith("a") for n in AWKWARD)
    assert store.delete_prefix("é/") == 1
    assert store.list() == sorted(n for n in AWKWARD if not n.startswith(("a", "é/")))


def test_mutable_mapping(store):
    assert len(store) == 0 and list(store) == [] and "k" not in store
    store["b"] = [2]
    store["a/x"] = {"one": 1}
    store["c"] = "three"
    assert len(store) == 3
    assert list(store) == ["a/x", "b", "c"]
    assert "a/x" in store and "a/" not in store.list()
    assert 123 not in store and None not in store and b"b" not in store
    assert store["b"] == [2]
    assert dict(store.items()) == {"a/x": {"one": 1}, "b": [2], "c": "three"}
    assert list(store.keys()) == ["a/x", "b", "c"]
    assert store.get("missing") is None and store.get("missing", 5) == 5 and store.get("c") == "three"
    del store["b"]
    assert "b" not in store and len(store) == 2
    assert store.pop("c") == "three" and store.pop("c", "gone") == "gone"
    assert store.setdefault("d", 4) == 4 and store.setdefault("d", 5) == 4
    store.update({"e": 5}, f=6)
    assert store.list() == ["a/x", "d", "e", "f"]
    store.clear()
    assert len(store) == 0


def test_missing_keys_raise_key_not_found(store):
    store.save("present", 1)
    with pytest.raises(KeyError) as exc:
        store["missing/key"]
    assert isinstance(exc.value, KeyNotFoundError) and isinstance(exc.value, StorageError)
    message = str(exc.value)
    assert '"missing/key"' in message and store.url in message
    for call in (
        lambda: store.load("missing"),
        lambda: store.info("missing"),
        lambda: store.delete("missing"),
        lambda: store.__delitem__("missing"),
    ):
        with pytest.raises(KeyNotFoundError):
            call()
    with pytest.raises(KeyError):
        store.pop("missing")
    assert not store.exists("missing")
    assert store.list() == ["present"]


def test_a_key_below_a_stored_value_is_missing(store):
    """A key below a stored value ("present/below" when "present" holds one): nothing is stored there, as for any other
    missing key (on a local folder the file "present" is not a directory: ENOTDIR, not ENOENT)."""
    store.save("present", 1)
    assert not store.exists("present/below")
    assert "present/below" not in store
    for call in (
        lambda: store.load("present/below"),
        lambda: store.info("present/below"),
        lambda: store.delete("present/below"),
        lambda: store["present/below"],
    ):
        with pytest.raises(KeyNotFoundError):
            call()
    assert store.list("present/") == [] and store.delete_prefix("present/") == 0
    assert store.load("present") == 1


def test_a_folder_is_not_a_value(store_location):
    """A key that is only a folder ("a" when only "a/b" is stored): missing, however it is read."""
    if store_location.backend == "s3":
        pytest.skip("s3s-fs answers 500 (not 404) to a HEAD of a key that is one of its folders")
    store = store_location.open()
    store.save("a/b", 1)
    assert not store.exists("a") and "a" not in store
    for call in (lambda: store.load("a"), lambda: store.info("a"), lambda: store.delete("a")):
        with pytest.raises(KeyNotFoundError):
            call()
    assert store.list() == ["a/b"]


def test_mmap_of_a_folder_is_a_missing_key(tmp_path):
    """load("a", mmap=True) when only "a/b" is stored: KeyNotFoundError, as load("a") gives (the
    folder opens, then mapping it fails with ENODEV)."""
    store = fs.open(tmp_path / "store")
    store.save("a/b", 1)
    with pytest.raises(KeyNotFoundError):
        store.load("a")
    with pytest.raises(KeyNotFoundError):
        store.load("a", mmap=True)


def test_delete(store):
    store.save("a/b", 1)
    store.save("a/c", 2)
    store.delete("a/b")
    assert store.list() == ["a/c"]
    with pytest.raises(KeyNotFoundError):
        store.delete("a/b")
    store.delete("a/c")
    assert store.list() == [] and not store.exists("a/c")


def test_a_key_that_is_a_value_and_a_folder(store_location):
    """Object stores allow "a" and "a/b" side by side; a local folder cannot (a file cannot also be
    a directory): the second save is refused with a StorageError naming the store and key, and
    what was stored stays intact."""
    store = store_location.open(max_retries=0)  # s3s-fs answers 500 here, which is retried
    store.save("a/b", 1)
    store.save("c", 2)
    if store_location.backend == "memory":
        store.save("a", 3)
        store.save("c/d", 4)
        assert store.list() == ["a", "a/b", "c", "c/d"]
        return
    for key in ("a", "c/d"):
        with pytest.raises(StorageError) as exc:
            store.save(key, 3)
        assert store.url in str(exc.value) and f'"{key}"' in str(exc.value)
    assert store.list() == ["a/b", "c"]
    assert store.load("a/b") == 1 and store.load("c") == 2


def test_names_holding_the_staging_marker_are_refused(tmp_path):
    """ ".freight-staging-" marks the temporary objects of create-only streamed writes, which
    list() hides: a user key of that shape would be saved but never listed, so it is refused."""
    store = fs.open(tmp_path / "store")
    with pytest.raises(fs.StorageError, match="reserved"):
        store.save("report.freight-staging-notes", 1)
    assert store.list() == []


def test_many_keys_list_and_delete_prefix(store):
    """More keys than one S3 list page or one batch delete (1000)."""
    names = [f"many/k{i:05d}" for i in range(1100)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: store.save(name, 0), names))
    store.save("many-other", 1)
    assert store.list("many/") == names
    assert len(store) == 1101
    assert store.delete_prefix("many/") == 1100
    assert store.list() == ["many-other"]
