"""The notifications of one target's instant, held until they go out as one frame.

A gNMI target sends one sample instant as several notifications (one per
interface, or per container), all with the instant's timestamp. Downstream an
instant is one frame, known by (device, source, ts_ns), so the collector holds
a target's frames while they share a timestamp and sends them joined
(:func:`fabricops.core.frame_join.join_frames`) when a notification of another
instant comes, when the target says its initial state is complete, when the
subscription ends, or ``hold_s`` after the instant's first notification,
whichever is first. Holding costs latency (``hold_s``, and more when the loop
is busy), so only a target that splits its instants is held: a target's
notifications go out at once until one comes for the instant just sent (that
part goes out on its own, and the pipeline joins it); from then on its
instants are held, until ``SINGLE_INSTANTS`` in a row came whole. Touched on
the collector's event loop only.
"""

from __future__ import annotations

import asyncio
from typing import Final

from fabricops.core.frame import Frame

SINGLE_INSTANTS: Final = 3
"""Instants in a row sent in one notification each, after which a held target's
notifications go out at once again."""


class HeldInstant:
    """The frames of one target's current instant, and when the first arrived."""

    def __init__(self) -> None:
        self.parts: list[Frame] = []
        self.received_ns = 0
        self.timer: asyncio.TimerHandle | None = None
        self.singles = SINGLE_INSTANTS  # the last instants taken that were one part each
        self.taken_ns: int | None = None  # the time of the instant taken last

    def belongs(self, frame: Frame) -> bool:
        """Whether ``frame`` is of the held instant (or nothing is held)."""
        return not self.parts or self.parts[0].ts_ns == frame.ts_ns

    def add(self, frame: Frame, received_ns: int) -> bool:
        """Hold ``frame`` (of this instant: see ``belongs``); True if it is the first."""
        first = not self.parts
        if first:
            self.received_ns = received_ns
        if frame.ts_ns == self.taken_ns:  # a part of the instant taken last
            self.singles = 0
        self.parts.append(frame)
        return first

    @property
    def waits(self) -> bool:
        """Whether the instant waits for more parts (else it goes out at once)."""
        return self.singles < SINGLE_INSTANTS

    def take(self) -> list[Frame]:
        """The held frames (none if nothing is held), and nothing held after."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        parts, self.parts = self.parts, []
        if parts:
            self.singles = self.singles + 1 if len(parts) == 1 else 0
            self.taken_ns = parts[0].ts_ns
        return parts


__all__ = ["SINGLE_INSTANTS", "HeldInstant"]
