"""The simulated tracer follows the switches' forwarding; planned probes, reported over INT
by the simulator's exporter, cross every link of real builder fabrics."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest

from fabricops.collectors.int_parse import parse_packets
from fabricops.core.probes import ProbeFlow
from fabricops.core.topology import Topology
from fabricops.pipeline.probes import (
    ProbePlan,
    ProbePlanner,
    ProbePlannerConfig,
    UncoveredReason,
    one_probe_per_link_count,
)
from fabricops.simulator.agents.int_exporter import IntExporter, IntExporterConfig, ListSender
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.agents.tracer import SimulatedTracer
from fabricops.simulator.builders import fat_tree, leaf_spine, rail_optimized
from fabricops.simulator.engine import SimConfig, Simulator


def plan_for(sim: Simulator, **config: object) -> ProbePlan:
    cfg = ProbePlannerConfig.model_validate(config)
    return ProbePlanner(cfg, sim.fabric.topology, SimulatedTracer(sim)).plan()


def reported_links(topo: Topology, names: dict[int, str], datagrams: list[bytes]) -> set[str]:
    """Links named by the (switch, ingress port) and (switch, egress port) of every hop."""
    batch, stats = parse_packets(datagrams)
    assert stats.malformed_total == 0
    links = set()
    for node, ports in ((batch.node_id, batch.ingress_port), (batch.node_id, batch.egress_port)):
        for n, p in zip(node.tolist(), ports.tolist(), strict=True):
            links.add(topo.link_of_port(f"{names[n]}:eth{p}"))
    return links


def test_traced_paths_are_the_paths_the_switches_give_workload_flows(
    streaming: Callable[..., Simulator],
) -> None:
    sim = streaming(ecmp_seeds="identical")
    sim.control.set_wcmp_weights("leaf-0", {"leaf-0:eth33": 0, "leaf-0:eth34": 5})
    fab, fl = sim.fabric, sim.workload.flows
    rows = np.flatnonzero(fl.active)[:500]
    flows = [ProbeFlow(fab.port_ids[fab.nic_ports[s]], fab.port_ids[fab.nic_ports[d]], int(p))
             for s, d, p in zip(fl.src_nic[rows], fl.dst_nic[rows], fl.sport[rows], strict=True)]
    got = SimulatedTracer(sim).trace(flows)
    for row, path in zip(rows.tolist(), got, strict=True):
        want = [fab.link_ids[c // 2] for c in sim.paths[row].tolist() if c != fab.dummy_channel]
        assert path == tuple(want)
    with pytest.raises(ValueError, match="'leaf-0:eth1' is not a NIC"):
        SimulatedTracer(sim).trace([ProbeFlow("leaf-0:eth1", "host-001:nic0", 1)])


def test_flows_across_a_link_down_before_routing_converges_are_unroutable(
    streaming: Callable[..., Simulator],
) -> None:
    sim = streaming()
    sim.control.shut_port("spine-0:eth1")
    sim.step()
    link = sim.fabric.link_index(sim.fabric.topology.link_of_port("spine-0:eth1"))
    crossing = (sim.paths // 2 == link).any(axis=1) & sim.workload.flows.active
    fab, fl = sim.fabric, sim.workload.flows
    rows = np.flatnonzero(crossing)[:20]
    assert len(rows) > 0
    flows = [ProbeFlow(fab.port_ids[fab.nic_ports[fl.src_nic[r]]],
                       fab.port_ids[fab.nic_ports[fl.dst_nic[r]]], int(fl.sport[r])) for r in rows]
    assert SimulatedTracer(sim).trace(flows) == [None] * len(rows)


@pytest.mark.parametrize("topo", [leaf_spine(gpus=512), fat_tree(k=8), rail_optimized(gpus=1024)],
                         ids=["leaf-spine-512", "fat-tree-8", "rail-1024"])
def test_plan_covers_every_link_with_far_fewer_probes_than_links(topo: Topology) -> None:
    sim = Simulator(topo, SimConfig(seed=2))
    plan = plan_for(sim)
    assert plan.coverage == 1.0
    assert set(plan.covered) == {link.id for link in topo.links}
    assert len(plan.probes) < one_probe_per_link_count(topo) / 3


def test_the_exporter_reports_planned_probes_with_hops_on_every_link() -> None:
    topo = fat_tree(k=8)
    sim = Simulator(topo, SimConfig(seed=1))
    plan = plan_for(sim)
    sender = ListSender()
    exporter = IntExporter(IntExporterConfig(sample_flows_per_tick=0, probe_flows=plan.probes),
                           sim, sender)
    for _ in range(3):
        sim.step()
        exporter.on_tick(sim)
    assert len(sender.datagrams) == 3 * len(plan.probes)
    assert reported_links(topo, exporter.node_names, sender.datagrams) == set(plan.covered)


def test_shut_links_are_reported_uncovered_with_a_reason(
    streaming: Callable[..., Simulator],
) -> None:
    sim = streaming()
    topo = sim.fabric.topology
    sim.control.shut_port("spine-3:eth7")
    sim.control.shut_port("host-005:nic2")
    sim.run(3)  # past the convergence delay: routing no longer uses the links
    plan = plan_for(sim)
    why = {u.link: u.reason for u in plan.uncovered}
    assert why == {topo.link_of_port("spine-3:eth7"): UncoveredReason.NOT_ON_ANY_PATH,
                   topo.link_of_port("host-005:nic2"): UncoveredReason.NIC_UNROUTABLE}
    assert len(plan.covered) == len(topo.links) - 2


def test_a_running_fabric_traces_between_ticks_and_reports_the_applied_plan() -> None:
    sim = Simulator(leaf_spine(gpus=64), SimConfig(seed=3))
    fabric = SimulatedFabric(sim, SimulatedFabricConfig(
        speed=50.0, int_exporter=IntExporterConfig(sample_flows_per_tick=0)))
    sender = ListSender()
    fabric.int_exporter.sender = sender
    topo = sim.fabric.topology
    fabric.start()
    try:
        planner = ProbePlanner(ProbePlannerConfig(), topo, fabric.tracer())
        plan = planner.plan()
        assert plan.coverage == 1.0
        fabric.set_probe_flows(plan.probes)
        ticks = fabric.driver.ticks
        end = time.monotonic() + 5.0
        while fabric.driver.ticks < ticks + 3:
            assert time.monotonic() < end, "the fabric stopped ticking"
            time.sleep(0.01)
    finally:
        fabric.stop()
    got = reported_links(topo, fabric.int_exporter.node_names, list(sender.datagrams))
    assert got == {link.id for link in topo.links}
    with pytest.raises(ValueError, match="is not a NIC"):
        fabric.set_probe_flows([ProbeFlow("leaf-0:eth1", "host-001:nic0", 1)])
