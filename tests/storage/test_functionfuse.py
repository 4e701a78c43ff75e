"""freight.storage.functionfuse: FunctionFuse's storage interface (storage_factory, new_workflow,
save, read_task, file_exists, list_tasks, remove_task, remove_workflow, always_read) on file,
memory and S3 (the s3s-fs test server) storages, and a FunctionFuse-style LocalWorkflow
(support/functionfuse_workflow.py) reading results back instead of recomputing them. Persistent serializers:
test_functionfuse_serializers.py."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import freight
from freight.exceptions import StorageError
from freight.storage.functionfuse import (
    FILE_PROTOCOL,
    S3_PROTOCOL,
    FileStorage,
    MemoryStorage,
    S3FileStorage,
    _s3_open_options,
    storage_factory,
)
from freight.storage.side_objects import SIDE
from support.functionfuse_cases import WF, s3_options
from support.functionfuse_workflow import LocalWorkflow, workflow

# -- the factory ------------------------------------------------------------------------------------


def test_factory_kinds_and_protocol_names(tmp_path):
    assert (FILE_PROTOCOL, S3_PROTOCOL) == ("file_protocol", "s3 protocol")  # FunctionFuse's strings
    file_storage = storage_factory({"kind": "file", "options": {"path": str(tmp_path / "s")}})
    assert isinstance(file_storage, FileStorage) and file_storage.store.backend == "file"
    assert file_storage.path == str(tmp_path / "s") and not (tmp_path / "s").exists()  # opening creates nothing
    file_storage.new_workflow(WF)
    assert (tmp_path / "s").is_dir()
    memory = storage_factory({"kind": "memory", "options": {}})
    assert isinstance(memory, MemoryStorage) and memory.store.backend == "memory"
    assert storage_factory({"kind": "memory"}).store is not memory.store  # each one new and empty
    with pytest.raises(ValueError, match="unknown storage kind 'ray'"):
        storage_factory({"kind": "ray", "options": {"path": "x"}})
    with pytest.raises(KeyError):
        storage_factory({"kind": "file", "options": {}})


def test_s3fs_options_map_to_freight_options():
    assert _s3_open_options(
        {"key": "K", "secret": "S", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "r1"}}
    ) == {
        "endpoint_url": "http://127.0.0.1:9000",
        "region": "r1",
        "access_key_id": "K",
        "secret_access_key": "S",
        "allow_http": True,
    }
    # endpoint_url at the top level (s3fs accepts both), a session token, https.
    assert _s3_open_options({"key": "K", "secret": "S", "token": "T", "endpoint_url": "https://s3.example"}) == {
        "endpoint_url": "https://s3.example",
        "access_key_id": "K",
        "secret_access_key": "S",
        "session_token": "T",
        "allow_http": False,
    }
    assert _s3_open_options({}) == {}  # all from the AWS environment variables
    with pytest.raises(StorageError, match="anonymous"):
        _s3_open_options({"anon": True})


def test_s3_path_forms(s3_server):
    opts = s3_options(s3_server, "p")
    for path in (f"{s3_server.bucket}/a/b", f"s3://{s3_server.bucket}/a/b", f"/{s3_server.bucket}/a/b/"):
        storage = S3FileStorage(path, opts["options"]["s3fs"])
        assert storage.store.url == f"s3://{s3_server.bucket}/a/b" and storage.path == storage.store.url
    with pytest.raises(StorageError, match="bucket/prefix"):
        S3FileStorage("s3://", {})


# -- the interface on each kind ---------------------------------------------------------------------


def test_save_read_exists(storage):
    storage.new_workflow(WF)
    values = {
        "_test_storage.<locals>.sum_0000": 2,
        "nested": {"a": [1, (2, 3)], "arr": np.arange(12.0).reshape(3, 4)},
        "none": None,
    }
    for name, value in values.items():
        assert storage.save(WF, name, value) is None
    for name, value in values.items():
        assert storage.file_exists(WF, name) is True
        back = storage.read_task(WF, name)
        if name == "nested":
            np.testing.assert_array_equal(back["arr"], value["arr"])
            assert back["a"] == [1, (2, 3)]
        else:
            assert back == value
    assert storage.file_exists(WF, "absent") is False
    assert storage.file_exists("other_workflow", "nested") is False
    # Saving again replaces the result.
    storage.save(WF, "none", "second")
    assert storage.read_task(WF, "none") == "second"
    # Saving does not need new_workflow (as on FunctionFuse's S3 storage).
    storage.save("fresh", "t", 1)
    assert storage.read_task("fresh", "t") == 1


def test_read_task_of_a_missing_task_is_file_not_found(storage):
    with pytest.raises(FileNotFoundError, match="is not found"):
        storage.read_task("never_created", "task")
    storage.new_workflow(WF)
    storage.save(WF, "there", 1)
    with pytest.raises(FileNotFoundError, match="absent"):
        storage.read_task(WF, "absent")


def test_list_tasks_glob(storage):
    storage.new_workflow(WF)
    names = [
        "_test_storage.<locals>.sum_0000",
        "_test_storage.<locals>.sum_0001",
        "_test_storage.<locals>.minus_0000",
        "dask_array",
        "print",
        ".hidden",
        "br[ack]et",
    ]
    for name in names:
        storage.save(WF, name, name)
    storage.save(WF + "2", "_test_storage.<locals>.sum_0002", 0)  # a workflow whose name extends WF
    visible = sorted(n for n in names if not n.startswith("."))
    assert storage.list_tasks(WF, "*") == visible
    assert storage.list_tasks(WF, "*sum*") == ["_test_storage.<locals>.sum_0000", "_test_storage.<locals>.sum_0001"]
    assert storage.list_tasks(WF, "_test_storage.<locals>.*_000?") == [
        "_test_storage.<locals>.minus_0000",
        "_test_storage.<locals>.sum_0000",
        "_test_storage.<locals>.sum_0001",
    ]
    assert storage.list_tasks(WF, "*_[!0]00[0-9]") == []
    assert storage.list_tasks(WF, "*[1]") == ["_test_storage.<locals>.sum_0001"]
    assert storage.list_tasks(WF, "print") == ["print"]  # a literal name
    assert storage.list_tasks(WF, "br[[]ack]et") == ["br[ack]et"]
    assert storage.list_tasks(WF, "Print") == []  # case-sensitive
    assert storage.list_tasks(WF, ".*") == [".hidden"]  # dot names only for a dot pattern, as glob
    assert storage.list_tasks(WF, "nothing*") == []
    assert storage.list_tasks("no_such_workflow", "*") == []
    assert storage.list_tasks(WF + "2", "*") == ["_test_storage.<locals>.sum_0002"]


def test_remove_task_by_name_and_pattern(storage):
    storage.new_workflow(WF)
    for name in ("a_0000", "a_0001", "b_0000", "keep"):
        storage.save(WF, name, name)
    assert storage.remove_task(WF, "keep") is None
    assert not storage.file_exists(WF, "keep")
    with pytest.raises(FileNotFoundError):
        storage.read_task(WF, "keep")
    with pytest.raises(FileNotFoundError):
        storage.remove_task(WF, "keep")  # no longer there
    with pytest.raises(FileNotFoundError):
        storage.remove_task(workflow_name=WF, task_name="never_there")
    storage.remove_task(WF, pattern="a_*")
    assert storage.list_tasks(WF, "*") == ["b_0000"]
    storage.remove_task(WF, pattern="zzz*")  # none matching: no error
    # The pattern wins over task_name, as in FunctionFuse.
    storage.remove_task(workflow_name=WF, task_name="not_there", pattern="b_*")
    assert storage.list_tasks(WF, "*") == []
    with pytest.raises(TypeError):
        storage.remove_task(WF)


def test_remove_workflow(storage):
    storage.new_workflow(WF)
    storage.new_workflow("other")
    for name in ("x", "y"):
        storage.save(WF, name, name)
        storage.save("other", name, name)
    storage.save(WF + "2", "x", 1)
    assert storage.remove_workflow(WF) is None
    assert storage.list_tasks(WF, "*") == []
    with pytest.raises(FileNotFoundError):
        storage.read_task(WF, "x")
    assert storage.list_tasks("other", "*") == ["x", "y"]
    assert storage.read_task(WF + "2", "x") == 1
    storage.remove_workflow(WF)  # absent: no error
    storage.remove_workflow("never_there")
    storage.new_workflow(WF)
    storage.save(WF, "x", "again")
    assert storage.read_task(WF, "x") == "again"


def test_always_read_flag(storage):
    assert storage.always_read is False
    storage.always_read = True
    assert storage.always_read is True
    storage.always_read = False
    assert storage.always_read is False


def test_side_object_names_are_reserved(storage):
    with pytest.raises(StorageError, match="reserved"):
        storage.save(WF, f"x{SIDE}y", 1)
    assert storage.file_exists(WF, f"x{SIDE}y") is False


# -- a workflow on the storage ------------------------------------------------------------------------


def _test_storage(storage, calls: Counter, workflow_name: str = WF):
    """FunctionFuse's tests/built-in/test_local_workflow.py graph: s1 = sum(1, 1),
    s2 = sum(s1, 1), m = minus(s1, s2); node names as FunctionFuse gives them."""

    @workflow
    def sum(a, b):  # noqa: A001 - FunctionFuse's test names it so; the node names follow
        calls["sum"] += 1
        return a + b

    @workflow
    def minus(a, b):
        calls["minus"] += 1
        return a - b

    a, b = 1, 1
    s1 = sum(a, b)
    s2 = sum(s1, b)
    m = minus(s1, s2)
    local_workflow = LocalWorkflow(m, workflow_name=workflow_name)
    local_workflow.set_storage(storage)
    return local_workflow.run()


def test_workflow_results_are_read_on_the_second_run(storage):
    calls: Counter = Counter()
    assert _test_storage(storage, calls) == -1
    assert calls == {"sum": 2, "minus": 1}
    assert storage.list_tasks(WF, "*") == [
        "_test_storage.<locals>.minus_0000",
        "_test_storage.<locals>.sum_0000",
        "_test_storage.<locals>.sum_0001",
    ]
    assert storage.read_task(WF, "_test_storage.<locals>.sum_0001") == 3
    calls.clear()
    assert _test_storage(storage, calls) == -1
    assert calls == {}  # nothing recomputed
    # Removing one node's result recomputes that node only.
    storage.remove_task(WF, "_test_storage.<locals>.sum_0001")
    assert _test_storage(storage, calls) == -1
    assert calls == {"sum": 1}
    # always_read: each result is read back after saving (and is what the workflow continues with).
    storage.remove_workflow(WF)
    storage.always_read = True
    calls.clear()
    assert _test_storage(storage, calls) == -1
    assert calls == {"sum": 2, "minus": 1}


def test_file_storage_layout_is_folders_of_freight_payloads(tmp_path):
    storage = storage_factory({"kind": "file", "options": {"path": str(tmp_path / "storage")}})
    _test_storage(storage, Counter())
    folder = tmp_path / "storage" / WF
    assert folder.is_dir()
    # One freight payload per node, "<path>/<workflow>/<task>" (key segments percent-encoded).
    assert sorted(p.name for p in folder.iterdir()) == [
        "_test_storage.%3Clocals%3E.minus_0000",
        "_test_storage.%3Clocals%3E.sum_0000",
        "_test_storage.%3Clocals%3E.sum_0001",
    ]
    assert freight.load(folder / "_test_storage.%3Clocals%3E.sum_0001") == 3
    # A second storage on the same folder (the next run of a script) reads the results.
    again = storage_factory({"kind": "file", "options": {"path": str(tmp_path / "storage")}})
    calls: Counter = Counter()
    assert _test_storage(again, calls) == -1 and calls == {}
    again.remove_workflow(WF)
    assert not folder.exists()
