"""StackMetrics: the platform and fabric metrics of the process that runs a pipeline.

Fabric aggregates need the telemetry on the bus and the topology; platform
health needs the pipeline's store, its newest frame time and (in one-process
stacks) the collectors' status. Wired once here for ``fabricops up`` and
``fabricops serve pipeline``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from fabricops.api.fabric_metrics import FabricMetrics, FabricMetricsConfig
from fabricops.api.platform_metrics import NewestFrameTime, PlatformMetrics, PlatformMetricsConfig
from fabricops.collectors.collection import Collection
from fabricops.core.bus import Bus
from fabricops.core.liveness import Liveness
from fabricops.core.topology import Topology
from fabricops.pipeline.service import PipelineService


class StackMetrics:
    """The platform and fabric metrics of a pipeline process, on ``registry``: started
    at construction, ``stop`` ends them. ``collection`` adds the collectors' health;
    the fabric metrics' consumer reports to ``liveness``."""

    def __init__(self, registry: CollectorRegistry, bus: Bus, pipeline: PipelineService,
                 topology: Topology, collection: Collection | None = None,
                 liveness: Liveness | None = None) -> None:
        newest = NewestFrameTime()
        pipeline.worker.on_batch.append(newest.observe)
        self.fabric = FabricMetrics(FabricMetricsConfig(), bus, topology, registry,
                                    liveness=liveness)
        self.platform = PlatformMetrics(PlatformMetricsConfig(), pipeline.store,
                                        collection=collection, newest_frame_ns=newest,
                                        registry=registry)
        self.fabric.start()
        self.platform.start()

    def stop(self) -> None:
        self.platform.stop()
        self.fabric.stop()
