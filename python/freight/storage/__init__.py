"""Where payloads are kept: a store of named values on a local folder (the default), in memory,
or in S3, on Rust's ``object_store`` (crates/freight-store), every call with the GIL released.

>>> import freight.storage as fs
>>> store = fs.open("file://./results")          # or a plain path; "memory://"; "s3://bucket/prefix"
>>> store.save("run-3/prices", prices)          # compression="auto" by default
>>> prices = store.load("run-3/prices")         # mmap=True on local files: arrays view the file
>>> store.info("run-3/prices")["size"], store.list("run-3/"), "run-3/prices" in store

Values are written atomically (a reader sees the old value or the whole new one) and streamed
from the objects' own memory (large values are never assembled in memory as a whole). Each
stored value is an ordinary ``dumps`` payload: ``freight.load(path)`` and ``python -m freight
inspect`` read the files of a local store directly (a key's characters that are unsafe in file
names, such as ``<``, ``>``, ``#``, ``%`` or a ``..`` segment, are percent-encoded there:
``_t.<locals>.s_0`` is the file ``_t.%3Clocals%3E.s_0``; ``python -m freight inspect URL KEY``
takes the key as it is).

Opening creates nothing: a local store's folder is created by its first save, and reading a
store whose folder does not exist finds no values.

Modules: ``opening`` (:func:`open`, URL checks), ``store`` (:class:`Store`: values, and the
stored objects as they are), ``side`` and ``persistent`` (values kept beside the envelope in their
own format), ``copy`` (:func:`copy_values`, byte for byte between stores), ``zarr_store``,
``progress``, ``functionfuse`` (FunctionFuse's storage interface).
"""

from __future__ import annotations

from freight.exceptions import KeyExistsError, KeyNotFoundError, StorageError
from freight.storage.copy import copy_values
from freight.storage.opening import missing_folder, open
from freight.storage.store import Store, StoredObject

__all__ = [
    "open",
    "Store",
    "StoredObject",
    "copy_values",
    "missing_folder",
    "StorageError",
    "KeyNotFoundError",
    "KeyExistsError",
]
