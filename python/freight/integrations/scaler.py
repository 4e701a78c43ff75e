"""Scaler integration: use freight as the wire format of an OpenGRIS Scaler client.

Pass a :class:`FreightSerializer` to the Scaler client. Scaler then uses it for the task
function, for each argument and for each result. The client sends the serializer instance to
the workers with cloudpickle, so freight must be installed on the workers too::

    from scaler import Client
    from freight.integrations.scaler import FreightSerializer

    with Client(address="tcp://127.0.0.1:2345", serializer=FreightSerializer()) as client:
        assert client.submit(pow, 2, 10).result() == 1024

    # Keyword options go to freight.Freight(...), here: compress and sign every payload.
    client = Client(address=..., serializer=FreightSerializer(compression="lz4", key=cluster_key))

Options Scaler cannot honour are refused when the serializer is built (``OptionError``):
``allow_pickle=False``, or ``allowed_tags`` without ``"pickle"``, would refuse every task on
the workers, since the task function itself travels through this serializer as pickle.

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
from freight.integrations import check_options

try:  # Scaler is an optional dependency (``pip install freight[scaler]``).
    from scaler.client.serializer.mixins import Serializer as _SerializerBase
except ImportError:  # pragma: no cover - exercised by a subprocess test
    _SerializerBase = object  # type: ignore[assignment,misc]

__all__ = ["FreightSerializer"]


# Why Scaler cannot run with pickle refused: the task function goes through the serializer too.
_NEEDS_PICKLE = (
    "Scaler sends each task's function through this serializer, and a function travels as pickle, "
    "so the workers would refuse every task. A Scaler worker runs the code its clients send: to "
    "accept only your clients' payloads, sign them with key= (and keep the cluster on a private network)"
)


def _check_options(options: dict[str, Any]) -> None:
    """Refuses, in the client, options Freight does not take and options Scaler cannot honour."""
    check_options("FreightSerializer", options, takes=("registry",))
    if "allow_pickle" in options and not options["allow_pickle"]:
        raise freight.OptionError(f"FreightSerializer() cannot take allow_pickle=False: {_NEEDS_PICKLE}; drop it")
    tags = options.get("allowed_tags")
    if tags is not None and not isinstance(tags, str):  # a str: Freight's own error
        tags = options["allowed_tags"] = list(tags)  # read once (an iterator)
    if tags is not None and not isinstance(tags, str) and "pickle" not in tags:
        raise freight.OptionError(
            f"FreightSerializer() cannot take allowed_tags without 'pickle' ({tags!r}): {_NEEDS_PICKLE}; "
            "add 'pickle' to the tags"
        )


class FreightSerializer(_SerializerBase):  # type: ignore[misc,valid-type]
    """A Scaler ``Serializer`` that encodes with :func:`freight.dumps` and decodes with :func:`freight.loads`.

    Args:
        **options: keyword arguments for :class:`freight.Freight` (``allow_pickle``, ``zero_copy``,
            ``verify``, ``checksum``, ...). With none, the module-level ``freight.dumps``/``freight.loads``
            are used.

    Raises:
        freight.OptionError: an option that :class:`freight.Freight` does not accept, or one that
            would refuse every task (``allow_pickle=False``, ``allowed_tags`` without
            ``"pickle"``): raised here, in the client, rather than on every worker (also a
            TypeError).
    """

    def __init__(self, **options: Any) -> None:
        _check_options(options)
        # The module-level Freight with these options changed, over the global registry: pickled
        # with the serializer as its options and a reference to the workers' global registry
        # (with no options, the module-level one itself, by reference).
        self._freight: freight.Freight = freight.DEFAULT.replace(**options)
        self._given = dict(options)  # as given, for options and repr

    @property
    def options(self) -> dict[str, Any]:
        """The options given for :class:`freight.Freight` (a copy); ``freight.options`` has them all."""
        return dict(self._given)

    @property
    def freight(self) -> freight.Freight:
        """The :class:`freight.Freight` this serializer encodes and decodes with."""
        return self._freight

    def serialize(self, obj: Any) -> bytes:  # type: ignore[override]
        """Encodes ``obj`` (a task function, an argument or a result) with freight."""
        data = self._freight.dumps(obj)
        return data if type(data) is bytes else bytes(data)

    def deserialize(self, payload: bytes) -> Any:  # type: ignore[override]
        """Decodes a payload written by :meth:`serialize`."""
        return self._freight.loads(payload)

    def __eq__(self, other: object) -> bool:
        """Equal when their :class:`freight.Freight` are: the same options, however spelled."""
        if type(other) is not type(self):
            return NotImplemented
        return self._freight == other._freight  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self._freight))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={'<set>' if k == 'key' else repr(v)}" for k, v in self._given.items())
        return f"{type(self).__name__}({args})"
