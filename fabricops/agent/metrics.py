"""Prometheus metrics of the host agent."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from fabricops.agent.values import Reason


class NicExtraCounters(Collector):
    """``fabricops_agent_nic_extra_total{port,counter}``: NIC counters the catalogue has no
    family for, exported as counters. ``labels(port, counter).set(raw)`` takes the NIC's
    cumulative value; when it goes back (a NIC reset) the value reached is carried, so the
    exported counter never decreases."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._lock = threading.Lock()
        self._raw: dict[tuple[str, str], float] = {}
        self._offset: dict[tuple[str, str], float] = {}
        registry.register(self)

    def labels(self, port: str, counter: str) -> _NicExtraCounter:
        return _NicExtraCounter(self, (port, counter))

    def set(self, key: tuple[str, str], raw: float) -> None:
        with self._lock:
            last = self._raw.get(key)
            if last is not None and raw < last:
                self._offset[key] = self._offset.get(key, 0.0) + last
            self._raw[key] = raw

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        with self._lock:
            for key, raw in sorted(self._raw.items()):
                family.add_metric(list(key), raw + self._offset.get(key, 0.0))
        yield family

    @staticmethod
    def _family() -> CounterMetricFamily:
        return CounterMetricFamily("fabricops_agent_nic_extra",
                                   "NIC counters without a catalogue family",
                                   labels=["port", "counter"])


class _NicExtraCounter:
    def __init__(self, owner: NicExtraCounters, key: tuple[str, str]) -> None:
        self._owner, self._key = owner, key

    def set(self, raw: float) -> None:
        self._owner.set(self._key, raw)


class AgentMetrics:
    """Series of the host agent.

    ``read_problems{reason}``: readings that gave no value (missing, garbage, truncated,
    out_of_range, unreadable); ``errors{reason}``: samples or discoveries that failed as a whole
    (``sample``, ``publish``, ``discover``). ``port`` is the NIC's port id (``host:nic0``).
    ``nic_info`` names each NIC's RDMA device, interface, switch port and the rule that named
    it; ``nic_extra`` holds counters the catalogue has no family for (pause duration, ECN-marked
    packets received).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        r, p = registry, "fabricops_agent_"
        self.samples = Counter(f"{p}samples", "Samples published", registry=r)
        self.frames = Counter(f"{p}frames", "Frames published", registry=r)
        self.read_problems = Counter(f"{p}read_problems", "Readings that gave no value",
                                     ["reason"], registry=r)
        self.resets = Counter(f"{p}device_resets", "Counters that went back (a NIC reset)",
                              registry=r)
        self.errors = Counter(f"{p}errors", "Failures by reason", ["reason"], registry=r)
        self.nics = Gauge(f"{p}nics", "NICs read", registry=r)
        self.unavailable = Gauge(f"{p}metrics_unavailable",
                                 "Catalogue metrics with no source on a NIC", ["port"],
                                 registry=r)
        self.unmatched = Gauge(f"{p}lldp_unmatched",
                               "NICs whose LLDP neighbour the topology does not cable to them",
                               registry=r)
        self.nic_info = Gauge(f"{p}nic_info", "1 per NIC, naming its sources",
                              ["port", "rdma_device", "netdev", "switch_port", "named_by"],
                              registry=r)
        self.nic_extra = NicExtraCounters(r)
        self.interval = Gauge(f"{p}interval_seconds", "Sampling interval in force", registry=r)
        for problem in Reason:
            self.read_problems.labels(problem.value)
        for reason in ("sample", "publish", "discover"):
            self.errors.labels(reason)


__all__ = ["AgentMetrics"]
