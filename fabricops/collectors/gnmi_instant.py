"""The notifications of one target's instant, held until they go out as one frame.

A gNMI target sends one sample instant as several notifications (one per
interface, or per container), all with the instant's timestamp, or (a target
that stamps each notification as it reads it) with timestamps a few
milliseconds apart. Downstream an instant is one frame, known by (device,
source, ts_ns), so the collector holds a target's frames while they are of one
instant (timestamps within ``within_ns`` of its first: ``join_within_s``, 0 by
default) and sends them joined (:func:`fabricops.core.frame_join.join_frames`)
at the instant's time when a notification of another instant comes, when the
target says its initial state is complete, when the subscription ends, or
``hold_s`` after the instant's first notification, whichever is first.

Holding costs latency (``hold_s``, and more when the loop is busy), so only a
target that splits its instants is held: a target's notifications go out at
once until one comes for the instant just sent (that part goes out on its own,
at that instant's time, and the pipeline joins it); from then on its instants
are held, until ``SINGLE_INSTANTS`` in a row came whole. Touched on the
collector's event loop only.
"""

from __future__ import annotations

import asyncio
from typing import Final

from fabricops.core.frame import Frame

SINGLE_INSTANTS: Final = 3
"""Instants in a row sent in one notification each, after which a held target's
notifications go out at once again."""


class HeldInstant:
    """The frames of one target's current instant, its time, and when the first arrived."""

    def __init__(self) -> None:
        self.parts: list[Frame] = []
        self.ts_ns = 0  # the instant's time: its first part's, or the instant taken last's
        self.received_ns = 0
        self.timer: asyncio.TimerHandle | None = None
        self.singles = SINGLE_INSTANTS  # the last instants taken that were one part each
        self.taken_ns: int | None = None  # the time of the instant taken last

    def belongs(self, frame: Frame, within_ns: int = 0) -> bool:
        """Whether ``frame`` is of the held instant (or nothing is held)."""
        return not self.parts or abs(frame.ts_ns - self.ts_ns) <= within_ns

    def add(self, frame: Frame, received_ns: int, within_ns: int = 0) -> bool:
        """Hold ``frame`` (of this instant: see ``belongs``); True if it is the first."""
        first = not self.parts
        late = self.taken_ns is not None and abs(frame.ts_ns - self.taken_ns) <= within_ns
        if late:  # a part of the instant taken last
            self.singles = 0
        if first:
            self.received_ns = received_ns
            self.ts_ns = self.taken_ns if late and self.taken_ns is not None else frame.ts_ns
        self.parts.append(frame)
        return first

    @property
    def waits(self) -> bool:
        """Whether the instant waits for more parts (else it goes out at once)."""
        return self.singles < SINGLE_INSTANTS

    def take(self) -> list[Frame]:
        """The held frames, each at the instant's time (none if nothing is held), and
        nothing held after."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        parts, self.parts = self.parts, []
        if not parts:
            return parts
        self.singles = self.singles + 1 if len(parts) == 1 else 0
        self.taken_ns = ts = self.ts_ns
        return [p if p.ts_ns == ts else p.again(ts, p.seq, p.raw) for p in parts]


__all__ = ["SINGLE_INSTANTS", "HeldInstant"]
