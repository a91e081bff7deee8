"""Jobs alternate compute and collectives; sharing approaches max-min fairness."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.core.topology import Topology
from fabricops.simulator import physics as ph
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.workload import JobSpec


def _job(topo: Topology, **spec: object) -> Simulator:
    sim = Simulator(topo, SimConfig(seed=4))
    sim.add_job(JobSpec(**spec))  # type: ignore[arg-type]
    return sim


def test_job_alternates_compute_and_collective(fabric512: Topology) -> None:
    sim = _job(fabric512, hosts=8, compute_s=2.0, comm_bytes_per_nic=1e11)
    demand = []
    for _ in range(12):
        obs = sim.step()
        demand.append(obs.demand_bps.sum() > 0)
    assert demand[:2] == [False, False], "the first step starts with compute"
    assert any(demand)
    assert not all(demand[2:])
    assert sim.workload.steps[0] >= 2


def test_ring_allreduce_runs_over_every_rail(fabric512: Topology) -> None:
    sim = _job(fabric512, hosts=4, qps_per_pair=2)
    fab, fl = sim.fabric, sim.workload.flows
    assert len(fl) == 4 * 8 * 2
    assert np.array_equal(fab.nic_rail[fl.src_nic], fab.nic_rail[fl.dst_nic])
    assert len(np.unique(fl.sport)) > len(fl) // 2, "each queue pair has its own source port"


def test_a_job_that_stops_sends_nothing_more_and_frees_its_hosts(fabric512: Topology) -> None:
    sim = _job(fabric512, hosts=8, compute_s=0.0, comm_bytes_per_nic=1e15, stop_s=5.0)
    spares = len(sim.workload.free_hosts())
    sent = [float(sim.step().demand_bps.sum()) for _ in range(8)]
    assert all(d > 0 for d in sent[:5]), "the job runs until it stops"
    assert sent[5:] == [0.0, 0.0, 0.0], "no flow of an ended job asks for bandwidth"
    assert not sim.workload.flows.active.any()
    assert len(sim.workload.free_hosts()) == spares + 8
    sim.add_job(JobSpec(name="job-next", hosts=spares + 8))  # its hosts can be reused


def test_a_job_must_stop_after_it_starts() -> None:
    with pytest.raises(ValueError, match="stop_s"):
        JobSpec(start_s=10.0, stop_s=10.0)


def test_gray_loss_slows_the_whole_collective(fabric512: Topology) -> None:
    def steps(loss: float | None) -> int:
        sim = _job(fabric512, hosts=16, placement="random", compute_s=0.5,
                   comm_bytes_per_nic=5e10)
        if loss is not None:
            sim.run(1)
            busiest = int(np.argmax(sim.paths[sim.workload.flows.active][:, 1]))
            link = int(sim.paths[sim.workload.flows.active][busiest, 1]) // 2
            sim.add_fault(FaultSpec(type="gray_loss", entity=sim.fabric.link_ids[link],
                                    start_s=sim.time_s, params={"loss_rate": 5e-3}))
        sim.run(40)
        return int(sim.workload.steps[0])

    assert steps(5e-3) < 0.8 * steps(None)


def test_fair_rates_approach_max_min_on_a_parking_lot() -> None:
    """Three channels of 10, 10 and 100; one long flow over the first two, short ones on each."""
    dummy = 3
    epath = np.array([[0, 1], [0, dummy], [1, dummy], [2, dummy]], np.int32)
    capacity = np.array([10.0, 10.0, 100.0, ph.BIG * 1e9])
    demand = np.array([100.0, 100.0, 100.0, 30.0])
    rate, _ = ph.fair_rates(epath, demand, capacity, iterations=8)
    assert rate == pytest.approx([5.0, 5.0, 5.0, 30.0], rel=0.02)
    load = ph.channel_sum(epath, rate, 4)
    assert np.all(load[:3] <= capacity[:3] + 1e-9)


def test_over_marking_cuts_dcqcn_senders() -> None:
    cfg = ph.PhysicsConfig()
    share = ph.dcqcn_share(np.array([0.0, cfg.ecn_pmax * cfg.equilibrium_depth, 0.5]), cfg)
    assert share[0] == share[1] == 1.0
    assert share[2] < 0.2


def test_background_flows_run_outside_every_job_at_their_share(fabric512: Topology) -> None:
    from fabricops.simulator.workload import BackgroundSpec

    sim = _job(fabric512, hosts=8, compute_s=1.0, comm_bytes_per_nic=1e11)
    flows = sim.add_background(BackgroundSpec(flows=20, share=0.05))
    fab, fl = sim.fabric, sim.workload.flows
    assert len(flows) == 20
    assert (fl.job[flows] == -1).all(), "background belongs to no job"
    assert np.array_equal(fab.nic_rail[fl.src_nic[flows]], fab.nic_rail[fl.dst_nic[flows]])
    host = fab.port_node[fab.nic_ports]
    assert (host[fl.src_nic[flows]] != host[fl.dst_nic[flows]]).all()
    assert sim.routable[flows].all()
    obs = sim.step()  # the job computes first: only the background asks for bandwidth
    line = fab.port_speed_bps[fab.nic_ports][fl.src_nic[flows]]
    assert np.allclose(obs.demand_bps[flows], 0.05 * line)
    assert obs.demand_bps.sum() == pytest.approx(obs.demand_bps[flows].sum())
