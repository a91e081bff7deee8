"""The windows a pipeline worker holds in memory until they are written.

A window is ``window_ns`` of one (device, source) stream. It is *open* while
its stream's frames fall into it, then *complete* (waiting in a queue to be
written as one keyframe segment), then gone. Nothing of a window is in the
store before it is written: the bus is the recovery log. Each frame keeps
its origin (the batch that brought it, and its partition and offset), so

- ``holds`` tells the consumer, per partition, the first offset it must not
  commit past: after a restart or a rebalance the bus delivers every frame
  of an unwritten window again;
- ``kept`` gives back the frames of the batches that completed, so that a
  batch that failed half-way can be forgotten without losing the windows
  built before it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from fabricops.core.frame import Frame
from fabricops.core.frame_join import adds_samples

StreamKey = tuple[str, str]  # device, source
Partition = tuple[str, int]  # topic, partition
Origin = tuple[int, Partition | None, int]  # batch, partition (None: no bus record), offset
NO_ORIGIN: Origin = (0, None, 0)


def frame_order(frame: Frame) -> tuple[str, str, int]:
    """The order frames are stepped and held in: by device, source, ts_ns."""
    return frame.device, frame.source.value, frame.ts_ns


@dataclass
class Window:
    """The frames of one stream's window, in the order they came, with their origins."""

    key: StreamKey
    index: int
    frames: list[Frame] = field(default_factory=list)
    origins: list[Origin] = field(default_factory=list)
    ts_ns: set[int] = field(default_factory=set)
    holds: dict[Partition, int] = field(default_factory=dict)

    def adds(self, frame: Frame) -> bool:
        """Whether ``frame`` gives a sample that the frames held of its instant do not
        (see ``adds_samples``)."""
        return adds_samples([f for f in self.frames if f.ts_ns == frame.ts_ns], frame)

    def add(self, frame: Frame, origin: Origin) -> None:
        self.frames.append(frame)
        self.origins.append(origin)
        self.ts_ns.add(frame.ts_ns)
        part = origin[1]
        if part is not None and origin[2] < self.holds.get(part, origin[2] + 1):
            self.holds[part] = origin[2]


class WindowBook:
    """Open windows (one per stream) and complete ones waiting, oldest first."""

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self.open: dict[StreamKey, Window] = {}
        self.complete: dict[tuple[StreamKey, int], Window] = {}
        # per stream: every frame before this time is in a written segment
        self.written_before: dict[StreamKey, int] = {}

    def __len__(self) -> int:
        return len(self.open) + len(self.complete)

    def find(self, key: StreamKey, index: int) -> Window | None:
        """The stream's open or complete window ``index``, if held."""
        window = self.open.get(key)
        if window is not None and window.index == index:
            return window
        return self.complete.get((key, index))

    def start(self, key: StreamKey, index: int) -> Window:
        """Open window ``index`` of the stream (again, if it is complete but not written:
        a stream judged quiet may still send frames of it); its open one (if any)
        becomes complete."""
        if key in self.open:
            self.finish(key)
        window = self.complete.pop((key, index), None) or Window(key, index)
        self.open[key] = window
        return window

    def finish(self, key: StreamKey) -> None:
        """The stream's open window is complete: it waits to be written."""
        window = self.open.pop(key)
        self.complete[(key, window.index)] = window

    def finish_where(self, done: Callable[[Window], bool]) -> None:
        """Every open window for which ``done`` holds is complete."""
        for key in [k for k, w in self.open.items() if done(w)]:
            self.finish(key)

    def written(self, window: Window, before_ts_ns: int) -> None:
        """``window`` is in the store now; frames before ``before_ts_ns`` are too."""
        self._drop(window)
        if before_ts_ns > self.written_before.get(window.key, 0):
            self.written_before[window.key] = before_ts_ns

    def streams(self) -> frozenset[StreamKey]:
        """The streams with an open window: the ones being consumed. Safe to call from
        another thread (a copy, taken again if the worker changed the book meanwhile)."""
        while True:
            try:
                return frozenset(self.open)
            except RuntimeError:  # changed size while it was copied
                continue

    def all(self) -> Iterator[Window]:
        return itertools.chain(list(self.complete.values()), list(self.open.values()))

    def holds(self) -> dict[Partition, int]:
        """Per partition, the smallest offset of a frame in a window not yet written."""
        out: dict[Partition, int] = {}
        for window in self.all():
            for part, offset in window.holds.items():
                if offset < out.get(part, offset + 1):
                    out[part] = offset
        return out

    def frames(self) -> list[Frame]:
        """Every frame held, by device, source, ts_ns."""
        return sorted((f for w in self.all() for f in w.frames), key=frame_order)

    def kept(self, *, drop_batch: int | None) -> list[tuple[Frame, Origin]]:
        """Every frame held, with its origin, except those batch ``drop_batch`` brought."""
        return [(f, o) for w in self.all() for f, o in zip(w.frames, w.origins, strict=True)
                if o[0] != drop_batch]

    def keep_only(self, owned: set[Partition]) -> None:
        """Forget the windows with frames from partitions not in ``owned``."""
        for window in list(self.all()):
            if any(part not in owned for part in window.holds):
                self._drop(window)

    def _drop(self, window: Window) -> None:
        self.complete.pop((window.key, window.index), None)
        if self.open.get(window.key) is window:
            del self.open[window.key]

    def clear(self) -> None:
        self.open.clear()
        self.complete.clear()
        self.written_before.clear()
