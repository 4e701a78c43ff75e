"""The options of freight's codec, declared once.

Each option has its name, the codec calls that take it per call (``"dumps"``: ``dumps``,
``dumps_frames`` and what stores save with; ``"loads"``: ``loads`` and ``loads_frames``;
``"both"``), the value a :class:`freight.Freight` holds when it is left out (in
:class:`freight.FreightOptions`' normal form), and whether it is also a ``Freight(...)`` default
(``copy=`` is per call only).

Every other place that names them is checked against this table by ``tools/check_options.py``
(``make lint``, and tests/core/test_option_table.py): the extension's signatures
(``Codec.__new__``, ``dumps``, ``dumps_frames``, ``_dumps_parts``, ``loads``, ``loads_frames``),
``FreightOptions``, ``Freight``'s signature and defaults, the stubs and the options table of
docs/guide/options.md. ``FreightOptions`` takes its field names from here. Imports nothing.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Option(NamedTuple):
    name: str
    calls: str  # "dumps", "loads" or "both"
    default: Any
    per_instance: bool = True


OPTIONS: tuple[Option, ...] = (
    Option("allow_pickle", "loads", True),
    Option("zero_copy", "loads", False),
    Option("verify", "loads", None),
    Option("checksum", "dumps", False),
    Option("compression", "dumps", None),
    Option("key", "both", None),
    Option("max_size", "loads", None),
    Option("allowed_tags", "loads", None),
    Option("strict_versions", "loads", False),
    Option("copy", "loads", False, per_instance=False),
)

#: The options of ``Freight(...)`` and ``FreightOptions``, in declaration order.
INSTANCE_NAMES: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.per_instance)


def taken_by(call: str) -> tuple[str, ...]:
    """The options the codec's ``call`` ("dumps" or "loads") takes per call."""
    return tuple(o.name for o in OPTIONS if o.calls in (call, "both"))
