"""A simulated fabric serving LLDP over real SNMP (UDP) and gNMI (gRPC) on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fabricops.core.topology import Topology
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.engine import Simulator


@contextmanager
def serving(topology: Topology, **config: object) -> Iterator[SimulatedFabric]:
    """The fabric of ``topology`` with its agents started (hosts served over gNMI too)."""
    fabric = SimulatedFabric(Simulator(topology), SimulatedFabricConfig.model_validate(
        {"host_telemetry": True, **config}))
    fabric.start()
    try:
        yield fabric
    finally:
        fabric.stop()


def shape(topo: Topology) -> dict[str, tuple[str, int | None, int | None]]:
    """Node id -> (role, pod, rail): the tiers and groups a builder gave."""
    return {n.id: (n.role.value, n.pod, n.rail) for n in topo.nodes}


def link_ids(topo: Topology) -> set[str]:
    return {link.id for link in topo.links}
