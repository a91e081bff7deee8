"""Device time between two frames, for samples due more often than frames come.

A twin's device time moves with its frames: the newest frame's timestamp is the
device's "now" when the frame is published. A sample due between two frames
(a 100 ms subscription on a twin ticking every second) must go out when the
device's time reaches it, so the target needs where that instant falls on its
own monotonic clock: from the newest frame (its timestamp, and when it was first
seen) and the pace of device time measured over the last frames (the
simulation's speed, however it runs). Nothing here is ever ahead of the newest
frame's timestamp: it only says when to send what that frame holds.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Final

HISTORY: Final = 8


class DeviceClock:
    """Newest frames' (board tick, timestamp, first monotonic time seen); thread-safe.

    Streams report each new board tick as they wake up to it (``observe``); the
    first report of a tick is kept. Until two frames have been seen neither the
    frame spacing nor the pace is known, and ``mono_at`` answers None.
    """

    def __init__(self, history: int = HISTORY) -> None:
        self._seen: deque[tuple[int, int, int]] = deque(maxlen=max(history, 2))
        self._lock = threading.Lock()

    def observe(self, tick: int, ts_ns: int, mono_ns: int) -> None:
        """Board tick ``tick`` published a frame stamped ``ts_ns``, seen at ``mono_ns``."""
        with self._lock:
            if self._seen and tick <= self._seen[-1][0]:
                return
            if self._seen and ts_ns <= self._seen[-1][1]:
                self._seen.clear()  # the device's clock went back: a new run
            self._seen.append((tick, ts_ns, mono_ns))

    def spacing_ns(self) -> int:
        """Device ns from one frame to the next, from the two newest seen (a stream that
        woke late may have missed ticks in between); 0 until two are seen."""
        with self._lock:
            if len(self._seen) < 2:
                return 0
            (tick0, ts0, _), (tick1, ts1, _) = self._seen[-2], self._seen[-1]
            return (ts1 - ts0) // max(tick1 - tick0, 1)

    def mono_at(self, device_ns: int) -> int | None:
        """The monotonic ns at which device time reaches ``device_ns``, from the newest
        frame and the pace since the oldest kept; None while the pace is unknown."""
        with self._lock:
            if len(self._seen) < 2:
                return None
            (_, ts0, mono0), (_, ts1, mono1) = self._seen[0], self._seen[-1]
            if ts1 <= ts0 or mono1 <= mono0:
                return None
            return mono1 + round((device_ns - ts1) * (mono1 - mono0) / (ts1 - ts0))
