"""The control surface: the operations remediation will use on the fabric."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from fabricops.core.topology import Topology
from fabricops.simulator.control import ControlError
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.workload import JobSpec

from .conftest import STREAM, busiest_fabric_link, crossing

Make = Callable[..., Simulator]


def _uses_port(sim: Simulator, port: str) -> bool:
    ch = sim.fabric.port_tx_ch[sim.fabric.port_index(port)]
    active = sim.workload.flows.active
    return bool((sim.paths[active] == ch).any())


def test_shut_and_no_shut_move_traffic_off_and_back(streaming: Make) -> None:
    sim = streaming(convergence_delay_s=1.0)
    sim.run(2)
    link = busiest_fabric_link(sim)
    port = sim.fabric.topology.links[link].a
    sim.control.shut_port(port)
    sim.run(3)
    assert sim.telemetry.oper_status[sim.fabric.port_index(port)] == 2
    assert not crossing(sim, link)[sim.workload.flows.active].any()
    sim.control.no_shut_port(port)
    sim.run(3)
    assert sim.telemetry.oper_status[sim.fabric.port_index(port)] == 1
    assert crossing(sim, link)[sim.workload.flows.active].any()


def test_wcmp_weight_zero_drains_an_uplink(streaming: Make) -> None:
    sim = streaming()
    sim.run(1)
    uplink = "leaf-3:eth33"
    assert _uses_port(sim, uplink)
    sim.control.set_wcmp_weights("leaf-3", {uplink: 0})
    assert not _uses_port(sim, uplink)
    sim.step()
    assert sim.last is not None
    assert sim.last.served_bps[sim.fabric.port_tx_ch[sim.fabric.port_index(uplink)]] == 0.0
    sim.control.set_wcmp_weights("leaf-3", {uplink: 1})
    assert _uses_port(sim, uplink)


def test_relabel_rehashes_a_jobs_flows(streaming: Make) -> None:
    sim = streaming()
    before = sim.paths.copy()
    count = sim.control.relabel_flows("job-llm-01")
    assert count == int(sim.workload.flows.active.sum())
    assert (sim.paths != before).any(axis=1).sum() > count // 4


def _pairs_on_uplinks(sim: Simulator, switch: str) -> tuple[int, int]:
    """(NIC pairs whose flows leave ``switch`` on more than one uplink, NIC pairs leaving it)."""
    fab, fl = sim.fabric, sim.workload.flows
    rx_node = np.append(fab.ch_rx_node(), -1)
    is_switch = np.append(~fab.node_is_host, False)
    flows = np.flatnonzero(fl.active)
    first, second = sim.paths[flows, 0], sim.paths[flows, 1]
    up = (rx_node[first] == fab.node_index(switch)) & is_switch[rx_node[second]]
    uplinks: dict[tuple[int, int], set[int]] = {}
    for f, ch in zip(flows[up], second[up], strict=True):
        uplinks.setdefault((int(fl.src_nic[f]), int(fl.dst_nic[f])), set()).add(int(ch))
    return sum(len(c) > 1 for c in uplinks.values()), len(uplinks)


def test_hashing_on_l4_spreads_a_polarized_switch_and_undoing_it_polarizes_again(
        fabric512: Topology) -> None:
    sim = Simulator(fabric512, SimConfig(seed=3))
    job = JobSpec(hosts=60, placement="random", qps_per_pair=4, **STREAM)  # type: ignore[arg-type]
    sim.add_job(job)
    sim.add_fault(FaultSpec(type="hash_polarization", entity="leaf-3", start_s=1.0))
    sim.run(2)
    assert not sim.control.ecmp_hash_l4("leaf-3")
    spread, pairs = _pairs_on_uplinks(sim, "leaf-3")
    assert pairs > 20
    assert spread == 0  # every queue pair of a NIC pair on one uplink

    sim.control.set_ecmp_hash("leaf-3", l4=True)
    assert sim.control.ecmp_hash_l4("leaf-3")
    assert _pairs_on_uplinks(sim, "leaf-3")[0] > pairs // 2  # at once, before the next tick
    sim.run(2)
    assert _pairs_on_uplinks(sim, "leaf-3")[0] > pairs // 2  # the configured hash wins

    sim.control.set_ecmp_hash("leaf-3", l4=False)
    sim.run(2)
    assert not sim.control.ecmp_hash_l4("leaf-3")
    assert _pairs_on_uplinks(sim, "leaf-3")[0] == 0
    assert sim.control.ecmp_hash_l4("leaf-2")  # a switch never configured follows the faults


def test_node_replacement_drains_and_attaches_a_spare(streaming: Make) -> None:
    sim = streaming(hosts=60)
    sim.run(2)
    job = sim.control.drain_host("host-010")
    assert job == "job-llm-01"
    spare = sim.control.attach_spare("job-llm-01")
    assert spare not in {"host-010"}
    sim.run(2)
    fab, fl = sim.fabric, sim.workload.flows
    assert sim.last is not None

    def sending(host: str) -> float:
        nics = [fab.port_nic[p] for p in fab.node_ports(fab.node_index(host))]
        return float(sim.last.rate_bps[np.isin(fl.src_nic, nics)].sum())  # type: ignore[union-attr]

    assert sending("host-010") == 0.0
    assert sending(spare) > 0.0
    assert len(sim.workload.hosts[0]) == 60


def test_reboot_zeroes_a_devices_counters(streaming: Make) -> None:
    sim = streaming()
    sim.run(2)
    ports = [sim.fabric.port_index(p) for p in sim.fabric.port_ids if p.startswith("leaf-0:")]
    assert sim.telemetry.counter("out_octets")[ports].sum() > 0
    sim.control.reboot("leaf-0")
    assert sim.telemetry.counter("out_octets")[ports].sum() == 0


def test_control_errors_name_the_target(streaming: Make) -> None:
    sim = streaming()
    with pytest.raises(ControlError, match="port 'leaf-0:eth99' does not exist"):
        sim.control.shut_port("leaf-0:eth99")
    with pytest.raises(ControlError, match="'host-001' is not a switch"):
        sim.control.set_wcmp_weights("host-001", {})
    with pytest.raises(ControlError, match="not on switch 'leaf-0'"):
        sim.control.set_wcmp_weights("leaf-0", {"leaf-1:eth33": 0})
    with pytest.raises(ControlError, match="weight of port 'leaf-0:eth33' must be >= 0"):
        sim.control.set_wcmp_weights("leaf-0", {"leaf-0:eth33": -1})
    with pytest.raises(ControlError, match="job 'job-nope' does not exist"):
        sim.control.attach_spare("job-nope")
    with pytest.raises(ControlError, match="'spine-0' is not a host"):
        sim.control.drain_host("spine-0")
    with pytest.raises(ControlError, match="'leaf-99' is not a switch"):
        sim.control.set_ecmp_hash("leaf-99", l4=True)
    with pytest.raises(ControlError, match="'host-001' is not a switch"):
        sim.control.ecmp_hash_l4("host-001")


def test_ground_truth_lists_only_faults_that_started(streaming: Make) -> None:
    sim = streaming()
    sim.add_fault(FaultSpec(type="nic_down", entity="host-001:nic0", start_s=1, duration_s=10))
    sim.add_fault(FaultSpec(type="nic_down", entity="host-002:nic0", start_s=50))
    sim.run(4)
    truth = sim.ground_truth()
    assert [(g.entity, g.start_s, g.end_s) for g in truth] == [("host-001:nic0", 1.0, 4.0)]


def _incast_victim(sim: Simulator) -> tuple[str, int]:
    """A NIC of the job's first host under an incast of 16 senders; its NIC index."""
    fab = sim.fabric
    host = fab.node_ids[sim.workload.hosts[0][0]]
    nic = f"{host}:{fab.topology.node_by_id[host].ports[0].name}"
    sim.run(2)
    sim.add_fault(FaultSpec(type="incast", entity=nic, params={"fan_in": 16}))
    sim.run(3)
    return nic, int(fab.port_nic[fab.port_index(nic)])


def test_an_ingress_limit_paces_the_incast_and_leaves_the_jobs_own_traffic(
        streaming: Make) -> None:
    sim = streaming()
    nic, victim = _incast_victim(sim)
    fl, tor = sim.workload.flows, sim.fabric.port_index(sim.fabric.topology.attachment(nic))
    into = (fl.dst_nic == victim) & fl.active
    foreign, own = into & (fl.job < 0), into & (fl.job == 0)
    speed = float(sim.fabric.port_speed_bps[sim.fabric.port_index(nic)])
    assert sim.last is not None
    assert sim.last.rate_bps[foreign].sum() > 0.5 * speed  # the incast fills the NIC
    def marks() -> int:
        return int(sim.telemetry.counter("ecn_marked_pkts")[tor])

    before = marks()
    sim.run(3)
    during = marks() - before
    assert during > 0  # the victim's switch port marks the incast

    assert sim.control.limit_ingress(nic, 0.1, "job-llm-01") == 1.0
    sim.run(1)
    limited = marks()
    sim.run(3)
    assert sim.last.rate_bps[foreign].sum() <= 0.1 * speed * 1.0001
    assert sim.last.rate_bps[own].sum() > 0
    assert marks() - limited < during / 10  # the queue at the victim's port drained

    assert sim.control.limit_ingress(nic, 1.0) == 0.1  # lifted: the incast is back
    sim.run(2)
    assert sim.last.rate_bps[foreign].sum() > 0.5 * speed


def test_an_ingress_limit_refuses_what_is_not_a_nic_a_share_or_a_job(streaming: Make) -> None:
    sim = streaming()
    nic = next(sim.fabric.topology.nics())
    with pytest.raises(ControlError, match="not a NIC"):
        sim.control.limit_ingress("leaf-0", 0.1)
    with pytest.raises(ControlError, match=r"not in \(0, 1\]"):
        sim.control.limit_ingress(nic, 0.0)
    with pytest.raises(ControlError, match="does not exist"):
        sim.control.limit_ingress(nic, 0.1, "no-such-job")
