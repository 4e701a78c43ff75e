"""FunctionFuse's persistent serializers on freight's one side-object mechanism: objects of
``serializer_class`` written by ``pickle`` through the protocols (FILE_PROTOCOL: the value's side
area, real files on a file storage; S3_PROTOCOL: s3fs and the area's folder in the bucket), read
back by ``unpickle``, removed by ``remove`` with their value; the serializers' own errors; the
earlier layout (.functionfuse/bigdata) refused with what to do."""

from __future__ import annotations

import io
import os
import pickle
import re
import sys
import types
from collections import Counter

import dask.array as da
import numpy as np
import pytest

import freight
from freight.exceptions import (
    DeserializationError,
    SerializationError,
    StorageError,
    UnknownTagError,
    UnsafePayloadError,
)
from freight.storage.functionfuse import (
    FILE_PROTOCOL,
    S3_PROTOCOL,
    FileStorage,
    MemoryStorage,
    storage_factory,
)
from freight.storage.side_objects import SIDE
from support.functionfuse_cases import WF, Point, calls, point_serializer, s3_options, side_keys
from support.functionfuse_workflow import DaskArraySerializer, LocalWorkflow, workflow

try:
    import s3fs  # noqa: F401

    HAVE_S3FS = True
except ImportError:
    HAVE_S3FS = False


# -- persistent serializers ----------------------------------------------------------------------------


def test_dask_arrays_in_hdf5_side_files_read_back_lazily(file_protocol_storage, tmp_path):
    """FunctionFuse's tests/built-in/serializers/dask_array_local_storage.py, counted."""
    storage = file_protocol_storage
    storage.always_read = True
    storage.register_persistent_serializers(DaskArraySerializer)
    calls: Counter = Counter()
    printed = []

    def run():
        @workflow
        def create_dask_array():
            calls["create"] += 1
            array = np.arange(10000)
            dask_array = da.from_array(array, chunks=(1000,))
            return dask_array * dask_array

        @workflow
        def print_array(array):
            calls["print"] += 1
            printed.append((type(array), array.compute()))
            return int(array.sum().compute())

        array = create_dask_array().set_name("dask_array")
        print_node = print_array(array).set_name("print")
        local_workflow = LocalWorkflow(print_node, workflow_name=WF)
        local_workflow.set_storage(storage)
        return local_workflow.run()

    DaskArraySerializer.calls.clear()
    expected = int((np.arange(10000) ** 2).sum())
    assert run() == expected
    assert calls == {"create": 1, "print": 1}
    # always_read: print_array got the array read back, a dask array over the HDF5 file.
    assert printed[0][0] is da.Array
    np.testing.assert_array_equal(printed[0][1], np.arange(10000) ** 2)
    assert DaskArraySerializer.calls == {"pickle": 1, "unpickle": 1}
    (side,) = side_keys(storage)
    assert side.startswith(f"{WF}/dask_array{SIDE}")  # beside the task's value
    if isinstance(storage, FileStorage):
        import h5py

        path = tmp_path / "storage" / side
        assert path.is_file() and h5py.is_hdf5(path)
    # The second run reads both results: nothing computed.
    assert run() == expected
    assert calls == {"create": 1, "print": 1}
    back = storage.read_task(WF, "dask_array")
    assert isinstance(back, da.Array) and back.chunks == ((1000,) * 10,)
    np.testing.assert_array_equal(back.compute(), np.arange(10000) ** 2)
    # Removing the task removes its side file (through the serializer's remove).
    storage.remove_task(workflow_name=WF, task_name="print")
    storage.remove_task(workflow_name=WF, task_name="dask_array")
    assert DaskArraySerializer.calls["remove"] == 1
    assert side_keys(storage) == [] and storage.store.list("") == []
    if isinstance(storage, FileStorage):
        assert not (tmp_path / "storage" / WF / f"dask_array{SIDE}").exists()
    assert run() == expected
    assert calls == {"create": 2, "print": 2}


def test_side_files_of_nested_values_and_their_removal(file_protocol_storage):
    storage = file_protocol_storage
    ser = point_serializer()
    storage.register_persistent_serializers(ser)
    storage.new_workflow(WF)
    value = {"points": [Point(1), Point(2)], "pair": (Point(3), "x"), "inline": Point(-5)}
    storage.save(WF, "t", value)
    assert calls(ser, "pickle") == 4
    assert len(side_keys(storage)) == 3  # the Point(-5) went into the payload (pickle gave None)
    back = storage.read_task(WF, "t")
    assert [p.x for p in back["points"]] == [1, 2] and back["pair"][0].x == 3 and back["pair"][1] == "x"
    assert back["inline"].x == -5 and type(back["inline"]) is Point
    # Each object's calls got the protocols of its own side area: FILE_PROTOCOL only.
    areas = {entry[0]: [] for entry in ser.log}
    for kind, _, protocols in ser.log:
        assert set(protocols) == {FILE_PROTOCOL}
        areas[kind].append(protocols[FILE_PROTOCOL].prefix)
    assert len(set(areas["pickle"])) == 4 and set(areas["unpickle"]) < set(areas["pickle"])
    assert all(area.startswith(f"{WF}/t{SIDE}") for area in areas["pickle"])
    storage.save(WF, "u", [Point(7)])
    assert len(side_keys(storage)) == 4
    storage.remove_task(WF, pattern="*")
    assert calls(ser, "remove") == 4
    assert side_keys(storage) == [] and storage.store.list("") == []


def test_saving_again_removes_the_side_files_of_the_replaced_value(file_protocol_storage):
    storage = file_protocol_storage
    ser = point_serializer()
    storage.register_persistent_serializers(ser)
    storage.save(WF, "t", [Point(1), Point(2)])
    first = side_keys(storage)
    storage.save(WF, "t", Point(3))
    second = side_keys(storage)
    assert len(second) == 1 and not set(first) & set(second)
    assert storage.read_task(WF, "t").x == 3
    storage.save(WF, "t", "plain")  # no side files at all now
    assert side_keys(storage) == []
    assert storage.read_task(WF, "t") == "plain"


def test_remove_workflow_calls_remove_and_cleans_everything(file_protocol_storage, tmp_path):
    storage = file_protocol_storage
    ser = point_serializer()
    storage.register_persistent_serializers(ser)
    storage.new_workflow(WF)
    storage.save(WF, "a", Point(1))
    storage.save(WF, "b", [Point(2), Point(3)])
    storage.save("other", "a", Point(4))
    storage.remove_workflow(WF)
    assert calls(ser, "remove") == 3
    assert storage.store.list(f"{WF}/") == []
    assert storage.read_task("other", "a").x == 4 and len(side_keys(storage, "other")) == 1
    if isinstance(storage, FileStorage):
        assert not (tmp_path / "storage" / WF).exists()


def test_a_failing_remove_still_removes_the_workflow():
    storage = MemoryStorage()
    ser = point_serializer(remove_error=PermissionError)
    storage.register_persistent_serializers(ser)
    storage.save(WF, "a", Point(1))
    with pytest.raises(PermissionError):
        storage.remove_task(WF, "a")  # nothing removed: the task is still there, to retry
    assert storage.read_task(WF, "a").x == 1
    with pytest.raises(StorageError, match="failed to remove a side object") as info:
        storage.remove_workflow(WF)
    assert isinstance(info.value.__cause__, PermissionError)
    assert storage.store.list("") == []


def test_a_side_file_already_gone_is_no_error_on_removal(file_protocol_storage):
    storage = file_protocol_storage
    ser = point_serializer()
    storage.register_persistent_serializers(ser)
    storage.save(WF, "a", Point(1))
    (side,) = side_keys(storage)
    ser.log[0][2][FILE_PROTOCOL].remove(side.rsplit("/", 1)[1])
    # Reading now fails as the serializer's open does (FileNotFoundError: a workflow recomputes).
    with pytest.raises(FileNotFoundError):
        storage.read_task(WF, "a")
    storage.remove_task(WF, "a")
    assert storage.store.list("") == []


def test_a_failing_serializer_raises_its_own_error_and_leaves_nothing(file_protocol_storage):
    storage = file_protocol_storage
    ser = point_serializer(fail_on=13)
    storage.register_persistent_serializers(ser)
    with pytest.raises(ValueError, match="cannot store 13"):
        storage.save(WF, "t", [Point(1), Point(2), Point(13)])
    assert not storage.file_exists(WF, "t")
    assert calls(ser, "remove") == 2  # the side files written before the failure
    assert storage.store.list("") == []


def test_reading_without_the_serializer_registered(tmp_path):
    path = str(tmp_path / "storage")
    storage = storage_factory({"kind": "file", "options": {"path": path}})
    storage.register_persistent_serializers(point_serializer())
    storage.save(WF, "t", Point(5))
    fresh = storage_factory({"kind": "file", "options": {"path": path}})
    with pytest.raises(UnknownTagError, match="functionfuse.PointSerializer") as info:
        fresh.read_task(WF, "t")
    assert isinstance(info.value, pickle.UnpicklingError)  # as FunctionFuse's unpickling fails
    fresh.register_persistent_serializers(point_serializer())
    assert fresh.read_task(WF, "t").x == 5
    # A task written with a serializer that is not registered is still removed with its side files.
    other = storage_factory({"kind": "file", "options": {"path": path}})
    other.remove_task(WF, "t")
    assert other.store.list("") == []


def test_persistent_objects_only_through_the_storage(tmp_path):
    storage = storage_factory({"kind": "file", "options": {"path": str(tmp_path / "s")}})
    storage.register_persistent_serializers(point_serializer())
    with pytest.raises(SerializationError, match="Store.save"):
        storage.freight.dumps(Point(1))
    storage.save(WF, "t", Point(1))
    with pytest.raises(UnsafePayloadError):  # decoding runs the serializer's code
        storage.store.load(f"{WF}/t", allow_pickle=False)
    with pytest.raises(DeserializationError, match="Store.load"):
        storage.freight.loads(storage.store.get_bytes(f"{WF}/t"))
    # The global registry is untouched: other Freight instances pickle Points as usual.
    assert freight.loads(freight.dumps(Point(2))).x == 2


def test_exact_type_dispatch_and_registration_checks(tmp_path):
    class SubPoint(Point):
        pass

    storage = MemoryStorage()
    ser = point_serializer()
    storage.register_persistent_serializers(ser)
    assert storage.persistent_serializers == {Point: ser} and storage.persistent_classes == {"PointSerializer": ser}
    storage.save(WF, "t", SubPoint(1))  # a subclass is pickled, as FunctionFuse's type(obj) lookup does
    assert calls(ser, "pickle") == 0 and type(storage.read_task(WF, "t")) is SubPoint
    with pytest.raises(SerializationError, match="serializer_class"):
        storage.register_persistent_serializers(object)
    # Registering again (or another one under the same name) replaces it.
    ser2 = point_serializer()
    storage.register_persistent_serializers(ser2)
    storage.save(WF, "u", Point(2))
    assert calls(ser, "pickle") == 0 and calls(ser2, "pickle") == 1


def test_names_with_awkward_characters_keep_their_side_files_apart(tmp_path):
    """Side files of a file storage are written beside freight's files under the same encoded
    names, so that the store lists them under the workflow's and task's names."""
    storage = storage_factory({"kind": "file", "options": {"path": str(tmp_path / "storage")}})
    ser = point_serializer()
    storage.register_persistent_serializers(ser)
    wf = "run <1> #2%"
    tasks = ["_test_storage.<locals>.sum_0000", "a", "x/y", "100%", "é ?*"]
    for i, task in enumerate(tasks):
        storage.save(wf, task, Point(i))
    owners = sorted({key[: key.index(SIDE)] for key in side_keys(storage, wf)})
    assert owners == sorted(f"{wf}/{task}" for task in tasks)  # each beside its task's value
    for i, task in enumerate(tasks):
        assert storage.read_task(wf, task).x == i
    assert storage.list_tasks(wf, "*") == sorted(t for t in tasks if "/" not in t)
    assert storage.list_tasks(wf, "x/*") == ["x/y"]
    storage.remove_workflow(wf)
    assert calls(ser, "remove") == len(tasks)  # the index of each task found and read
    assert storage.store.list("") == [] and not any((tmp_path / "storage").iterdir())


def test_tasks_a_and_a_slash_b_have_disjoint_side_areas():
    storage = MemoryStorage()  # (a file storage cannot hold both: "a" would be a file and a folder)
    storage.register_persistent_serializers(point_serializer())
    storage.save(WF, "a", Point(1))
    storage.save(WF, "a/b", Point(2))
    storage.remove_task(WF, "a")
    assert storage.read_task(WF, "a/b").x == 2
    assert len(side_keys(storage)) == 1


def test_memory_file_protocol_modes():
    storage = MemoryStorage()
    ser = point_serializer()
    storage.register_persistent_serializers(ser)
    storage.save(WF, "t", Point(1))
    files = ser.log[0][2][FILE_PROTOCOL]
    with files.open("f.bin", "wb") as f:
        f.write(b"abc")
    with files.open("f.bin", "ab") as f:
        f.write(b"def")
    with files.open("f.bin", "rb") as f:
        assert f.read() == b"abcdef"
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"x")
    with files.open("f.bin", "r+b") as f:
        f.seek(1)
        f.write(b"X")
    with files.open("f.bin", "rb") as f:
        assert f.read() == b"aXcdef"
    with pytest.raises(FileExistsError):
        files.open("f.bin", "xb")
    with files.open("sub/g.txt", "w") as f:
        f.write("text é")
    with files.open("sub/g.txt") as f:
        assert f.read() == b"text \xc3\xa9"  # "rb" by default
    with files.open("sub/g.txt", "r") as f:
        assert f.read() == "text é"
    files.remove("f.bin")
    with pytest.raises(FileNotFoundError):
        files.open("f.bin", "rb")
    with pytest.raises(FileNotFoundError):
        files.remove("f.bin")
    with pytest.raises(ValueError):
        files.open("f.bin", "rw")
    assert any(key.startswith(f"{WF}/t{SIDE}") and key.endswith("/sub/g.txt") for key in side_keys(storage))


# -- S3 ------------------------------------------------------------------------------------------------


def test_s3_serializers_need_s3fs(s3_server, monkeypatch):
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if it were not installed: import fails
    storage = storage_factory(s3_options(s3_server, "ff/no-s3fs"))
    with pytest.raises(StorageError, match=r"pip install 'freight\[s3fs\]'"):
        storage.register_persistent_serializers(DaskArraySerializer)
    assert storage.persistent_serializers == {}
    storage.save(WF, "t", 1)  # the storage itself works without s3fs
    assert storage.read_task(WF, "t") == 1


def test_s3_protocol_shape(s3_server, monkeypatch):
    """The S3 protocol: an s3fs.S3FileSystem made from the "s3fs" options as they are, and the
    task's folder in the bucket ("bucket/prefix/<workflow>/.functionfuse/bigdata/<task>"). With a
    stand-in s3fs module, so that it runs whether s3fs is installed or not."""
    made = []

    class FakeS3FileSystem:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
            made.append(self)

    monkeypatch.setitem(sys.modules, "s3fs", types.SimpleNamespace(S3FileSystem=FakeS3FileSystem))
    log = []

    class Recorder:
        serializer_class = Point
        name = "Recorder"

        @classmethod
        def pickle(cls, obj, protocols):
            log.append(("pickle", protocols))
            return cls.name, obj.x

        @classmethod
        def unpickle(cls, pid, protocols):
            log.append(("unpickle", protocols))
            return Point(pid)

        @classmethod
        def remove(cls, pid, protocols):
            log.append(("remove", protocols))

    opts = s3_options(s3_server, "ff/shape")
    storage = storage_factory(opts)
    storage.register_persistent_serializers(Recorder)
    storage.save(WF, "_test_storage.<locals>.sum_0000", Point(4))
    assert storage.read_task(WF, "_test_storage.<locals>.sum_0000").x == 4
    storage.remove_task(WF, "_test_storage.<locals>.sum_0000")
    assert [kind for kind, _ in log] == ["pickle", "unpickle", "remove"]
    folders = set()
    for _, protocols in log:
        assert list(protocols) == [S3_PROTOCOL]
        assert set(protocols[S3_PROTOCOL]) == {"client", "folder"}
        assert protocols[S3_PROTOCOL]["client"] is made[0]
        folders.add(protocols[S3_PROTOCOL]["folder"])
    # The side area beside the task's value, named as object_store names it (percent-encoded).
    (folder,) = folders
    assert re.fullmatch(
        rf"{s3_server.bucket}/ff/shape/{WF}/_test_storage\.%3Clocals%3E\.sum_0000\.freight-side/[0-9a-f]{{24}}/Recorder-0",
        folder,
    ), folder
    assert len(made) == 1 and made[0].kwargs == opts["options"]["s3fs"]
    assert storage.store.list("") == []


@pytest.mark.skipif(not HAVE_S3FS, reason="s3fs is not installed (freight[s3fs])")
def test_s3_dask_arrays_in_zarr_side_objects(s3_server):
    """FunctionFuse's tests/built-in/serializers/dask_array_s3.py, on the s3s-fs server."""
    storage = storage_factory(s3_options(s3_server, "ff/zarr"))
    storage.always_read = True
    storage.register_persistent_serializers(DaskArraySerializer)
    DaskArraySerializer.calls.clear()
    x = da.from_array(np.arange(10000), chunks=(1000,))
    storage.save(WF, "dask_array", {"x": x * x})
    sides = side_keys(storage)
    assert sides and all(k.startswith(f"{WF}/dask_array{SIDE}") and "/dask_arrays/" in k for k in sides)
    assert os.path.isdir(s3_server.data_dir / s3_server.bucket / "ff" / "zarr" / WF / f"dask_array{SIDE}")
    back = storage.read_task(WF, "dask_array")["x"]
    assert isinstance(back, da.Array)
    np.testing.assert_array_equal(back.compute(), np.arange(10000) ** 2)
    storage.remove_task(WF, "dask_array")
    assert DaskArraySerializer.calls == {"pickle": 1, "unpickle": 1, "remove": 1}
    assert storage.store.list("") == []


def test_values_stored_in_the_earlier_layout(tmp_path):
    """Earlier versions kept side files under <workflow>/.functionfuse/bigdata/ and wrote the tag
    functionfuse:<name>: such a value is refused with what to do; one kept in the payload
    (pickle returned None) still loads."""
    storage = storage_factory({"kind": "file", "options": {"path": str(tmp_path / "storage")}})
    storage.register_persistent_serializers(point_serializer())

    class Earlier:  # what the earlier storage's adapter wrote
        tag = "functionfuse:PointSerializer"
        types = (Point,)

        def __init__(self, side: bool):
            self.side = side

        def serialize(self, obj):
            if self.side:
                return ("PointSerializer", ("0.0.0", "point.txt")), []
            return None, [pickle.dumps(obj)]

        def deserialize(self, meta, frames):  # pragma: no cover - never called
            raise AssertionError

    for name, side in (("kept-beside", True), ("inline", False)):
        earlier = freight.Freight(registry=freight.registry.Registry(parent=freight.registry.GLOBAL))
        earlier.register(Earlier(side))
        storage.store.put_bytes(f"{WF}/{name}", earlier.dumps(Point(7), checksum=True))
    with pytest.raises(DeserializationError, match=r"earlier version of freight.*remove_task, remove_workflow"):
        storage.read_task(WF, "kept-beside")
    assert storage.read_task(WF, "inline").x == 7
    storage.store.put_bytes(f"{WF}/.functionfuse/index/kept-beside", freight.dumps([]))
    assert storage.list_tasks(WF, ".*/*/*") == []  # the earlier layout's own keys are no tasks
    storage.remove_workflow(WF)
    assert storage.store.list_objects("", side_objects=True) == []
