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
docs/guide/options.md. ``FreightOptions`` takes its field names from here.

Below the table: each option's normal form (what ``FreightOptions`` holds) and the checks of
option values of the wrong kind, in the codec's words (crates/freight-py/src/options.rs), which
stores and integrations share. Imports nothing of freight but its exceptions.
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from freight.exceptions import OptionError


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


# What the codec uses when an option is left out (crates/freight-py/src/options.rs, compress.rs).
_ZSTD_DEFAULT_LEVEL = 3
_AUTO_DEFAULT_SPEED = 1_000_000_000
_DEFAULT_MAX_SIZE = 16 << 30


def _normal_compression(value: Any) -> Any:
    """``compression=`` in one spelling per behaviour: None (also ``"none"``), ``"lz4"``,
    ``"zstd"`` (also ``("zstd", 3)``) or ``("zstd", level)``, ``"auto"`` (also
    ``("auto", 1e9)``) or ``("auto", bytes_per_second)`` as an int (the codec truncates it).
    Values the codec would refuse are kept as given (lists as tuples, to stay hashable)."""
    if value is None or value == "none":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], str):
        name, setting = value
        try:
            if name == "lz4":
                return "lz4"
            if name == "zstd":
                level = operator.index(setting)
                return "zstd" if level == _ZSTD_DEFAULT_LEVEL else ("zstd", level)
            if name == "auto":
                speed = int(float(setting))
                return "auto" if speed == _AUTO_DEFAULT_SPEED else ("auto", speed)
        except (TypeError, ValueError, OverflowError):
            pass
        return (name, setting)
    return tuple(value) if isinstance(value, list) else value


# The codec's words for option values of the wrong kind (crates/freight-py/src/options.rs), so
# that an option checked here reads as the same option checked there.
_TAGS_WORDS = 'allowed_tags must be None or a list of serializer tags (strings; "pickle" for pickle)'
_KEY_WORDS = "a key must be bytes (or a list of bytes to accept several on load)"
_EMPTY_KEY_WORDS = "an empty key signs nothing: use a long random secret (32 bytes or more)"
_NO_KEYS_WORDS = "key= got an empty list of keys; pass at least one key, or key=None to not sign or verify"


def is_flag(value: Any) -> bool:
    """Whether ``value`` is True or False: a bool, or numpy's bool (not imported for this)."""
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool"))


def flag(name: str, value: Any, default: bool | None) -> bool | None:
    """A yes/no option as the codec reads it: None is ``default``, True or False (numpy's bool
    too) is itself; anything else (``"false"``, 1, a list) is an :class:`OptionError` naming the
    option, not a truth value read from it."""
    if value is None:
        return default
    if is_flag(value):
        return bool(value)
    raise OptionError(f"{name}= takes True or False; got {value!r}")


def checked_keys(key: Any) -> tuple[bytes, ...]:
    """``key=`` by the codec's rule, as bytes: None is no key (an empty tuple); a bytes-like key
    (not empty); or a non-empty list or tuple of them (the first one signs). Anything else (a
    str, an int, which ``bytes()`` would make zero bytes of, True) is an :class:`OptionError`."""
    if key is None:
        return ()
    items = list(key) if isinstance(key, (list, tuple)) else [key]
    if not items:  # it must not quietly mean "no key": that would switch signing off
        raise OptionError(_NO_KEYS_WORDS)
    keys = []
    for item in items:
        if isinstance(item, (str, int)) or item is None:  # bytes(5): five zero bytes, not a key
            raise OptionError(_KEY_WORDS)
        try:
            raw = memoryview(item).tobytes()
        except TypeError:
            raise OptionError(_KEY_WORDS) from None
        if not raw:
            raise OptionError(_EMPTY_KEY_WORDS)
        keys.append(raw)
    return tuple(keys)


def _normal_key(key: Any) -> Any:
    """``key=`` as bytes, or a tuple of bytes for several (one key in a list is that key)."""
    keys = checked_keys(key)
    if not keys:
        return None
    return keys[0] if len(keys) == 1 else keys


def _normal_max_size(value: Any) -> int | None:
    """``max_size=`` as the codec reads it: None (also the default bound, given) or a whole
    number of bytes from 0 to 2**64-1; a bool, a str or a float is an :class:`OptionError`."""
    if value is None:
        return None
    try:
        if is_flag(value):  # an int to Python, but max_size=True is a mistake, not a bound of 1 byte
            raise TypeError
        size = operator.index(value)
    except TypeError:
        shown = "a bool" if is_flag(value) else repr(value)
        raise OptionError(
            f"max_size= takes a whole number of bytes (or None for the default bound); got {shown}"
        ) from None
    if not 0 <= size < 1 << 64:
        raise OptionError(
            f"max_size must be a number of bytes from 0 to 2**64-1 (the largest frame loads accepts); got {size}"
        )
    return None if size == _DEFAULT_MAX_SIZE else size


def tags_list(tags: Any) -> list[str] | None:
    """``allowed_tags=`` as a list of str (an iterator read once), or None; anything else (one
    string, which would be read as its letters, a number, a list holding a non-string) is an
    :class:`OptionError` in the codec's words."""
    if tags is None:
        return None
    if isinstance(tags, str):
        raise OptionError(_TAGS_WORDS)
    try:
        tags = list(tags)
    except TypeError:
        raise OptionError(_TAGS_WORDS) from None
    if not all(isinstance(tag, str) for tag in tags):
        raise OptionError(_TAGS_WORDS)
    return tags


def _normal_tags(tags: Any) -> tuple[str, ...] | None:
    listed = tags_list(tags)
    return None if listed is None else tuple(sorted(set(listed)))
