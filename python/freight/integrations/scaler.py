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

The serializer holds a :class:`freight.Freight` built from the options, and pickles with it: a
``Freight`` pickles as its options, so those must be picklable (plain flags and keys are). To use
custom serializers, register them globally with :func:`freight.register` in a module that the
workers also import.

``FreightSerializer`` subclasses ``scaler.client.serializer.mixins.Serializer`` when Scaler
can be imported. Without Scaler, this module still imports and the class subclasses ``object``.
"""

from __future__ import annotations

from typing import Any

import freight
from freight import _api

try:  # Scaler is an optional dependency (``pip install freight[scaler]``).
    from scaler.client.serializer.mixins import Serializer as _SerializerBase
except ImportError:  # pragma: no cover - exercised by a subprocess test
    _SerializerBase = object  # type: ignore[assignment,misc]

__all__ = ["FreightSerializer"]


class FreightSerializer(_SerializerBase):  # type: ignore[misc,valid-type]
    """A Scaler ``Serializer`` that encodes with :func:`freight.dumps` and decodes with :func:`freight.loads`.

    Args:
        **options: keyword arguments for :class:`freight.Freight` (``allow_pickle``, ``zero_copy``,
            ``verify``, ``checksum``, ...). With none, the module-level ``freight.dumps``/``freight.loads``
            are used.

    Raises:
        TypeError: an option that :class:`freight.Freight` does not accept (raised here, in the
            client, rather than on every worker).
    """

    def __init__(self, **options: Any) -> None:
        self._options: dict[str, Any] = dict(options)
        # Pickled with the serializer: a Freight pickles as its options (and its own registry
        # layer), the module-level one as a reference to the workers' module-level one.
        self._freight: freight.Freight = freight.Freight(**options) if options else _api._DEFAULT

    @property
    def options(self) -> dict[str, Any]:
        """The options for :class:`freight.Freight` (a copy)."""
        return dict(self._options)

    def serialize(self, obj: Any) -> bytes:  # type: ignore[override]
        """Encodes ``obj`` (a task function, an argument or a result) with freight."""
        data = self._freight.dumps(obj)
        return data if type(data) is bytes else bytes(data)

    def deserialize(self, payload: bytes) -> Any:  # type: ignore[override]
        """Decodes a payload written by :meth:`serialize`."""
        return self._freight.loads(payload)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._options == other._options  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted((k, repr(v)) for k, v in self._options.items()))))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._options.items())
        return f"{type(self).__name__}({args})"
