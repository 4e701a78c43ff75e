"""The pickle bridge: one pickler per payload for everything the native walker cannot encode.

The Rust encoder calls :func:`dump` with a *sink*. The sink's ``persistent_id`` hands numpy
arrays, registered types and large buffers found anywhere in the object graph back to freight,
which encodes them as nodes and frames; ``buffer_callback`` turns protocol-5 out-of-band buffers
into frames. Plain pickle is tried first (fast); when it fails, or the sink sees a lambda, a
local function or anything defined in ``__main__``, the whole payload is pickled again by one
cloudpickle pickler, so identity holds across the payload (the same function twice is one
function; functions share their globals; dynamic classes stay the same class).
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from freight.exceptions import DeserializationError, SerializationError

PROTOCOL = 5


class NeedsCloudpickle(Exception):
    """Raised by the sink when plain pickle would pickle something by a reference that does not
    resolve on the other side (a lambda, a local, anything in ``__main__``)."""


def _pickler(cloud: bool, file: io.BytesIO, sink: Any) -> pickle.Pickler:
    if cloud:
        import cloudpickle

        pickler = cloudpickle.Pickler(file, protocol=PROTOCOL, buffer_callback=sink.buffer_callback)
    else:
        pickler = pickle.Pickler(file, protocol=PROTOCOL, buffer_callback=sink.buffer_callback)
    pickler.persistent_id = sink.persistent_id  # type: ignore[method-assign]
    return pickler


def dump(obj: Any, sink: Any) -> tuple[bytes, bool]:
    """Pickles ``obj`` (with plain pickle, else cloudpickle). Returns (stream, used_cloudpickle)."""
    file = io.BytesIO()
    sink.begin(False)
    try:
        _pickler(False, file, sink).dump(obj)
        return file.getvalue(), False
    except (NeedsCloudpickle, pickle.PicklingError, TypeError, AttributeError, RecursionError, ValueError):
        pass
    file = io.BytesIO()
    sink.begin(True)
    try:
        _pickler(True, file, sink).dump(obj)
    except RecursionError as exc:
        raise SerializationError(
            f"{type(obj).__name__} nests too deeply for pickle ({exc}); flatten it or raise sys.setrecursionlimit"
        ) from exc
    except SerializationError:
        raise
    except Exception as exc:
        raise SerializationError(
            f"cannot serialize {type(obj).__module__}.{type(obj).__qualname__}: neither freight's native "
            f"encoder, a registered serializer, pickle nor cloudpickle could encode it ({type(exc).__name__}: "
            f"{exc}); register a serializer for its type with freight.register"
        ) from exc
    return file.getvalue(), True


def load(data: Any, buffers: list[Any], source: Any, producer: str | None) -> Any:
    """Unpickles a stream written by :func:`dump`; ``source.persistent_load`` decodes externals."""
    unpickler = pickle.Unpickler(io.BytesIO(data), buffers=buffers)
    unpickler.persistent_load = source.persistent_load  # type: ignore[method-assign]
    try:
        return unpickler.load()
    except DeserializationError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, KeyError, IndexError, TypeError, OverflowError) as exc:
        hint = f" (written by {producer})" if producer else ""
        raise DeserializationError(f"the pickle part of the payload{hint} is corrupt: {type(exc).__name__}: {exc}") from exc
    except (AttributeError, ModuleNotFoundError, ImportError) as exc:
        hint = f" (written by {producer})" if producer else ""
        raise DeserializationError(
            f"the pickle part of the payload{hint} refers to code this process cannot import: "
            f"{type(exc).__name__}: {exc}; install the same modules (and versions) on this side"
        ) from exc
