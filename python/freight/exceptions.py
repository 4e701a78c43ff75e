"""The exception hierarchy of freight.

Every error a user can see is a :class:`FreightError`. Encoding errors are also
``pickle.PicklingError`` and decoding errors also ``pickle.UnpicklingError``, so code written
for pickle keeps catching them. The Rust extension raises these very classes (it imports them
with ``pyo3::import_exception!``), so there is one definition of each.
"""

from __future__ import annotations

import pickle

__all__ = [
    "FreightError",
    "SerializationError",
    "DeserializationError",
    "UnknownTagError",
    "IntegrityError",
    "UnsafePayloadError",
    "FormatVersionError",
    "MissingDependencyError",
    "StorageError",
    "KeyNotFoundError",
    "KeyExistsError",
    "ProducerVersionError",
    "FreightWarning",
]


class FreightError(Exception):
    """Base class of every error freight raises."""


class SerializationError(FreightError, pickle.PicklingError):
    """An object could not be turned into a payload."""


class DeserializationError(FreightError, pickle.UnpicklingError):
    """A payload could not be turned back into an object: truncated, corrupt, or not freight."""


class UnknownTagError(DeserializationError):
    """The payload uses a serializer tag that is not registered on this side."""


class IntegrityError(DeserializationError):
    """A checksum (or signature) did not match: the bytes changed after they were written."""


class UnsafePayloadError(DeserializationError):
    """The payload would run pickle (arbitrary code) and loading was asked to refuse that."""


class FormatVersionError(DeserializationError):
    """The payload was written in a format version this build cannot read."""


class ProducerVersionError(DeserializationError):
    """With ``strict_versions=True``: the payload was written by another major version of a
    library it uses, or its pickled parts by another Python minor version (see
    ``freight._versions``)."""


class FreightWarning(FreightError, UserWarning):
    """Something to know about a payload that still loads (a producer version that differs).
    Also a FreightError, so that ``-W error`` turns it into one of freight's errors."""


class MissingDependencyError(DeserializationError, ImportError):
    """Decoding needs a library that is not installed; the message names what to install."""


class StorageError(FreightError):
    """A store could not be opened, read or written; the message names the store (its URL), the
    key and what to check (credentials, endpoint, bucket, folder permissions)."""


class KeyNotFoundError(StorageError, KeyError):
    """No value is stored under the key (also a ``KeyError``, as mappings raise)."""

    def __str__(self) -> str:  # KeyError quotes its argument; this message is a sentence
        return str(self.args[0]) if self.args else ""


class KeyExistsError(StorageError, FileExistsError):
    """``save(..., if_absent=True)`` found a value already stored under the key."""
