"""Skipping the flows that offer nothing changes nothing the twin reports."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.simulator import tick
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.observe import TickObservation
from fabricops.simulator.workload import JobSpec

from .conftest import busiest_fabric_link

Ticks = list[tuple[TickObservation, list[bytes]]]


def _run(monkeypatch: pytest.MonkeyPatch, share: float) -> Ticks:
    monkeypatch.setattr(tick._Active, "SHARE", share)
    topo = leaf_spine(gpus=256)
    sim = Simulator(topo, SimConfig(seed=3))
    sim.add_job(JobSpec(hosts=24, placement="random", qps_per_pair=4, compute_s=1.0,
                        comm_bytes_per_nic=50e9))
    out = []
    for t in range(12):
        if t == 5:  # flows move: some paths change while their flows are idle
            link = topo.links[busiest_fabric_link(sim)].id
            sim.add_fault(FaultSpec(type="link_down", entity=link, start_s=sim.time_s))
        obs = sim.step()
        out.append((obs, [f.encode() for f in sim.frames()]))
    return out


def test_a_tick_on_the_active_flows_alone_equals_one_on_every_flow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    every = _run(monkeypatch, -1.0)  # never skip
    active = _run(monkeypatch, 0.75)
    idle_ticks = sum(float((o.offered_bps > 0).mean()) < 0.75 for o, _ in every)
    assert idle_ticks >= 3, "the job must leave flows idle for the comparison to mean much"
    for (a, fa), (b, fb) in zip(every, active, strict=True):
        for name in ("rate_bps", "goodput_bps", "served_bps", "queue_bytes", "pause_share"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert fa == fb
