"""Prometheus metrics of a pipeline worker."""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class _Batch(Protocol):
    @property
    def frames(self) -> int: ...

    @property
    def segments(self) -> int: ...

    @property
    def late(self) -> int: ...

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
        self.events.inc(batch.n_events)
        self.segments.inc(batch.segments)
        self.persist_s.observe(persist_s)
