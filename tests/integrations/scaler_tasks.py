"""Task functions for tests/integrations/test_scaler.py.

Scaler starts its workers with ``spawn``, so tasks that are pickled by reference must live in an
importable module (not in a test file that the worker would have to import with pytest).
"""

from __future__ import annotations

import os
from typing import Any


def add(a: Any, b: Any) -> Any:
    return a + b


def double(arr: Any) -> Any:
    return arr * 2


def describe(obj: Any) -> tuple[str, str, int]:
    """Where the task ran and what it received: (type name, module of the type, worker pid)."""
    return type(obj).__name__, type(obj).__module__, os.getpid()


def enrich_frame(df: Any) -> Any:
    """Returns a new DataFrame: the input plus derived columns, sorted by ``x`` descending."""
    out = df.copy()
    out["x2"] = out["x"] * 2
    out["label"] = out["name"].str.upper() + "-" + out["x"].astype(str)
    return out.sort_values("x", ascending=False)


def apply(fn: Any, *args: Any) -> Any:
    """Calls a function that was sent as an argument (a lambda or closure from the client)."""
    return fn(*args)


def identity(obj: Any) -> Any:
    return obj


def describe_each(values: dict[str, Any]) -> dict[str, str]:
    """The top-level module of each value's type, as the worker received it."""
    return {name: type(v).__module__.split(".")[0] for name, v in values.items()}


def make_multiplier(k: Any) -> Any:
    """Returns a closure: it is created on the worker and must travel back to the client."""

    def multiply(x: Any) -> Any:
        return x * k

    return multiply


# --- a serializer that leaves a trace in the process that uses it -----------------------------

try:
    from freight.integrations.scaler import FreightSerializer
except ImportError:  # pragma: no cover - freight is required by the tests that use this
    FreightSerializer = object  # type: ignore[assignment,misc]

CALLS: list[tuple[str, str, tuple[tuple[str, Any], ...]]] = []


class RecordingSerializer(FreightSerializer):  # type: ignore[misc,valid-type]
    """FreightSerializer that records each call in this process's :data:`CALLS`, with its options."""

    def _record(self, what: str, obj: Any) -> None:
        CALLS.append((what, type(obj).__name__, tuple(sorted(self.options.items()))))

    def serialize(self, obj: Any) -> bytes:
        data = super().serialize(obj)
        self._record("serialize", obj)
        return data

    def deserialize(self, payload: bytes) -> Any:
        obj = super().deserialize(payload)
        self._record("deserialize", obj)
        return obj


def recorded_calls() -> list[tuple[str, str, tuple[tuple[str, Any], ...]]]:
    """The serializer calls seen so far by the worker process that runs this task."""
    return list(CALLS)


WRONG_KEY_MARKER = "sign this argument with another key"


class WrongKeySerializer(FreightSerializer):  # type: ignore[misc,valid-type]
    """Signs one marked argument with a key the cluster does not use: a worker must refuse it."""

    def serialize(self, obj: Any) -> bytes:
        if isinstance(obj, str) and obj == WRONG_KEY_MARKER:
            import freight

            return freight.Freight(key=b"not the cluster's key, 32 bytes!").dumps(obj)
        return super().serialize(obj)


def payload_facts(obj: Any) -> dict[str, Any]:
    """What the worker sees of a value it received: its type, and whether it is writable."""
    return {"type": type(obj).__name__, "writeable": bool(getattr(getattr(obj, "flags", None), "writeable", True))}
