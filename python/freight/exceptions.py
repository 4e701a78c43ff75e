"""The exception hierarchy of freight.

Every error a user can see is a :class:`FreightError`. Encoding errors are also
``pickle.PicklingError`` and decoding errors also ``pickle.UnpicklingError``, so code written
for pickle keeps catching them. The Rust extension raises these very classes (it imports them
with ``pyo3::import_exception!``), so there is one definition of each.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

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
    "PathError",
    "PathNotFoundError",
    "RefError",
    "RefGoneError",
    "RefSignatureError",
    "LazyReadError",
    "OptionError",
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
    library it uses, outside the crossings freight promises (numpy 1.26 and 2, pandas 2.2 and 3,
    pyarrow 15 and later, polars 1 and 2, which load silently), or its pickled parts by another
    Python minor version (see ``freight._versions``). Also raised, strict or not, when one
    promised generation truly cannot hold what the other wrote."""


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


class PathError(StorageError, OSError):
    """A payload file (``freight.dump`` / ``freight.load``) could not be read or written. Also
    the ``OSError`` it stands for, with its ``errno`` and ``filename``, so code written for
    ``open()`` keeps catching it; the message says what to check."""

    def __str__(self) -> str:  # OSError's "[Errno 2] ...: 'x'" reads badly; this is a sentence
        if self.filename is not None and self.strerror:
            return f"{self.filename}: {self.strerror}"
        return super().__str__()


class PathNotFoundError(PathError, FileNotFoundError):
    """``freight.load`` found no file at the path (also a ``FileNotFoundError``)."""


class RefError(StorageError, DeserializationError):
    """A :class:`freight.carrier.Ref` could not be stored or opened: not a reference, written by
    a newer freight, another backend's or namespace's, or its backend unreachable or full. Also a
    ``DeserializationError``: opening a reference is loading a value. The message says what to do."""


class RefGoneError(RefError):
    """The value a reference names is no longer there: it expired, was read already (read-once),
    was released, or its backend lost it (a program that ended, a cleaned ``/dev/shm``)."""


class RefSignatureError(RefError, IntegrityError):
    """A reference is unsigned, signed with another key, or changed after it was signed, where the
    codec has a key: refused before anything is fetched."""


class LazyReadError(FreightError, LookupError):
    """What was asked of a lazy value (``freight.lazy``, ``Store.lazy``) is not in it: a name it
    has no entry for, the entries of a value that is not a dict, list or tuple. The message lists
    what there is, or says to ``.load()`` the whole value."""


class OptionError(FreightError, TypeError):
    """A keyword argument that the function does not take (also a ``TypeError``, as Python
    raises for an unexpected keyword argument). The message names the function as it is called
    and the closest option it does take."""

    @classmethod
    def unexpected(cls, function: str, name: str, known: Iterable[str]) -> OptionError:
        """The error for ``function(name=...)``, where ``function`` takes the options ``known``."""
        import difflib  # only on this error path: it is not needed to import freight

        options = sorted(known)
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
        if close:
            hint = f"did you mean {close[0]!r}?"
        elif options:
            hint = "its options are " + ", ".join(options)
        else:
            hint = "it takes no options"
        return cls(f"{function}() got an unexpected keyword argument {name!r}; {hint}")


_F = TypeVar("_F", bound=Callable[..., Any])


def checks_options(public: str) -> Callable[[_F], _F]:
    """Makes an unexpected keyword argument of ``func`` an :class:`OptionError` naming
    ``public`` (the name users call it by) and the closest option it takes, rather than
    Python's TypeError naming the internal function. Only for functions without ``**kwargs``;
    the check runs only when the call fails."""

    def decorate(func: _F) -> _F:
        code = func.__code__
        known = frozenset(code.co_varnames[code.co_posonlyargcount : code.co_argcount + code.co_kwonlyargcount])
        known -= {"self"}

        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except TypeError as exc:
                # Raised by the call itself (no frame of func in the traceback): bad arguments.
                if exc.__traceback__ is not None and exc.__traceback__.tb_next is None:
                    unknown = next((name for name in kwargs if name not in known), None)
                    if unknown is not None:
                        raise OptionError.unexpected(public, unknown, known) from None
                raise

        return checked  # type: ignore[return-value]

    return decorate
