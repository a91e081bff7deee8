"""Prometheus metrics of a pipeline worker, and how it counts what it sets aside."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from fabricops.core.bus import Message
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.frame import Frame
from fabricops.core.logthrottle import ThrottledLog
from fabricops.pipeline.intake import BatchResult
from fabricops.pipeline.stream import SeriesStream
from fabricops.pipeline.stream_bank import StepResult


class _Batch(Protocol):
    @property
    def frames(self) -> int: ...

    @property
    def segments(self) -> int: ...

    @property
    def late(self) -> int: ...

    @property
    def joined(self) -> int: ...

    @property
    def n_events(self) -> int: ...


class WorkerMetrics:
    """Everything that moves through a worker gets a counter."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.frames = Counter("fabricops_pipeline_frames", "Frames accepted", registry=registry)
        self.late = Counter("fabricops_pipeline_late_frames",
                            "Frames stored although older than their stream's newest "
                            "(into an open window, or by correcting a written one)",
                            registry=registry)
        self.joined = Counter("fabricops_pipeline_frames_joined",
                              "Frames joined to another part of their instant (one device, "
                              "source and time) in one frame", registry=registry)
        self.events = Counter("fabricops_pipeline_events", "Key events raised", registry=registry)
        self.segments = Counter("fabricops_pipeline_segments", "Keyframe segments written",
                                registry=registry)
        self.rejected = Counter("fabricops_pipeline_rejected",
                                "Frames or samples set aside, by reason", ["reason"],
                                registry=registry)
        self.resets = Counter("fabricops_pipeline_device_resets",
                              "Device counter resets seen", registry=registry)
        self.windows = Gauge("fabricops_pipeline_windows",
                             "Windows held in memory: open, or complete and waiting to be "
                             "written", ["state"], registry=registry)
        for state in ("open", "complete"):
            self.windows.labels(state)
        self.persist_s = Histogram("fabricops_pipeline_persist_seconds",
                                   "Time to make a batch durable", registry=registry)

    def observe(self, batch: _Batch, persist_s: float) -> None:
        self.frames.inc(batch.frames)
        self.late.inc(batch.late)
        self.joined.inc(batch.joined)
        self.events.inc(batch.n_events)
        self.segments.inc(batch.segments)
        self.persist_s.observe(persist_s)


class SetAside:
    """What a worker cannot take, counted in the batch's result and the metrics: a
    whole record is dead-lettered, a part of one logged (throttled by reason), a
    duplicate only counted."""

    def __init__(self, metrics: WorkerMetrics, dead_letters: DeadLetterBox,
                 log: logging.Logger) -> None:
        self.metrics = metrics
        self.dead_letters = dead_letters
        self.log = log
        self._warn = ThrottledLog(log)

    def reject(self, result: BatchResult, reason: str, why: str, n: int = 1) -> None:
        self._count(result, reason, n)
        self._warn.warning(reason, "pipeline set aside %s: %s", reason, why)

    def dead(self, result: BatchResult, msg: Message, reason: str, why: str) -> None:
        self._count(result, reason, 1)
        self.dead_letters.put(msg, reason, why)

    def duplicate(self, result: BatchResult, n: int = 1) -> None:
        self._count(result, "duplicate", n)

    def _count(self, result: BatchResult, reason: str, n: int) -> None:
        result.reject(reason, n)
        self.metrics.rejected.labels(reason).inc(n)

    def stepped(self, result: BatchResult,
                steps: Iterable[tuple[SeriesStream, Frame, StepResult]]) -> None:
        """Frames that stepped their streams: their events, resets and counters that
        went backwards (a rate left unknown)."""
        for stream, frame, step in steps:
            result.frames += 1
            result.events.extend(step.events)
            if step.reset:
                self.metrics.resets.inc()
                self.log.info("counters of %s (%s) were reset at %d ns", stream.device,
                              stream.source, frame.ts_ns)
            for entity, metric in step.backwards:
                self.reject(result, "counter_backwards", f"{metric} of {entity} went down "
                            f"at {frame.ts_ns} ns without a reset of the device; rate left "
                            "unknown")
