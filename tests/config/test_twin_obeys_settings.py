"""Each RoCE setting, planted wrong on the twin: its symptom, the check that names it, and
apply + validate bringing back full bandwidth with zero drops."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from fabricops.config.check import check_fabric
from fabricops.config.running import intended_settings
from fabricops.core.actions import ActionState
from fabricops.core.topology import Topology
from fabricops.simulator.engine import Simulator
from fabricops.simulator.faults import FaultSpec
from tests.config.twin import (
    applier,
    fat_tree_16,
    leaf_spine_32,
    passes,
    provisioned,
    read,
    traffic,
)


@dataclass(frozen=True)
class Case:
    fault: str
    setting: str
    check: str
    symptom: str  # what shows in telemetry


CASES = [
    Case("mtu_mismatch", "mtu_bytes", "mtu_link", "in_errors"),
    Case("pfc_priority_mismatch", "pfc_priorities", "lossless_priority", "in_discards"),
    Case("headroom_short", "headroom_bytes", "headroom", "in_discards"),
    Case("ecn_threshold", "ecn.min_threshold_bytes", "ecn_range", "pause"),
    Case("ecn_misconfig", "ecn.min_threshold_bytes", "ecn_range", "ecn_marked_pkts"),
]


def _congested_port(topo: Topology) -> str:
    """The switch port whose traffic is paused most under the validation traffic."""
    sim, _ = provisioned(topo)
    return traffic(sim).worst_pause_port


def _plant(sim: Simulator, case: Case, port: str) -> str:
    """Plant ``case`` where the validation traffic congests; return the device it changed."""
    topo = sim.fabric.topology
    link = topo.link_by_id[topo.link_of_port(port)]
    rx = link.b if link.a == port else link.a  # the end that pauses ``port``
    if case.fault in ("ecn_threshold", "ecn_misconfig"):
        entity, params, device = port.split(":")[0], {}, port.split(":")[0]
    else:
        end = "a" if link.a == rx else "b"
        entity, params, device = link.id, {"end": end}, rx.split(":")[0]
    sim.add_fault(FaultSpec(type=case.fault, entity=entity, params=params))
    sim.step()
    return device


def _counter(sim: Simulator, name: str) -> int:
    return int(sim.telemetry.counter(name).sum())


@pytest.mark.parametrize("case", CASES, ids=[c.fault for c in CASES])
def test_a_wrong_setting_shows_is_named_and_apply_restores_full_bandwidth(case: Case) -> None:
    topo = leaf_spine_32()
    healthy_sim, plan = provisioned(topo)
    healthy = traffic(healthy_sim)
    assert healthy.drops == 0
    assert passes(healthy)
    port = _congested_port(topo)

    sim, _ = provisioned(topo)
    device = _plant(sim, case, port)
    before = {n: _counter(sim, n) for n in ("in_errors", "in_discards", "ecn_marked_pkts")}
    broken = traffic(sim)
    assert not passes(broken)
    if case.symptom == "pause":
        assert broken.pause_share_max > 10 * max(healthy.pause_share_max, 1e-3)
    elif case.symptom == "ecn_marked_pkts":
        assert broken.ecn_marked_share > 10 * healthy.ecn_marked_share
        assert broken.busbw_share < 0.8 * healthy.busbw_share
    else:
        assert _counter(sim, case.symptom) > before[case.symptom]
        assert broken.drops > 0
        assert broken.retransmits > 0

    report = check_fabric(plan, read(sim)(list(sim.fabric.node_ids))[0])
    named = {(f.check, f.device, f.setting) for f in report.findings}
    assert (case.check, device, case.setting) in named
    assert ("intent", device, case.setting) in named

    outcome = applier(sim, plan).apply(intended_settings(plan), now_ns=1)
    assert outcome.action is not None
    assert outcome.action.state is ActionState.VERIFIED
    assert set(outcome.changes) == {device}
    assert check_fabric(plan, read(sim)(list(sim.fabric.node_ids))[0]).ok
    after = traffic(sim)
    assert passes(after)
    assert after.drops == 0
    assert after.busbw_share == pytest.approx(healthy.busbw_share, abs=0.01)


def _uplink_octets(sim: Simulator, switch: str) -> np.ndarray:
    fab = sim.fabric
    ports = [p for p in fab.node_ports(fab.node_index(switch))
             if "core" in fab.topology.peer_of.get(fab.port_ids[p], "")]
    return sim.telemetry.counter("out_octets")[ports].astype(float)


def test_equal_hash_seeds_polarize_are_named_and_apply_spreads_again() -> None:
    topo = fat_tree_16()
    healthy_sim, plan = provisioned(topo)
    healthy = traffic(healthy_sim)
    sim, _ = provisioned(topo)
    sim.add_fault(FaultSpec(type="hash_seed_equal", entity="agg-0-0"))
    sim.step()
    start = _uplink_octets(sim, "agg-0-0")
    broken = traffic(sim)
    sent = _uplink_octets(sim, "agg-0-0") - start
    assert sent.min() < 0.1 * sent.max()  # one core uplink carries (nearly) all of it
    assert broken.worst_nic_share < 0.85 * healthy.worst_nic_share

    report = check_fabric(plan, read(sim)(list(sim.fabric.node_ids))[0])
    seeds = {f.device for f in report.findings if f.check == "hash_seeds"}
    assert seeds >= {"agg-0-0", "core-0", "core-1"} or seeds >= {"leaf-0-0", "leaf-0-1"}

    outcome = applier(sim, plan).apply(intended_settings(plan), now_ns=1)
    assert outcome.action is not None
    assert outcome.action.state is ActionState.VERIFIED
    after = traffic(sim)
    assert passes(after)
    assert after.worst_nic_share == pytest.approx(healthy.worst_nic_share, abs=0.01)
