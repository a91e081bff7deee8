"""A user-supplied topology of another shape (a 2-D torus) routes and runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fabricops.core.topology import load_topology, save_topology, topology_from_dict
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec

SPEED = 400_000_000_000


def torus_doc(n: int = 3) -> dict[str, object]:
    """An n x n torus of switches, each with one single-NIC host."""
    nodes: list[dict[str, object]] = []
    links: list[dict[str, str]] = []
    for x in range(n):
        for y in range(n):
            ports = [{"name": f"eth{i}", "speed_bps": SPEED} for i in range(5)]
            nodes.append({"id": f"sw-{x}-{y}", "role": "switch", "ports": ports})
            nodes.append({"id": f"host-{x}{y}", "role": "host",
                          "ports": [{"name": "nic0", "speed_bps": SPEED, "rail": 0}]})
            links.append({"a": f"host-{x}{y}:nic0", "b": f"sw-{x}-{y}:eth0"})
            links.append({"a": f"sw-{x}-{y}:eth1", "b": f"sw-{(x + 1) % n}-{y}:eth2"})
            links.append({"a": f"sw-{x}-{y}:eth3", "b": f"sw-{x}-{(y + 1) % n}:eth4"})
    return {"name": "torus", "nodes": nodes, "links": links}


def test_torus_routes_on_shortest_paths_and_carries_traffic(tmp_path: Path) -> None:
    path = save_topology(topology_from_dict(torus_doc()), tmp_path / "torus.yaml")
    sim = Simulator(load_topology(path), SimConfig(seed=2))
    sim.add_job(JobSpec(hosts=9, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    sim.run(3)
    assert sim.routable[sim.workload.flows.active].all()
    hops = (sim.paths != sim.fabric.dummy_channel).sum(axis=1)
    assert hops.max() <= 4, "a 3x3 torus needs at most 2 switch-to-switch hops"
    assert sim.last is not None
    assert sim.last.goodput_bps.sum() > 0.3 * 9 * SPEED


def test_torus_reroutes_around_a_cut(tmp_path: Path) -> None:
    sim = Simulator(topology_from_dict(torus_doc()), SimConfig(seed=2, convergence_delay_s=1))
    sim.add_job(JobSpec(hosts=9, placement="packed", compute_s=0.0, comm_bytes_per_nic=1e15))
    sim.run(1)
    sim.control.shut_port("sw-0-0:eth1")
    sim.run(3)
    link = sim.fabric.link_index(sim.fabric.topology.link_of_port("sw-0-0:eth1"))
    assert not (sim.paths[sim.workload.flows.active] // 2 == link).any()
    assert sim.last is not None
    assert np.all(sim.last.goodput_bps[sim.workload.flows.active] > 0)
