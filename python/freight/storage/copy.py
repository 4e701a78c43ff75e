"""Copying stored values between stores byte for byte: the payloads as they are, never decoded
(signatures, checksums and compression stay), each with its side objects, which are written
before the value's envelope (a reader of the destination never sees an envelope without them);
the destination's side objects of other saves are removed after it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from freight.exceptions import KeyExistsError, KeyNotFoundError
from freight.storage.progress import progress
from freight.storage.side_objects import SIDE, is_side_key, side_owner, side_save_id

if TYPE_CHECKING:
    from freight.storage.progress import Progress
    from freight.storage.store import Store

__all__ = ["CopyItem", "copy_values", "plan_copy", "copy_items"]


class CopyItem:
    """A value to copy: its key and size, and its side objects [(key, size)]. (A plain class:
    ``dataclasses`` imports ``inspect``, which ``import freight.storage`` need not pay for.)"""

    __slots__ = ("key", "size", "side")

    def __init__(self, key: str, size: int, side: list[tuple[str, int]] | None = None):
        self.key = key
        self.size = size
        self.side: list[tuple[str, int]] = [] if side is None else side

    def __repr__(self) -> str:
        return f"CopyItem({self.key!r}, {self.size}, {self.side!r})"

    @property
    def nbytes(self) -> int:
        return self.size + sum(size for _, size in self.side)


def plan_copy(src: Store, keys: Iterable[str], prefix: str | None) -> tuple[list[CopyItem], list[str]]:
    """What to copy: ``keys``, then the values under ``prefix`` (each once, side objects with
    their value); and the named keys that ``src`` does not have."""
    plan: list[CopyItem] = []
    missing: list[str] = []
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        try:
            size = src.head(key).size
        except KeyNotFoundError:
            missing.append(key)
            continue
        side = [] if is_side_key(key) else [(o.key, o.size) for o in src.list_objects(key + SIDE, side_objects=True)]
        plan.append(CopyItem(key, size, side))
    if prefix is not None:
        listed = [(o.key, o.size) for o in src.list_objects(prefix, side_objects=True)]
        items = {key: CopyItem(key, size) for key, size in listed if not is_side_key(key) and key not in seen}
        for key, size in listed:
            if not is_side_key(key) or key in seen:
                continue
            owner = side_owner(key)
            if owner in items:
                items[owner].side.append((key, size))
            elif owner not in seen:  # a side object whose value is not copied: copied as it is
                items[key] = CopyItem(key, size)
        plan += sorted(items.values(), key=lambda item: item.key)
    return plan, missing


def _put(src: Store, dst: Store, key: str, if_absent: bool = False) -> int:
    """Copies one stored object as it is; returns its size."""
    data = src.get_bytes(key)
    try:
        dst.put_bytes(key, data, if_absent=if_absent)
        return len(data)
    finally:
        del data  # a map of a large local file: released now, not at the end of the copy


def _copy_one(src: Store, dst: Store, item: CopyItem, if_absent: bool, bar: Progress) -> tuple[str, int]:
    """Copies a value: its side objects, then its envelope, then removes the destination's side
    objects of other saves. ("copied", bytes), or ("kept", 0) when ``if_absent`` found a value."""
    if if_absent and dst.exists(item.key):
        bar.update(item.nbytes)
        return "kept", 0
    nbytes = 0
    for key, _ in item.side:
        size = _put(src, dst, key)
        nbytes += size
        bar.update(size)
    try:
        size = _put(src, dst, item.key, if_absent)
    except KeyExistsError:  # a racing writer: the side objects just written stay unreferenced
        bar.update(item.size)
        return "kept", 0
    nbytes += size
    bar.update(size)
    if not is_side_key(item.key):
        keep = {side_save_id(key) for key, _ in item.side}
        stale = {side_save_id(o.key) for o in dst.list_objects(item.key + SIDE, side_objects=True)} - keep
        dst._drop_saves([f"{item.key}{SIDE}{save_id}/" for save_id in sorted(stale)], errors=[])
    return "copied", nbytes


def copy_items(
    src: Store, dst: Store, plan: list[CopyItem], if_absent: bool
) -> Iterator[tuple[CopyItem, str, int, Progress]]:
    """Copies the values of ``plan`` under a progress bar; yields (item, event, bytes, bar)."""
    with progress(sum(item.nbytes for item in plan), "copying") as bar:
        for item in plan:
            bar.note(item.key)
            event, nbytes = _copy_one(src, dst, item, if_absent, bar)
            yield item, event, nbytes, bar


def copy_values(
    src: Store, dst: Store, keys: Iterable[str] | None = None, *, prefix: str | None = None, if_absent: bool = False
) -> list[tuple[str, str, int]]:
    """Copies values from ``src`` to ``dst`` under the same keys, byte for byte: the stored
    payloads, never decoded (signatures, checksums and compression stay as they are), with
    their side objects. Either store may be any backend, ``memory://`` included.

    Args:
        keys: the keys to copy (and those under ``prefix``); every value when both are None.
        prefix: also copy every value whose key starts with this.
        if_absent: keep what ``dst`` already has under a key.

    Returns:
        [(key, "copied" or "kept", bytes copied)], in the order copied.

    Raises:
        KeyNotFoundError: a named key is not in ``src`` (checked before anything is copied).

    A progress bar (:mod:`freight.storage.progress`) counts the bytes when they add up to
    64 MiB or more, stderr is a terminal and tqdm is installed.
    """
    if keys is None and prefix is None:
        prefix = ""
    plan, missing = plan_copy(src, keys or (), prefix)
    if missing:
        src.head(missing[0])  # raises the KeyNotFoundError, with the store's message
    return [(item.key, event, nbytes) for item, event, nbytes, _ in copy_items(src, dst, plan, if_absent)]
