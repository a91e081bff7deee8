"""Where collectors put what they collect: small protocols with in-memory fakes.

A collector is given a sink; in production the sink encodes records onto the
bus, in tests it is a ``ListSink``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from fabricops.core.frame import Frame


class FrameSink(Protocol):
    """Accepts telemetry frames (one device, one instant each)."""

    def publish_frames(self, frames: Sequence[Frame]) -> None: ...


class ListSink:
    """A thread-safe FrameSink that keeps everything, for tests and tools."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.frames: list[Frame] = []

    def publish_frames(self, frames: Sequence[Frame]) -> None:
        with self._lock:
            self.frames.extend(frames)

    def devices(self) -> set[str]:
        with self._lock:
            return {f.device for f in self.frames}
