"""The notifications of one target's instant, held until they go out as one frame.

A gNMI target sends one sample instant as several notifications (one per
interface, or per container), all with the instant's timestamp. Downstream an
instant is one frame, known by (device, source, ts_ns), so the collector holds
a target's frames while they share a timestamp and sends them joined
(:func:`fabricops.core.frame_join.join_frames`) when a notification of another
instant comes, when the target says its initial state is complete, when the
subscription ends, or ``hold_s`` after the instant's first notification,
whichever is first. Touched on the collector's event loop only.
"""

from __future__ import annotations

import asyncio

from fabricops.core.frame import Frame


class HeldInstant:
    """The frames of one target's current instant, and when the first arrived."""

    def __init__(self) -> None:
        self.parts: list[Frame] = []
        self.received_ns = 0
        self.timer: asyncio.TimerHandle | None = None

    def belongs(self, frame: Frame) -> bool:
        """Whether ``frame`` is of the held instant (or nothing is held)."""
        return not self.parts or self.parts[0].ts_ns == frame.ts_ns

    def add(self, frame: Frame, received_ns: int) -> bool:
        """Hold ``frame`` (of this instant: see ``belongs``); True if it is the first."""
        first = not self.parts
        if first:
            self.received_ns = received_ns
        self.parts.append(frame)
        return first

    def take(self) -> list[Frame]:
        """The held frames (none if nothing is held), and nothing held after."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        parts, self.parts = self.parts, []
        return parts


__all__ = ["HeldInstant"]
