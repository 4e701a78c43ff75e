"""Scaler integration: use freight as the wire format of an OpenGRIS Scaler client.

Pass a :class:`FreightSerializer` to the Scaler client. Scaler then uses it for the task
function, for each argument and for each result. The client sends the serializer instance to
the workers with cloudpickle, so freight must be installed on the workers too::

    from scaler import Client
    from freight.integrations.scaler import FreightSerializer

    with Client(address="tcp://127.0.0.1:2345", serializer=FreightSerializer()) as client:
        assert client.submit(pow, 2, 10).result() == 1024

    # Keyword options go to freight.Freight(...), here: refuse pickle payloads when decoding.
    client = Client(address=..., serializer=FreightSerializer(allow_pickle=False))

The :class:`freight.Freight` codec is created on first use, once per process. It is never
pickled: only its options go to the workers, so they must be picklable (plain flags are).
To use custom serializers, register them globally with :func:`freight.register` in a module
that the workers also import.

``FreightSerializer`` subclasses ``scaler.client.serializer.mixins.Serializer`` when Scaler
can be imported. Without Scaler, this module still imports and the class subclasses ``object``.
"""

from __future__ import annotations

import inspect
from typing import Any

import freight

try:  # Scaler is an optional dependency (``pip install freight[scaler]``).
    from scaler.client.serializer.mixins import Serializer as _SerializerBase
except ImportError:  # pragma: no cover - exercised by a subprocess test
    _SerializerBase = object  # type: ignore[assignment,misc]

__all__ = ["FreightSerializer"]


class FreightSerializer(_SerializerBase):  # type: ignore[misc,valid-type]
    """A Scaler ``Serializer`` that encodes with :func:`freight.dumps` and decodes with :func:`freight.loads`.

    Args:
        **options: keyword arguments for :class:`freight.Freight` (``allow_pickle``, ``zero_copy``,
            ``verify``, ``checksum``). With none, the module-level ``freight.dumps``/``freight.loads``
            are used. Options must be picklable: they are sent to the workers.

    Raises:
        TypeError: an option that :class:`freight.Freight` does not accept.
    """

    def __init__(self, **options: Any) -> None:
        # Check option names now, so that a typo fails in the client and not on every worker.
        inspect.signature(freight.Freight).bind(**options)
        self._options: dict[str, Any] = dict(options)
        self._codec: Any = None

    @property
    def options(self) -> dict[str, Any]:
        """The options for :class:`freight.Freight` (a copy)."""
        return dict(self._options)

    def _get_codec(self) -> Any:
        codec = self._codec
        if codec is None:
            # Scaler calls the serializer from several threads. A race here builds two
            # equivalent codecs, and either one can be kept.
            codec = freight.Freight(**self._options) if self._options else freight
            self._codec = codec
        return codec

    def serialize(self, obj: Any) -> bytes:  # type: ignore[override]
        """Encodes ``obj`` (a task function, an argument or a result) with freight."""
        data = self._get_codec().dumps(obj)
        return data if type(data) is bytes else bytes(data)

    def deserialize(self, payload: bytes) -> Any:  # type: ignore[override]
        """Decodes a payload written by :meth:`serialize`."""
        return self._get_codec().loads(payload)

    def __getstate__(self) -> dict[str, Any]:
        return {"options": dict(self._options)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._options = dict(state.get("options", {}))
        self._codec = None

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._options == other._options  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted((k, repr(v)) for k, v in self._options.items()))))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._options.items())
        return f"{type(self).__name__}({args})"
