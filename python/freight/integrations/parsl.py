"""Parsl integration: freight as the first serializer Parsl tries for data (arguments and results).

One line for the user, in the submitting program, before the apps run::

    import freight.integrations.parsl as fp
    fp.install()

Parsl serializes a task as three buffers: the function (its "code" methods: dill, cached per
function) and the positional and keyword arguments (its "data" methods). For data it tries the
methods of ``parsl.serialize.facade.methods_for_data`` in registration order and keeps the first
that does not raise: dill alone today, so numpy arrays and DataFrames are pickled in band.
:func:`install` registers :class:`FreightSerializer` with
``parsl.serialize.facade.register_method_for_data`` and moves it to the front (the dict is updated
in place: ``serialize`` looks it up by name). freight encodes anything (what it has no native form
for goes to cloudpickle inside the payload), so dill is reached only if freight raises.

How workers get it: every Parsl payload starts with its method's identifier, and for one it does
not know a worker imports ``module Class`` from the identifier and instantiates the class with no
argument (``facade.deserialize``). :class:`FreightSerializer`'s identifier is
``freight.integrations.parsl FreightSerializer``, so any worker with freight installed decodes
freight payloads without configuration. Parsl keeps such a dynamically loaded method for decoding
only; the first freight payload a process decodes also installs freight there for its own
serializing, so that results go back the way the arguments came (``reply_in_kind=False`` in
:func:`install` leaves workers' results to dill).

Options: ``install(**options)`` passes them to :class:`freight.Freight` for what this process
writes (``compression``, ``checksum``, ...). What a worker loads with is its own default (pickle
allowed: Parsl workers run the functions the submitter sends, so refusing pickle there protects
nothing), or the environment variable ``FREIGHT_PARSL_ALLOW_PICKLE=0`` where a worker must refuse
pickle payloads.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import freight

try:  # Parsl is an optional dependency (``pip install 'freight[parsl]'``).
    from parsl.serialize import facade as _facade
    from parsl.serialize.base import SerializerBase as _SerializerBase
except ImportError as e:  # pragma: no cover - depends on the environment
    raise freight.MissingDependencyError("freight.integrations.parsl needs Parsl: pip install 'freight[parsl]'") from e

__all__ = ["FreightSerializer", "install", "uninstall", "installed", "IDENTIFIER"]

#: What starts every freight payload in Parsl: how workers find this module and class.
IDENTIFIER = b"freight.integrations.parsl FreightSerializer"

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"reply_in_kind": True}


class FreightSerializer(_SerializerBase):  # type: ignore[misc]
    """A Parsl data serializer writing and reading freight payloads.

    Args:
        **options: keyword arguments of :class:`freight.Freight` for writing and reading. With
            none (how a worker instantiates it), the module-level codec, or pickle refused when
            the environment variable ``FREIGHT_PARSL_ALLOW_PICKLE`` is ``0``.
    """

    identifier = IDENTIFIER  # Parsl's default (module + class) spelled out: workers rely on it

    def __init__(self, **options: Any) -> None:
        if not options and os.environ.get("FREIGHT_PARSL_ALLOW_PICKLE", "1") == "0":
            options = {"allow_pickle": False}
        self.options = dict(options)
        self._codec: freight.Freight = freight.DEFAULT.replace(**options)

    def serialize(self, data: Any) -> bytes:
        out = self._codec.dumps(data)
        return out if type(out) is bytes else bytes(out)

    def deserialize(self, body: bytes) -> Any:
        if _STATE["reply_in_kind"] and not installed():
            # A worker decoding its first freight payload: its results go back through freight too.
            install()
        return self._codec.loads(body)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}({args})"


def install(*, reply_in_kind: bool = True, **options: Any) -> FreightSerializer:
    """Registers freight as the first data serializer Parsl tries, in this process.

    Args:
        reply_in_kind: True (default): a process that decodes a freight payload without having
            installed freight (a worker) installs it too, so its results travel as freight.
        **options: options of :class:`freight.Freight` for what this process writes.

    Returns:
        the registered serializer.

    Raises:
        freight.OptionError: an option :class:`freight.Freight` does not take.
    """
    serializer = FreightSerializer(**options)
    with _LOCK:
        _STATE["reply_in_kind"] = reply_in_kind
        methods = _facade.methods_for_data
        rest = [(k, v) for k, v in methods.items() if k != IDENTIFIER]
        _facade.register_method_for_data(serializer)
        # Parsl tries data methods in insertion order: rebuild the same dict with freight first.
        methods.clear()
        methods[IDENTIFIER] = serializer
        methods.update(rest)
    return serializer


def uninstall() -> None:
    """Removes freight from Parsl's data serializers in this process (freight payloads still load)."""
    with _LOCK:
        _facade.methods_for_data.pop(IDENTIFIER, None)
        _STATE["reply_in_kind"] = False


def installed() -> bool:
    """Whether freight is the first data serializer Parsl tries in this process."""
    return next(iter(_facade.methods_for_data), None) == IDENTIFIER
