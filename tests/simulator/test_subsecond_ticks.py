"""The twin at 100 ms ticks: the same per-second rates as at 1 s, and fault times in
seconds landing on the right ticks (a 0.3 s PFC storm is three ticks, not one or four)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fabricops.core.topology import Topology
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.effects import fault_ticks
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.scenario import ScenarioError, scenario_from_dict, with_tick
from fabricops.simulator.workload import JobSpec

PAUSE = "pfc_rx_pause{prio=3}"
RATES = ("out_octets", "in_pkts", "ecn_marked_pkts", PAUSE, "pfc_tx_pause{prio=3}")


@pytest.fixture(scope="module")
def topo() -> Topology:
    return fat_tree(k=4)


def streaming(topo: Topology, tick_s: float, seed: int = 1) -> Simulator:
    """A job streaming without end on 12 of the 16 hosts, at ``tick_s``."""
    sim = Simulator(topo, SimConfig(seed=seed, tick_s=tick_s))
    sim.add_job(JobSpec(hosts=12, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    return sim


def victim(sim: Simulator) -> tuple[str, str]:
    """The first NIC of the job's first host, and the leaf port facing it."""
    host = sim.placement()["job-llm-01"][0]
    topo = sim.fabric.topology
    nic = next(p for p in topo.port_by_id if p.startswith(f"{host}:"))
    return nic, topo.peer_of[nic]


def run_to(sim: Simulator, t_s: float) -> None:
    while sim.time_s < t_s - 1e-9:
        sim.step()


@pytest.mark.parametrize(("start_s", "duration_s", "tick_s", "want"), [
    (1.0, 0.3, 0.1, (10, 13, 1.0)),
    (0.7, 0.3, 0.1, (7, 10, 1.0)),
    (0.6, 0.3, 0.1, (6, 9, 1.0)),
    (2.3, 0.3, 0.1, (23, 26, 1.0)),
    (0.05, 0.1, 0.1, (1, 2, 1.0)),
    (30.0, 60.0, 1.0, (30, 90, 1.0)),
    (30.0, None, 0.1, (300, math.inf, 1.0)),
    (1.0, 0.3, 1.0, (1, 2, 0.3)),  # shorter than a tick: the tick it starts in, 30 % of it
    (1.5, 0.3, 1.0, (1, 2, 0.3)),  # no tick starts inside it: the tick holding its middle
    (1.9, 0.3, 1.0, (2, 3, 0.3)),
])
def test_fault_times_land_on_ticks(start_s: float, duration_s: float | None, tick_s: float,
                                   want: tuple[int, float, float]) -> None:
    spec = FaultSpec(type="pfc_storm", entity="host-000:nic0", start_s=start_s,
                     duration_s=duration_s)
    first, stop, share = fault_ticks(spec, tick_s)
    assert (first, stop) == want[:2]
    assert share == pytest.approx(want[2])


def test_a_300ms_fault_is_three_100ms_ticks_wherever_it_starts() -> None:
    for k in range(2000):
        spec = FaultSpec(type="pfc_storm", entity="host-000:nic0", start_s=k / 10,
                         duration_s=0.3)
        assert fault_ticks(spec, 0.1)[:2] == (k, k + 3), k / 10


def per_second(topo: Topology, tick_s: float, t0_s: float, t1_s: float) -> dict[str, np.ndarray]:
    """Per-port rates of ``RATES`` and per-NIC rates over [t0_s, t1_s) of a steady fabric
    with a slow receiver (a steady pause)."""
    sim = streaming(topo, tick_s)
    sim.add_fault(FaultSpec(type="slow_receiver", entity=sim.placement()["job-llm-01"][0],
                            start_s=2.0, params={"drain_share": 0.5}))
    run_to(sim, t0_s)
    tel = sim.telemetry
    before = {n: tel.counter(n).astype(float) for n in RATES}
    nics = tel.nic_counters.astype(float)
    run_to(sim, t1_s)
    out = {n: (tel.counter(n).astype(float) - before[n]) / (t1_s - t0_s) for n in RATES}
    out["nic"] = (tel.nic_counters.astype(float) - nics) / (t1_s - t0_s)
    return out


def test_a_steady_fabric_has_the_same_per_second_rates_at_1s_and_100ms_ticks(
        topo: Topology) -> None:
    coarse = per_second(topo, 1.0, 5.0, 15.0)
    fine = per_second(topo, 0.1, 5.0, 15.0)
    assert coarse[PAUSE].sum() > 0, "the slow receiver pauses its leaf port"
    assert coarse["ecn_marked_pkts"].sum() > 0
    for name, rate in coarse.items():
        assert fine[name].sum() == pytest.approx(rate.sum(), rel=1e-3), name
        busy = rate > 1000
        assert fine[name][busy] == pytest.approx(rate[busy], rel=0.01), name  # binomial noise


def pauses_per_tick(sim: Simulator, port: str, ticks: int) -> np.ndarray:
    counter = sim.telemetry.counter(PAUSE)
    i = sim.fabric.port_index(port)
    out = []
    for _ in range(ticks):
        before = int(counter[i])
        sim.step()
        out.append(int(counter[i]) - before)
    return np.array(out)


@pytest.mark.parametrize("start_s", [1.0, 0.7, 2.3, 4.9])
def test_a_300ms_pfc_storm_at_100ms_ticks_pauses_its_port_on_exactly_3_ticks(
        topo: Topology, start_s: float) -> None:
    sim = streaming(topo, 0.1)
    nic, port = victim(sim)
    sim.add_fault(FaultSpec(type="pfc_storm", entity=nic, start_s=start_s, duration_s=0.3))
    frames = pauses_per_tick(sim, port, 60)
    first = round(start_s * 10)
    assert np.flatnonzero(frames).tolist() == [first, first + 1, first + 2]
    full = 0.1 / (sim.config.physics.pause_quanta_s / 2)  # frames that pause a whole tick
    assert frames[first:first + 3] == pytest.approx(full, abs=1)


def test_a_300ms_pfc_storm_at_1s_ticks_pauses_for_300ms_of_one_tick(topo: Topology) -> None:
    sim = streaming(topo, 1.0)
    nic, port = victim(sim)
    sim.add_fault(FaultSpec(type="pfc_storm", entity=nic, start_s=2.0, duration_s=0.3))
    frames = pauses_per_tick(sim, port, 6)
    assert np.flatnonzero(frames).tolist() == [2]
    assert frames[2] == pytest.approx(0.3 / (sim.config.physics.pause_quanta_s / 2), abs=1)


def test_a_link_flap_at_100ms_ticks_is_down_for_its_down_time(topo: Topology) -> None:
    sim = streaming(topo, 0.1)
    link = next(iter(topo.link_by_id))
    li = sim.fabric.link_index(link)
    sim.add_fault(FaultSpec(type="link_flap", entity=link, start_s=1.0, duration_s=3.0,
                            params={"period_s": 1.0, "down_s": 0.3}))
    down = []
    for _ in range(50):
        sim.step()
        down.append(not sim.oper_up[li])
    assert np.flatnonzero(down).tolist() == [t + k for t in (10, 20, 30) for k in range(3)]


def test_a_switch_back_from_a_subsecond_outage_has_rebooted(topo: Topology) -> None:
    sim = streaming(topo, 0.1)
    sim.add_fault(FaultSpec(type="switch_down", entity="leaf-0-0", start_s=1.0,
                            duration_s=0.5))
    ports = sim.fabric.node_ports(sim.fabric.node_index("leaf-0-0"))
    sent, reporting = [], []
    for _ in range(16):
        sim.step()
        reporting.append("leaf-0-0" in {f.device for f in sim.frames()})
        sent.append(int(sim.telemetry.counter("out_octets")[ports.start:ports.stop].sum()))
    assert [i for i, up in enumerate(reporting) if not up] == [10, 11, 12, 13, 14]
    assert 0 < sent[15] < sent[9] / 5, "counting again from zero after the reboot"


def test_a_compute_phase_ends_on_its_tick_at_100ms(topo: Topology) -> None:
    sim = Simulator(topo, SimConfig(seed=1, tick_s=0.1))
    sim.add_job(JobSpec(hosts=4, compute_s=0.3, comm_bytes_per_nic=1e15))
    busy = [bool(sim.step().demand_bps.any()) for _ in range(6)]
    assert busy == [False, False, False, True, True, True]


def test_a_scenario_can_be_stepped_at_another_tick() -> None:
    doc = {"name": "fine", "duration_s": 20, "tick_s": 1.0,
           "topology": {"builder": "fat_tree", "params": {"k": 4}},
           "faults": [{"type": "pfc_storm", "entity": "host-000:nic0", "start_s": 5,
                       "duration_s": 0.3}]}
    scenario = scenario_from_dict(doc)
    fine = with_tick(scenario, 0.1)
    assert (fine.tick_s, fine.ticks, fine.faults) == (0.1, 200, scenario.faults)
    assert with_tick(scenario, None) is scenario
    with pytest.raises(ScenarioError, match="tick_s"):
        with_tick(scenario, 0.0)
