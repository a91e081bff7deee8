"""FabricMetrics: link and switch aggregates of the fabric, computed from the bus.

A member of its own consumer group (``fabricops-metrics``) on
``telemetry.v1`` folds every frame into a :class:`~fabricops.rca.view.FabricView`
(the RCA's counter-to-rate view: u64 deltas over each port's previous sample,
a reset or a silent port leaves the rate unknown). At scrape time the
collector takes a snapshot of the view under a lock, aggregates it per link
and per switch (:mod:`fabricops.api.fabric_aggregates`) and yields:

- ``fabricops_link_utilization_ratio{link}``, ``fabricops_link_errors_per_second{link}``,
  ``fabricops_link_rx_power_dbm{link}``
- ``fabricops_switch_pfc_pauses_per_second{switch,direction}`` (direction rx|tx),
  ``fabricops_switch_ecn_marked_packets_per_second{switch}``,
  ``fabricops_switch_discards_per_second{switch}``
- ``fabricops_fabric_links{state}`` (up|down, both always present)
- ``fabricops_fabric_series_dropped``: links plus switches that reported but were
  left out by the cardinality bound (``max_links``, ``max_switches``)

The snapshot is taken at the newest telemetry time seen (a twin may run ahead
of the wall clock); once no frame has arrived for ``stale_s`` of wall time the
link and switch series are withdrawn. Aggregates are recomputed only when new
frames came in. Records that are not frames are counted and set aside.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict, Field

from fabricops.api.fabric_aggregates import (
    FabricAggregates,
    Selection,
    aggregate,
    select_bounded,
)
from fabricops.core.bus import DEFAULT_PREFIX, Bus, Message, Topic, topic_name
from fabricops.core.busio import GroupConsumer, frames_from_messages
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.liveness import Liveness
from fabricops.core.topology import Topology
from fabricops.rca.view import FabricView, PortIndex

log = logging.getLogger(__name__)


class FabricMetricsConfig(BaseModel):
    """Consumer group, staleness and cardinality bound of the fabric aggregates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str = Field(default="fabricops-metrics", min_length=1)
    prefix: str = DEFAULT_PREFIX
    stale_s: float = Field(default=15.0, gt=0, description=(
        "A port not reported for this long (telemetry time) is unknown; with no frame "
        "at all for this long (wall time) every link and switch series is withdrawn"))
    max_links: int = Field(default=4096, ge=0, description="Most link series exported")
    max_switches: int = Field(default=1024, ge=0, description="Most switch series exported")


class FabricMetrics:
    """See the module docstring. Inert until ``start``; its collector and counters are
    registered on ``registry`` (a private one if None) at construction, and the
    collector exports no link or switch series before the first frame."""

    def __init__(self, config: FabricMetricsConfig, bus: Bus, topology: Topology,
                 registry: CollectorRegistry | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 liveness: Liveness | None = None) -> None:
        self.config = config
        self.registry = registry if registry is not None else CollectorRegistry()
        self.index = PortIndex(topology)
        self.view = FabricView(self.index, stale_s=config.stale_s)
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._last_frame_at: float | None = None
        self._cached: tuple[int, FabricAggregates] | None = None
        self.m_frames = Counter("fabricops_fabric_metrics_frames",
                                "Frames folded into the fabric aggregates",
                                registry=self.registry)
        self.m_rejected = Counter("fabricops_fabric_metrics_rejected",
                                  "Records on the telemetry topic that are not frames",
                                  registry=self.registry)
        self.collector = FabricCollector(self)
        self.registry.register(self.collector)
        self.dead_letters = DeadLetterBox(bus, config.group, prefix=config.prefix,
                                          registry=self.registry)
        self._consumer = GroupConsumer(bus, [topic_name(Topic.TELEMETRY, config.prefix)],
                                       config.group, self.process, name="fabric-metrics",
                                       log=log, dead_letters=self.dead_letters,
                                       liveness=liveness, registry=self.registry)

    def start(self) -> None:
        self._consumer.start()

    def stop(self) -> None:
        self._consumer.stop()

    def process(self, messages: list[Message]) -> int:
        """Fold one batch of telemetry records in; returns the frames taken."""
        rejects: list[tuple[Message, str]] = []
        frames = frames_from_messages(messages, rejects=rejects)
        for m, why in rejects:
            self.m_rejected.inc()
            self.dead_letters.put(m, "undecodable", why)
        if frames:
            with self._lock:
                self.view.ingest(frames)
                self._last_frame_at = self._monotonic()
            self.m_frames.inc(len(frames))
        return len(frames)

    def current(self) -> FabricAggregates | None:
        """The aggregates of the newest telemetry, None if none arrived within ``stale_s``."""
        with self._lock:
            if self._last_frame_at is None or \
                    self._monotonic() - self._last_frame_at > self.config.stale_s:
                return None
            seen = self.view.frames_seen
            if self._cached is not None and self._cached[0] == seen:
                return self._cached[1]
            snap = self.view.snapshot()
        agg = aggregate(self.index, snap)
        with self._lock:
            self._cached = (seen, agg)
        return agg


class FabricCollector(Collector):
    """The prometheus-client collector of a FabricMetrics (see the module docstring)."""

    def __init__(self, source: FabricMetrics) -> None:
        self.source = source

    def describe(self) -> Iterator[Metric]:
        yield from _Families().all()

    def collect(self) -> Iterator[Metric]:
        src = self.source
        fam = _Families()
        agg = src.current()
        if agg is None:
            fam.links.add_metric(["up"], 0.0)
            fam.links.add_metric(["down"], 0.0)
            fam.dropped.add_metric([], 0.0)
        else:
            sel = select_bounded(agg, max_links=src.config.max_links,
                                 max_switches=src.config.max_switches)
            fam.fill(agg, sel, src.index)
        yield from fam.all()


class _Families:
    """The metric families of one scrape."""

    def __init__(self) -> None:
        self.util = GaugeMetricFamily(
            "fabricops_link_utilization_ratio",
            "Larger of the two directions' transmit rate over the link capacity",
            labels=["link"])
        self.errors = GaugeMetricFamily(
            "fabricops_link_errors_per_second",
            "Received errors and FCS errors per second, both ends of the link", labels=["link"])
        self.rx_power = GaugeMetricFamily(
            "fabricops_link_rx_power_dbm", "Lower of the two ends' optical receive power in dBm",
            labels=["link"])
        self.pfc = GaugeMetricFamily(
            "fabricops_switch_pfc_pauses_per_second",
            "PFC pause frames per second over the switch's ports, received (rx) or sent (tx)",
            labels=["switch", "direction"])
        self.ecn = GaugeMetricFamily(
            "fabricops_switch_ecn_marked_packets_per_second",
            "ECN-marked packets per second over the switch's ports", labels=["switch"])
        self.discards = GaugeMetricFamily(
            "fabricops_switch_discards_per_second",
            "Inbound and outbound discards per second over the switch's ports",
            labels=["switch"])
        self.links = GaugeMetricFamily("fabricops_fabric_links", "Links by operational state",
                                       labels=["state"])
        self.dropped = GaugeMetricFamily(
            "fabricops_fabric_series_dropped",
            "Links and switches not exported because of the cardinality bound")

    def all(self) -> list[GaugeMetricFamily]:
        return [self.util, self.errors, self.rx_power, self.pfc, self.ecn, self.discards,
                self.links, self.dropped]

    def fill(self, agg: FabricAggregates, sel: Selection, index: PortIndex) -> None:
        """Add the selected links and switches; unknown figures are left out."""
        link_columns = (agg.link_utilization, agg.link_errors_per_s, agg.link_rx_power_dbm)
        link_families = (self.util, self.errors, self.rx_power)
        for i, *values in zip(sel.links.tolist(), *(c[sel.links].tolist() for c in link_columns),
                              strict=True):
            for family, value in zip(link_families, values, strict=True):
                if not math.isnan(value):
                    family.add_metric([index.link_ids[i]], value)
        switch_columns = (agg.switch_pfc_rx_per_s, agg.switch_pfc_tx_per_s, agg.switch_ecn_per_s,
                          agg.switch_discards_per_s)
        nodes = index.switch_nodes[sel.switches].tolist()
        for node, *values in zip(nodes, *(c[sel.switches].tolist() for c in switch_columns),
                                 strict=True):
            switch = index.node_ids[node]
            labelled = (([switch, "rx"], self.pfc), ([switch, "tx"], self.pfc),
                        ([switch], self.ecn), ([switch], self.discards))
            for (labels, family), value in zip(labelled, values, strict=True):
                if not math.isnan(value):
                    family.add_metric(labels, value)
        self.links.add_metric(["up"], float(agg.links_up))
        self.links.add_metric(["down"], float(agg.links_down))
        self.dropped.add_metric([], float(sel.dropped_links + sel.dropped_switches))
