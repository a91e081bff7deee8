"""FabricMetrics: link and switch aggregates of the fabric, computed from the bus.

A member of its own consumer group (``fabricops-metrics``) on
``telemetry.v2`` folds every frame into a :class:`~fabricops.rca.view.FabricView`
(rates and levels per port) and into
:class:`~fabricops.api.fabric_counters.PortCounterTotals` (monotonic device
counter totals, a device reset carried as an offset). At scrape time it yields,
for every link and switch within the bound, from the first scrape on:

- counters (``rate()`` them): ``fabricops_link_errors_total{link}`` (received
  errors and FCS errors, both ends), ``fabricops_switch_pfc_pauses_total{device,direction}``
  (direction rx|tx), ``fabricops_switch_ecn_marked_packets_total{device}``,
  ``fabricops_switch_discards_total{device}`` (inbound and outbound), summed over
  the switch's ports; 0 until a port reports;
- gauges: ``fabricops_link_utilization_ratio{link}`` (0 until known, then the
  last known value), ``fabricops_link_rx_power_dbm{link}`` (from a link's first
  optical reading on, the last known value: links without optics have none);
- ``fabricops_fabric_links{state}`` (up|down|unknown, always present);
- ``fabricops_fabric_series_dropped``: links plus switches of the topology left
  out by the bound (constant for a topology).

The bound is fixed per topology, so the series set does not churn: the first
``max_links`` links, switch-to-switch links before host links, each in
topology order, and the first ``max_switches`` switches. Aggregates are
recomputed only when new frames came in. Records that are not frames are
counted and set aside. The label vocabulary is :mod:`fabricops.api.metric_labels`.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict, Field

from fabricops.api.fabric_aggregates import FabricAggregates, aggregate
from fabricops.api.fabric_counters import PortCounterTotals
from fabricops.core.bus import DEFAULT_PREFIX, Bus, Message, Topic, topic_name
from fabricops.core.busio import GroupConsumer, frames_from_messages
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.liveness import Liveness
from fabricops.core.topology import Topology
from fabricops.core.wire_frame import EntityTables
from fabricops.rca.view import FabricView, PortIndex

log = logging.getLogger(__name__)
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


class FabricMetricsConfig(BaseModel):
    """Consumer group, staleness and cardinality bound of the fabric aggregates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str = Field(default="fabricops-metrics", min_length=1)
    prefix: str = DEFAULT_PREFIX
    stale_s: float = Field(default=15.0, gt=0, description=(
        "A port not reported for this long (telemetry time) has an unknown rate; a "
        "protocol silent this long may be replaced by another for the same device"))
    max_links: int = Field(default=4096, ge=0, description=(
        "Most links exported (3 series each); switch-to-switch links first"))
    max_switches: int = Field(default=1024, ge=0, description=(
        "Most switches exported (4 series each)"))


class FabricMetrics:
    """See the module docstring. Inert until ``start``; its collector and counters are
    registered on ``registry`` (a private one if None) at construction, and every
    link and switch within the bound has its series from the first scrape."""

    def __init__(self, config: FabricMetricsConfig, bus: Bus, topology: Topology,
                 registry: CollectorRegistry | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 liveness: Liveness | None = None) -> None:
        self.config = config
        self.registry = registry if registry is not None else CollectorRegistry()
        self._tables = EntityTables()  # each device's last entity table
        self.index = PortIndex(topology)
        self.view = FabricView(self.index, stale_s=config.stale_s)
        self.totals = PortCounterTotals(self.index, stale_s=config.stale_s)
        self.links, self.switches = bounded_entities(self.index, max_links=config.max_links,
                                                     max_switches=config.max_switches)
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._cached: tuple[int, FabricFigures] | None = None
        self._util = np.zeros(self.index.n_links)
        self._rx_power = np.full(self.index.n_links, np.nan)
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
        frames = frames_from_messages(messages, rejects=rejects, tables=self._tables)
        for m, why in rejects:
            self.m_rejected.inc()
            self.dead_letters.put(m, "undecodable", why)
        if frames:
            with self._lock:
                self.view.ingest(frames)
                self.totals.ingest(frames)
            self.m_frames.inc(len(frames))
        return len(frames)

    def current(self) -> FabricFigures:
        """The figures of the newest telemetry (recomputed only after new frames)."""
        with self._lock:
            seen = self.view.frames_seen
            if self._cached is not None and self._cached[0] == seen:
                return self._cached[1]
            agg = aggregate(self.index, self.view.snapshot()) if seen else None
            if agg is not None:
                self._util = np.where(np.isnan(agg.link_utilization), self._util,
                                      agg.link_utilization)
                self._rx_power = np.where(np.isnan(agg.link_rx_power_dbm), self._rx_power,
                                          agg.link_rx_power_dbm)
            figures = FabricFigures.of(self, agg)
            self._cached = (seen, figures)
        return figures


class FabricFigures:
    """What one scrape exports: per link and per switch columns (all topology links and
    switches, in ``PortIndex`` order), and the link state counts."""

    def __init__(self, util: F64, rx_power: F64, errors: F64, pfc_rx: F64, pfc_tx: F64,
                 ecn: F64, discards: F64, states: dict[str, int]) -> None:
        self.util, self.rx_power, self.errors = util, rx_power, errors
        self.pfc_rx, self.pfc_tx, self.ecn, self.discards = pfc_rx, pfc_tx, ecn, discards
        self.states = states

    @classmethod
    def of(cls, src: FabricMetrics, agg: FabricAggregates | None) -> FabricFigures:
        ix, t = src.index, src.totals
        a, b = ix.link_ports[:, 0], ix.link_ports[:, 1]
        port_errors = t.totals("in_errors") + t.totals("in_fcs_errors")
        sw = ix.switch_nodes

        def per_switch(port_values: F64) -> F64:
            out: F64 = np.bincount(ix.port_node, weights=port_values,
                                   minlength=ix.n_nodes)[sw].astype(np.float64)
            return out

        if agg is None:
            states = {"up": 0, "down": 0, "unknown": ix.n_links}
        else:
            up, down = agg.links_up, agg.links_down
            states = {"up": up, "down": down, "unknown": ix.n_links - up - down}
        return cls(src._util.copy(), src._rx_power.copy(), port_errors[a] + port_errors[b],
                   per_switch(t.totals("pfc_rx_pause")), per_switch(t.totals("pfc_tx_pause")),
                   per_switch(t.totals("ecn_marked_pkts")),
                   per_switch(t.totals("in_discards") + t.totals("out_discards")), states)


def bounded_entities(index: PortIndex, *, max_links: int, max_switches: int) -> tuple[I64, I64]:
    """Positions of the links (in ``link_ids``) and switches (in ``switch_nodes``) that are
    exported: switch-to-switch links before host links, then topology order; the first
    switches in topology order. Fixed for a topology, so the series set is stable."""
    host_link = index.port_is_nic[index.link_ports].any(axis=1)
    order = np.argsort(host_link, kind="stable")[:max_links]
    links: I64 = np.sort(order)
    switches: I64 = np.arange(min(max_switches, len(index.switch_nodes)), dtype=np.int64)
    return links, switches


class FabricCollector(Collector):
    """The prometheus-client collector of a FabricMetrics (see the module docstring)."""

    def __init__(self, source: FabricMetrics) -> None:
        self.source = source

    def describe(self) -> Iterator[Metric]:
        yield from _Families().all()

    def collect(self) -> Iterator[Metric]:
        src = self.source
        fam = _Families()
        fam.fill(src.current(), src.links, src.switches, src.index)
        yield from fam.all()


class _Families:
    """The metric families of one scrape."""

    def __init__(self) -> None:
        self.util = GaugeMetricFamily(
            "fabricops_link_utilization_ratio",
            "Larger of the two directions' transmit rate over the link capacity "
            "(last known value, 0 until known)", labels=["link"])
        self.errors = CounterMetricFamily(
            "fabricops_link_errors",
            "Received errors and FCS errors, both ends of the link", labels=["link"])
        self.rx_power = GaugeMetricFamily(
            "fabricops_link_rx_power_dbm",
            "Lower of the two ends' optical receive power in dBm (last known value)",
            labels=["link"])
        self.pfc = CounterMetricFamily(
            "fabricops_switch_pfc_pauses",
            "PFC pause frames over the switch's ports, received (rx) or sent (tx)",
            labels=["device", "direction"])
        self.ecn = CounterMetricFamily(
            "fabricops_switch_ecn_marked_packets",
            "ECN-marked packets over the switch's ports", labels=["device"])
        self.discards = CounterMetricFamily(
            "fabricops_switch_discards",
            "Inbound and outbound discards over the switch's ports", labels=["device"])
        self.links = GaugeMetricFamily("fabricops_fabric_links",
                                       "Links by operational state (unknown: no end reports)",
                                       labels=["state"])
        self.dropped = GaugeMetricFamily(
            "fabricops_fabric_series_dropped",
            "Links and switches of the topology not exported because of the cardinality bound")

    def all(self) -> list[Metric]:
        return [self.util, self.errors, self.rx_power, self.pfc, self.ecn, self.discards,
                self.links, self.dropped]

    def fill(self, fig: FabricFigures, links: I64, switches: I64, index: PortIndex) -> None:
        """Add the bounded links and switches."""
        ids = index.link_ids
        for i, util, errors, rx in zip(links.tolist(), fig.util[links].tolist(),
                                       fig.errors[links].tolist(), fig.rx_power[links].tolist(),
                                       strict=True):
            self.util.add_metric([ids[i]], util)
            self.errors.add_metric([ids[i]], errors)
            if not math.isnan(rx):
                self.rx_power.add_metric([ids[i]], rx)
        nodes = index.switch_nodes[switches].tolist()
        for node, rx, tx, ecn, disc in zip(nodes, *(c[switches].tolist() for c in (
                fig.pfc_rx, fig.pfc_tx, fig.ecn, fig.discards)), strict=True):
            device = index.node_ids[node]
            self.pfc.add_metric([device, "rx"], rx)
            self.pfc.add_metric([device, "tx"], tx)
            self.ecn.add_metric([device], ecn)
            self.discards.add_metric([device], disc)
        for state in ("up", "down", "unknown"):
            self.links.add_metric([state], float(fig.states[state]))
        dropped = index.n_links - len(links) + len(index.switch_nodes) - len(switches)
        self.dropped.add_metric([], float(dropped))


__all__ = ["FabricMetrics", "FabricMetricsConfig", "bounded_entities"]
