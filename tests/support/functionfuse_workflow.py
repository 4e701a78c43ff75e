"""A small FunctionFuse look-alike for the tests of freight.storage.functionfuse (FunctionFuse,
github.com/IBM/functionfuse, is not on PyPI): the ``@workflow`` decorator, nodes named as
FunctionFuse names them (``<qualname>_<index:04d>``, counted per function, or ``set_name``),
``LocalWorkflow.run`` calling the storage as FunctionFuse's does (``new_workflow``, then per node
``read_task`` or, on FileNotFoundError, compute, ``save`` and, with ``always_read``, ``read_task``),
and persistent serializers of FunctionFuse's shape (``DaskArraySerializer``: HDF5 files through
FILE_PROTOCOL, zarr arrays through S3_PROTOCOL).
"""

from __future__ import annotations

import posixpath
import uuid
from collections import defaultdict
from typing import Any

from dask.array.core import Array

from freight.storage.functionfuse import FILE_PROTOCOL, S3_PROTOCOL

# -- workflow -------------------------------------------------------------------------------------


class Node:
    def __init__(self, name: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.name, self.func, self.args, self.kwargs = name, func, args, kwargs
        self.result: Any = None

    def set_name(self, name: str) -> Node:
        self.name = name
        return self

    def __getitem__(self, index: Any) -> NodeItem:
        return NodeItem(self, index)

    def parents(self) -> list[Node]:
        found = []
        for value in (*self.args, *self.kwargs.values()):
            node = value.node if isinstance(value, NodeItem) else value
            if isinstance(node, Node) and node not in found:
                found.append(node)
        return found


class NodeItem:
    def __init__(self, node: Node, index: Any):
        self.node, self.index = node, index


def _value(arg: Any) -> Any:
    if isinstance(arg, Node):
        return arg.result
    if isinstance(arg, NodeItem):
        return arg.node.result[arg.index]
    return arg


class _NodeFactory:
    index: defaultdict[Any, int] = defaultdict(int)

    def __init__(self, func: Any):
        self.func = func

    def __call__(self, *args: Any, **kwargs: Any) -> Node:
        index = _NodeFactory.index[self.func]
        _NodeFactory.index[self.func] += 1
        return Node(f"{self.func.__qualname__}_{index:04d}", self.func, args, kwargs)


def workflow(func: Any) -> _NodeFactory:
    return _NodeFactory(func)


class LocalWorkflow:
    def __init__(self, *nodes: Node, workflow_name: str):
        self.leaves = list(nodes)
        self.workflow_name = workflow_name
        self.object_storage: Any = None

    def set_storage(self, object_storage: Any) -> None:
        self.object_storage = object_storage

    def _order(self) -> list[Node]:
        order: list[Node] = []

        def visit(node: Node) -> None:
            if node in order:
                return
            for parent in node.parents():
                visit(parent)
            order.append(node)

        for leaf in self.leaves:
            visit(leaf)
        return order

    def run(self) -> Any:
        storage = self.object_storage
        if storage:
            storage.new_workflow(self.workflow_name)
        for node in self._order():
            if storage:
                try:
                    node.result = storage.read_task(self.workflow_name, node.name)
                    continue
                except FileNotFoundError:
                    pass
            node.result = node.func(*[_value(a) for a in node.args], **{k: _value(v) for k, v in node.kwargs.items()})
            if storage:
                storage.save(self.workflow_name, node.name, node.result)
                if storage.always_read:
                    node.result = storage.read_task(self.workflow_name, node.name)
        if len(self.leaves) == 1:
            return self.leaves[0].result
        return [leaf.result for leaf in self.leaves]


# -- persistent serializers -----------------------------------------------------------------------


class DaskArraySerializer:
    """FunctionFuse's DaskArraySerializer, in its shape: a dask array as an HDF5 file (FILE_PROTOCOL)
    or a zarr array (S3_PROTOCOL); pid = (version, filename); unpickle gives a lazy dask array."""

    datapath = "dask_arrays"
    name = "HDFSerializer"
    serializer_class = Array
    calls: defaultdict[str, int] = defaultdict(int)

    @classmethod
    def _zarr_root(cls, s3: dict[str, Any], mode: str) -> Any:
        import zarr

        mapper = s3["client"].get_mapper(posixpath.join(s3["folder"], cls.datapath))
        return zarr.open_group(store=mapper, mode=mode)

    @classmethod
    def pickle(cls, obj: Any, protocols: dict[str, Any]) -> tuple[str, Any]:
        import dask.array as da
        import h5py

        cls.calls["pickle"] += 1
        filename = str(uuid.uuid4())
        if FILE_PROTOCOL in protocols:
            with protocols[FILE_PROTOCOL].open(filename, "wb") as f, h5py.File(f, mode="w") as hdf:
                dset = hdf.create_dataset(cls.datapath, obj.shape, dtype=obj.dtype, chunks=obj.chunksize)
                da.store(obj, dset)
        else:
            root = cls._zarr_root(protocols[S3_PROTOCOL], "a")
            array = root.create_array(filename, shape=obj.shape, chunks=obj.chunksize, dtype=obj.dtype)
            da.store(obj, array, lock=False)
        return cls.name, ("0.0.0", filename)

    @classmethod
    def unpickle(cls, pid: Any, protocols: dict[str, Any]) -> Any:
        import dask.array as da
        import h5py

        cls.calls["unpickle"] += 1
        _, filename = pid
        if FILE_PROTOCOL in protocols:
            f = protocols[FILE_PROTOCOL].open(filename, "rb")
            dset = h5py.File(f, mode="r")[cls.datapath]
        else:
            dset = cls._zarr_root(protocols[S3_PROTOCOL], "r")[filename]
        return da.from_array(dset, chunks=dset.chunks)

    @classmethod
    def remove(cls, pid: Any, protocols: dict[str, Any]) -> None:
        cls.calls["remove"] += 1
        _, filename = pid
        if FILE_PROTOCOL in protocols:
            protocols[FILE_PROTOCOL].remove(filename)
        else:
            s3, client = protocols[S3_PROTOCOL], protocols[S3_PROTOCOL]["client"]
            # FunctionFuse's does client.rm(path, recursive=True), which lists through s3fs's
            # find(); the s3s-fs test server's listings confuse that (it finds "<path>/" twice and
            # deletes nothing), so the objects are listed with a plain ListObjectsV2.
            bucket, _, key = posixpath.join(s3["folder"], cls.datapath, filename).partition("/")
            listed = client.call_s3("list_objects_v2", Bucket=bucket, Prefix=key + "/").get("Contents", [])
            client.rm([f"{bucket}/{item['Key']}" for item in listed])
