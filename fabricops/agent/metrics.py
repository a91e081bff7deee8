"""Prometheus metrics of the host agent."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from fabricops.agent.values import Reason


class AgentMetrics:
    """Series of the host agent.

    ``read_problems{reason}``: readings that gave no value (missing, garbage,
    truncated, out_of_range, unreadable); ``errors{reason}``: samples or
    discoveries that failed as a whole (``sample``, ``publish``, ``discover``).
    ``port`` is the NIC's port id (``host:nic0``). ``nic_info`` names each NIC's RDMA device, interface, switch port and the
    rule that named it; ``nic_extra`` holds counters the catalogue has no
    family for (pause duration, ECN-marked packets received).
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
        self.nic_extra = Gauge(f"{p}nic_counter", "NIC counters without a catalogue family",
                               ["port", "counter"], registry=r)
        self.interval = Gauge(f"{p}interval_seconds", "Sampling interval in force", registry=r)
        for problem in Reason:
            self.read_problems.labels(problem.value)
        for reason in ("sample", "publish", "discover"):
            self.errors.labels(reason)


__all__ = ["AgentMetrics"]
