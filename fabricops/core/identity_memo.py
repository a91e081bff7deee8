"""What was worked out from some objects, found again by those very objects.

A decoder with ``EntityTables`` hands out a device's frames sharing one set of
column arrays, so a consumer can find what it derived from a layout by the
identity of those arrays instead of comparing their bytes. An entry holds its
objects, so their ids cannot be reused by others while it is kept.
"""

from __future__ import annotations

from typing import Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """Values keyed by the identity of a few objects; at most ``max_entries`` (then
    it starts over)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: dict[tuple[int, ...], tuple[tuple[object, ...], V]] = {}

    def get(self, *objs: object) -> V | None:
        """The value kept for exactly these objects, or None."""
        hit = self._entries.get(tuple(map(id, objs)))
        if hit is None:
            return None
        for a, b in zip(hit[0], objs, strict=True):
            if a is not b:
                return None
        return hit[1]

    def put(self, objs: tuple[object, ...], value: V) -> V:
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[tuple(map(id, objs))] = (objs, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
