"""The pipeline as one component: a worker, its store, the store's upkeep and the sampling
controller."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict

from fabricops.core.bus import Bus
from fabricops.core.liveness import Liveness
from fabricops.core.records import Event
from fabricops.core.topology import Topology
from fabricops.pipeline.int_paths import IntPathBook
from fabricops.pipeline.sampling import SamplingConfig, SamplingController
from fabricops.pipeline.upkeep import StoreUpkeep, UpkeepConfig
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.store.store import Store, StoreConfig


class PipelineServiceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    worker: PipelineConfig = PipelineConfig()
    sampling: SamplingConfig = SamplingConfig()
    store: StoreConfig = StoreConfig()
    upkeep: UpkeepConfig = UpkeepConfig()


@dataclass(frozen=True)
class PipelineStatus:
    frames: int
    events: int
    segments: int
    rejected: int
    hot_devices: int


class PipelineService:
    """Store, worker, upkeep and controller, started and stopped together (inert until
    ``start``)."""

    def __init__(self, config: PipelineServiceConfig, bus: Bus, topology: Topology | None = None,
                 registry: CollectorRegistry | None = None,
                 liveness: Liveness | None = None) -> None:
        reg = registry or CollectorRegistry()
        self.config = config
        self.store = Store(config.store, reg)
        self.worker = PipelineWorker(config.worker, bus, self.store, reg,
                                     int_paths=IntPathBook(topology), liveness=liveness)
        self.sampling = SamplingController(config.sampling, bus, topology, reg)
        self.upkeep = StoreUpkeep(config.upkeep, self.store, reg, liveness,
                                  owned=lambda: self.worker.windows.streams())
        self.worker.on_batch.append(self._observe)

    def _observe(self, events: Sequence[Event], now_ns: int) -> None:
        self.sampling.observe(events, now_ns)

    def start(self) -> None:
        """Open (and migrate) the store, announce the slow default, start consuming, then
        the upkeep (its first pass one interval later)."""
        self.store.start()
        self.sampling.start()
        self.worker.start()
        self.upkeep.start()

    def stop(self) -> None:
        """Stop consuming (the worker writes the windows it holds, open ones too) while
        the upkeep ends its batch in progress, then close the store."""
        self.upkeep.stopping()
        try:
            self.worker.stop()
            self.sampling.stop()
        finally:
            self.upkeep.stop()
            self.store.stop()

    def status(self) -> PipelineStatus:
        m = self.worker.metrics
        rejected = sum(s.value for metric in m.rejected.collect() for s in metric.samples
                       if s.name.endswith("_total"))
        return PipelineStatus(
            frames=int(m.frames._value.get()), events=int(m.events._value.get()),
            segments=int(m.segments._value.get()), rejected=int(rejected),
            hot_devices=len(self.sampling.hot))
