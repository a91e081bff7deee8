"""Every fault of the catalogue shows the symptom an operator would see in telemetry."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from fabricops.simulator.engine import Simulator
from fabricops.simulator.faults import FaultError, FaultSpec, FaultType, parse_fault

from .conftest import busiest_fabric_link

Make = Callable[..., Simulator]
UPLINK = "leaf-3:eth33~spine-0:eth13"
NIC = "host-010:nic3"


def _run_with(sim: Simulator, spec: FaultSpec, ticks: int = 5) -> dict[str, np.ndarray]:
    """Counter deltas per port over ``ticks`` after injecting ``spec`` at the current time."""
    sim.run(3)
    sim.add_fault(spec)
    tel = sim.telemetry
    before = {n: tel.counter(n).astype(np.float64) for n in tel.counter_names}
    nic_before = tel.nic_counters.astype(np.float64)
    sim.run(ticks)
    out = {n: tel.counter(n).astype(np.float64) - before[n] for n in tel.counter_names}
    out.update({f"nic:{i}": tel.nic_counters[i] - nic_before[i] for i in range(4)})
    return out


def _port(sim: Simulator, port: str) -> int:
    return sim.fabric.port_index(port)


def test_link_flap_counts_carrier_transitions(streaming: Make) -> None:
    sim = streaming()
    d = _run_with(sim, FaultSpec(type="link_flap", entity=UPLINK,
                                 params={"period_s": 2, "down_s": 1}), ticks=8)
    a, _b = UPLINK.split("~")
    assert d["carrier_transitions"][_port(sim, a)] >= 6
    assert d["carrier_transitions"].sum() == 2 * d["carrier_transitions"][_port(sim, a)]


def test_optic_degradation_lowers_rx_power_then_corrupts(streaming: Make) -> None:
    sim = streaming()
    sim.run(3)
    _, b = UPLINK.split("~")
    start = sim.telemetry.gauge("rx_power_dbm")[_port(sim, b)]
    sim.add_fault(FaultSpec(type="optic_degradation", entity=UPLINK, start_s=sim.time_s,
                            params={"decay_db_per_s": 0.5}))
    errors = sim.telemetry.counter("in_fcs_errors")[_port(sim, b)]
    sim.run(10)
    mid = sim.telemetry.gauge("rx_power_dbm")[_port(sim, b)]
    assert mid < start - 3.5
    assert sim.telemetry.counter("in_fcs_errors")[_port(sim, b)] == errors, "still above floor"
    sim.run(14)
    assert sim.telemetry.counter("in_fcs_errors")[_port(sim, b)] > errors


def test_nic_down_reports_oper_down_and_stalls_its_flows(streaming: Make) -> None:
    sim = streaming()
    _run_with(sim, FaultSpec(type="nic_down", entity=NIC))
    assert sim.telemetry.oper_status[_port(sim, NIC)] == 2
    nic = sim.fabric.port_nic[_port(sim, NIC)]
    mine = sim.workload.flows.src_nic == nic
    assert sim.last is not None
    assert np.all(sim.last.goodput_bps[mine] == 0)


def test_incast_marks_ecn_and_draws_cnps_at_the_victim(streaming: Make) -> None:
    sim = streaming()
    d = _run_with(sim, FaultSpec(type="incast", entity=NIC, params={"fan_in": 16}))
    tor = _port(sim, sim.fabric.topology.attachment(NIC))
    assert d["ecn_marked_pkts"][tor] > 0
    assert d["nic:0"][sim.fabric.port_nic[_port(sim, NIC)]] > 0  # cnp_sent by the victim


def test_slow_receiver_pauses_its_tor_without_spreading(streaming: Make) -> None:
    sim = streaming()
    d = _run_with(sim, FaultSpec(type="slow_receiver", entity=NIC,
                                 params={"drain_share": 0.2}), ticks=6)
    rx = d["pfc_rx_pause{prio=3}"]
    tor = _port(sim, sim.fabric.topology.attachment(NIC))
    spines = np.array([p.startswith("spine") for p in sim.fabric.port_ids])
    assert rx[tor] > 0.5 * 6 / (65535 * 512 / 400e9 / 2)  # paused most of each tick
    assert rx[spines].sum() < 0.01 * rx[tor], "a slow receiver's pauses stay at its ToR"


def test_hash_polarization_concentrates_uplinks_without_errors(streaming: Make) -> None:
    sim = streaming(hosts=64)
    sim.run(3)
    assert sim.last is not None
    fab = sim.fabric
    up = np.array([p.startswith("leaf-3:") for p in fab.port_ids])
    tx = fab.port_tx_ch[up & (np.array([int(p.split("eth")[-1]) > 32 if "eth" in p else False
                                        for p in fab.port_ids]))]
    before = np.count_nonzero(sim.last.served_bps[tx])
    sim.add_fault(FaultSpec(type="hash_polarization", entity="leaf-3", start_s=sim.time_s))
    errors = sim.telemetry.counter("in_errors").sum()
    sim.run(3)
    after = np.count_nonzero(sim.last.served_bps[tx])
    assert after < before
    assert sim.telemetry.counter("in_errors").sum() == errors


def test_ecn_misconfig_marks_without_overload(streaming: Make) -> None:
    sim = streaming()
    d = _run_with(sim, FaultSpec(type="ecn_misconfig", entity="spine-1"))
    spine = np.array([p.startswith("spine-1:") for p in sim.fabric.port_ids])
    others = np.array([p.startswith("spine-") and not p.startswith("spine-1:")
                       for p in sim.fabric.port_ids])
    peer_average = d["ecn_marked_pkts"][others].sum() / 7
    assert d["ecn_marked_pkts"][spine].sum() > 10 * max(1.0, peer_average)


def test_pfc_deadlock_pauses_a_cycle_for_good(streaming: Make) -> None:
    sim = streaming()
    sim.run(3)
    link = sim.fabric.link_ids[busiest_fabric_link(sim)]
    sim.add_fault(FaultSpec(type="pfc_deadlock", entity=link, start_s=sim.time_s))
    sim.run(3)
    assert sim.last is not None
    assert np.count_nonzero(sim.last.pause_share[:-1] >= 1.0) >= 4


def test_every_fault_type_is_covered() -> None:
    names = {name.removeprefix("test_").split("_")[0] for name in globals() if
             name.startswith("test_")}
    assert {"link", "optic", "nic", "incast", "slow", "hash", "ecn", "pfc"} <= names
    assert len(FaultType) == 12


# --- bad input -------------------------------------------------------------


def test_fault_on_missing_entity_is_refused_by_name(streaming: Make) -> None:
    sim = streaming()
    with pytest.raises(FaultError, match=r"leaf-99:eth1~spine-0:eth1.*does not exist"):
        sim.add_fault(FaultSpec(type="gray_loss", entity="leaf-99:eth1~spine-0:eth1"))


def test_fault_on_wrong_kind_suggests_the_link(streaming: Make) -> None:
    sim = streaming()
    with pytest.raises(FaultError, match=r"needs a link.*did you mean link 'leaf-3:eth33~"):
        sim.add_fault(FaultSpec(type="link_down", entity="leaf-3:eth33"))
    with pytest.raises(FaultError, match="needs a switch"):
        sim.add_fault(FaultSpec(type="switch_down", entity="host-001"))


def test_negative_duration_is_refused_naming_the_field() -> None:
    with pytest.raises(FaultError, match=r"fault #2 \(link_down on 'x'\): duration_s.*-5"):
        parse_fault({"type": "link_down", "entity": "x", "duration_s": -5}, 2)
    with pytest.raises(FaultError, match="loss_rate"):
        parse_fault({"type": "gray_loss", "entity": "x", "params": {"loss_rate": 2}}, 0)
    with pytest.raises(FaultError, match="type"):
        parse_fault({"type": "meteor_strike", "entity": "x"}, 0)
