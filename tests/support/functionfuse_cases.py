"""What the FunctionFuse storage tests share (storage/test_functionfuse.py and
storage/test_functionfuse_serializers.py; the storages themselves are fixtures in
storage/conftest.py): the workflow's name, the S3 options of a storage on the test server, the
side files of a workflow, and a FunctionFuse-shaped persistent serializer that writes each Point
as a text file through FILE_PROTOCOL."""

from __future__ import annotations

import uuid

from freight.storage.functionfuse import FILE_PROTOCOL
from freight.storage.side_objects import SIDE

WF = "storage_test"


def s3_options(server, prefix: str) -> dict:
    return {
        "kind": "S3",
        "options": {
            "path": f"{server.bucket}/{prefix}",
            "s3fs": {
                "key": server.access_key_id,
                "secret": server.secret_access_key,
                "client_kwargs": {"endpoint_url": server.endpoint, "region_name": server.region},
            },
        },
    }


def side_keys(storage, workflow_name: str = WF) -> list[str]:
    """The side files the serializers wrote for the workflow's values (not the references
    freight records beside them)."""
    listed = storage.store.list_objects(f"{workflow_name}/", side_objects=True)
    return [o.key for o in listed if SIDE in o.key and not o.key.endswith(".ref")]


class Point:
    def __init__(self, x: int):
        self.x = x


def point_serializer(fail_on: int | None = None, remove_error: type[BaseException] | None = None):
    """A FunctionFuse-shaped serializer writing each Point as a text file through FILE_PROTOCOL;
    ``log`` records its calls and the protocols it was given."""

    class PointSerializer:
        serializer_class = Point
        name = "PointSerializer"
        log: list = []

        @classmethod
        def pickle(cls, obj, protocols):
            cls.log.append(("pickle", obj.x, protocols))
            if obj.x == fail_on:
                raise ValueError(f"cannot store {obj.x}")
            if obj.x < 0:
                return None  # pickle it as usual
            filename = f"point-{uuid.uuid4()}.txt"
            with protocols[FILE_PROTOCOL].open(filename, "w") as f:
                f.write(str(obj.x))
            return cls.name, ("0.0.0", filename)

        @classmethod
        def unpickle(cls, pid, protocols):
            cls.log.append(("unpickle", pid, protocols))
            with protocols[FILE_PROTOCOL].open(pid[1], "r") as f:
                return Point(int(f.read()))

        @classmethod
        def remove(cls, pid, protocols):
            cls.log.append(("remove", pid, protocols))
            if remove_error is not None:
                raise remove_error("cannot remove")
            protocols[FILE_PROTOCOL].remove(pid[1])

    return PointSerializer


def calls(serializer, kind: str) -> int:
    return sum(entry[0] == kind for entry in serializer.log)
