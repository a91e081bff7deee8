"""All collectors of one process, built from an inventory, publishing on one bus.

``Collection`` runs the SNMP poller, the gNMI subscriber and the INT receiver
for the targets of an inventory (any subset of protocols), publishes what they
collect on the bus, and makes them follow sampling policies from
``control.v2``. ``status()`` is what a live status line shows.
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from prometheus_client import CollectorRegistry

from fabricops.collectors.gnmi import GnmiCollector
from fabricops.collectors.gnmi_config import GnmiCollectorConfig, GnmiEndpoint
from fabricops.collectors.int_receiver import IntReceiver, IntReceiverConfig
from fabricops.collectors.policy import FollowsPolicy, PolicyListener
from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, targets_from_inventory
from fabricops.core.bus import DEFAULT_PREFIX, Bus
from fabricops.core.busio import BusFrameSink, BusIntSink
from fabricops.core.frame import Frame
from fabricops.core.intreport import IntBatch
from fabricops.core.inventory import Inventory
from fabricops.core.liveness import Liveness

Protocol = Literal["snmp", "gnmi", "int"]
PROTOCOLS: tuple[Protocol, ...] = ("snmp", "gnmi", "int")


class CountingFrameSink:
    """Publishes frames to the bus and counts frames and samples by source."""

    def __init__(self, inner: BusFrameSink) -> None:
        self.inner = inner
        self.frames: Tally[str] = Tally()
        self.samples: Tally[str] = Tally()
        self._lock = threading.Lock()

    def publish_frames(self, frames: Sequence[Frame]) -> None:
        self.inner.publish_frames(frames)
        with self._lock:
            for f in frames:
                self.frames[f.source.value] += 1
                self.samples[f.source.value] += f.n_samples


class CountingIntSink:
    """Publishes INT batches to the bus and counts reports and hop records."""

    def __init__(self, inner: BusIntSink) -> None:
        self.inner = inner
        self.reports = 0
        self.hops = 0

    def publish_int(self, batch: IntBatch) -> None:
        self.inner.publish_int(batch)
        self.reports += batch.n_reports
        self.hops += batch.n_hops


@dataclass(frozen=True)
class CollectionStatus:
    targets_up: dict[str, tuple[int, int]]  # protocol -> (up, total)
    frames: dict[str, int]
    samples: dict[str, int]
    int_reports: int
    int_hops: int


def gnmi_endpoints(inventory: Inventory) -> tuple[GnmiEndpoint, ...]:
    """The inventory's gNMI targets with their effective intervals."""
    return tuple(GnmiEndpoint.from_target(t, inventory.interval_of(t))
                 for t in inventory.by_protocol("gnmi"))


class Collection:
    """The collectors for ``protocols`` of ``inventory``, publishing on ``bus``."""

    def __init__(self, inventory: Inventory, bus: Bus, *,
                 protocols: Sequence[Protocol] = PROTOCOLS, prefix: str = DEFAULT_PREFIX,
                 group: str = "fabricops-collectors",
                 registry: CollectorRegistry | None = None,
                 liveness: Liveness | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.frame_sink = CountingFrameSink(BusFrameSink(bus, prefix))
        self.int_sink = CountingIntSink(BusIntSink(bus, prefix))
        self.snmp = self.gnmi = None
        self.int_receiver: IntReceiver | None = None
        if "snmp" in protocols and inventory.by_protocol("snmp"):
            self.snmp = SnmpPoller(SnmpPollerConfig(targets=targets_from_inventory(inventory)),
                                   self.frame_sink, self.registry)
        if "gnmi" in protocols and inventory.by_protocol("gnmi"):
            self.gnmi = GnmiCollector(GnmiCollectorConfig(targets=gnmi_endpoints(inventory)),
                                      self.frame_sink, self.registry)
        if "int" in protocols and inventory.int is not None:
            host, _, port = inventory.int.listen.rpartition(":")
            self.int_receiver = IntReceiver(
                IntReceiverConfig(bind_host=host, bind_port=int(port)), self.int_sink,
                self.registry, liveness)
        followers: list[FollowsPolicy] = [c for c in (self.snmp, self.gnmi) if c is not None]
        self.policies = PolicyListener(bus, followers, group=group, prefix=prefix,
                                       registry=self.registry, liveness=liveness)

    def start(self) -> None:
        if self.int_receiver is not None:
            self.int_receiver.start()
        for collector in (self.snmp, self.gnmi):
            if collector is not None:
                collector.start()
        self.policies.start()

    def stop(self) -> None:
        self.policies.stop()
        for collector in (self.gnmi, self.snmp, self.int_receiver):
            if collector is not None:
                collector.stop()

    def status(self) -> CollectionStatus:
        up: dict[str, tuple[int, int]] = {}
        if self.snmp is not None:
            states = list(self.snmp.status().values())
            up["snmp"] = (sum(1 for s in states if s.up), len(states))
        if self.gnmi is not None:
            states_g = list(self.gnmi.status().values())
            up["gnmi"] = (sum(1 for s in states_g if s.up), len(states_g))
        if self.int_receiver is not None:
            up["int"] = (int(self.int_receiver.port > 0), 1)
        return CollectionStatus(
            targets_up=up, frames=dict(self.frame_sink.frames),
            samples=dict(self.frame_sink.samples), int_reports=self.int_sink.reports,
            int_hops=self.int_sink.hops)
