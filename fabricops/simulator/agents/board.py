"""The board: the latest telemetry frame of every device of a running fabric.

The simulation driver publishes each tick's frames here; protocol agents (SNMP,
gNMI, INT) read from it and never touch the simulator itself. A device that
is down has no frame, so its agents stop answering for it. A push collector
(``add_listener``) gets every tick's frames as they are published, so none is
missed at any tick length.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.logthrottle import ThrottledLog

log = logging.getLogger(__name__)
FrameListener = Callable[[Sequence[Frame]], object]


@dataclass(frozen=True)
class DeviceValues:
    """One device's values of one tick, by (entity, metric name)."""

    frame: Frame
    values: dict[tuple[str, str], int | float] = field(default_factory=dict)

    @classmethod
    def of(cls, frame: Frame) -> DeviceValues:
        ints = frame.raw
        floats = frame.raw.view("<f8")
        gauge = CATALOGUE.is_float[frame.metric]
        values: dict[tuple[str, str], int | float] = {}
        names = {int(m): CATALOGUE.by_id(int(m)).name for m in set(frame.metric.tolist())}
        for i, (e, m) in enumerate(zip(frame.entity_idx.tolist(), frame.metric.tolist(),
                                       strict=True)):
            value = float(floats[i]) if gauge[i] else int(ints[i])
            values[(frame.entities[e], names[m])] = value
        return cls(frame, values)


class FrameBoard:
    """Thread-safe latest frames, with a tick counter agents can wait on."""

    def __init__(self) -> None:
        self._frames: dict[str, Frame] = {}
        self._cache: dict[str, DeviceValues] = {}
        self._tick = 0
        self._cond = threading.Condition()
        self._listeners: list[FrameListener] = []
        self._warnings = ThrottledLog(log)
        self.listener_errors = 0

    @property
    def tick(self) -> int:
        return self._tick

    def add_listener(self, listener: FrameListener) -> None:
        """Call ``listener(frames)`` with every tick's frames once the board holds them, on
        the publishing thread. One that raises is counted in ``listener_errors`` and
        logged (throttled); the others and the fabric go on."""
        self._listeners.append(listener)

    def publish(self, frames: list[Frame]) -> None:
        """Replace every device's frame with this tick's (devices absent are down)."""
        with self._cond:
            self._frames = {f.device: f for f in frames}
            self._cache = {}
            self._tick += 1
            self._cond.notify_all()
        for listener in self._listeners:
            try:
                listener(frames)
            except Exception as exc:  # a collector's fault must not stop the fabric
                self.listener_errors += 1
                self._warnings.error("listener", "frame listener %r failed: %r", listener, exc)

    def latest(self, device: str) -> Frame | None:
        return self._frames.get(device)

    def values(self, device: str) -> DeviceValues | None:
        """The device's values by (entity, metric name), or None if it is not reporting."""
        frame = self._frames.get(device)
        if frame is None:
            return None
        cached = self._cache.get(device)
        if cached is None or cached.frame is not frame:
            cached = DeviceValues.of(frame)
            self._cache[device] = cached
        return cached

    def devices(self) -> list[str]:
        return list(self._frames)

    def wait_tick(self, after: int, timeout_s: float) -> int:
        """Block until the tick counter passes ``after`` (or timeout); return it."""
        with self._cond:
            self._cond.wait_for(lambda: self._tick > after, timeout=timeout_s)
            return self._tick
