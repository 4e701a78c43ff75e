"""freight: type-aware serialization for Python data and functions, with its core in Rust.

>>> import freight
>>> freight.loads(freight.dumps({"a": [1, 2.5, "three"]}))
{'a': [1, 2.5, 'three']}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from freight._api import (
    DEFAULT,
    Freight,
    FreightOptions,
    dump,
    dumps,
    dumps_frames,
    inspect,
    load,
    loads,
    loads_frames,
    register,
    unregister,
    verify,
)
from freight._freight import __version__
from freight.exceptions import (
    DeserializationError,
    FormatVersionError,
    FreightError,
    FreightWarning,
    IntegrityError,
    KeyExistsError,
    KeyNotFoundError,
    LazyReadError,
    MissingDependencyError,
    OptionError,
    PathError,
    PathNotFoundError,
    ProducerVersionError,
    RefError,
    RefGoneError,
    RefSignatureError,
    SerializationError,
    StorageError,
    UnknownTagError,
    UnsafePayloadError,
)
from freight.registry import Registry

if TYPE_CHECKING:
    from freight._lazy import LazyArray, LazyValue, lazy


def __getattr__(name: str) -> Any:
    # Lazy reads are imported on first use: `import freight` stays the codec alone.
    if name in ("lazy", "LazyValue", "LazyArray"):
        import freight._lazy

        return getattr(freight._lazy, name)
    raise AttributeError(f"module 'freight' has no attribute {name!r}")


__all__ = [
    "__version__",
    "Freight",
    "DEFAULT",
    "FreightOptions",
    "Registry",
    "dumps",
    "loads",
    "dumps_frames",
    "loads_frames",
    "dump",
    "load",
    "inspect",
    "verify",
    "lazy",
    "LazyValue",
    "LazyArray",
    "LazyReadError",
    "register",
    "unregister",
    "FreightError",
    "SerializationError",
    "DeserializationError",
    "UnknownTagError",
    "IntegrityError",
    "UnsafePayloadError",
    "FormatVersionError",
    "MissingDependencyError",
    "ProducerVersionError",
    "FreightWarning",
    "StorageError",
    "KeyNotFoundError",
    "KeyExistsError",
    "PathError",
    "PathNotFoundError",
    "RefError",
    "RefGoneError",
    "RefSignatureError",
    "OptionError",
]
