"""Adaptive sampling end to end, over real SNMP and gNMI: a fault on the simulated
fabric makes the collectors sample its devices fast, and slow again once it clears."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fabricops.collectors.collection import Collection
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.sampling import SamplingConfig
from fabricops.pipeline.service import PipelineService, PipelineServiceConfig
from fabricops.pipeline.worker import PipelineConfig
from fabricops.simulator.agents.int_exporter import IntExporterConfig
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.workload import JobSpec

from .conftest import free_port

pytestmark = pytest.mark.integration
SLOW_S, FAST_S, CALM_S = 4.0, 1.0, 6.0
FAULT_AT_S, FAULT_FOR_S = 8.0, 10.0


def test_collectors_speed_up_on_a_fault_and_slow_down_after(tmp_path: Path) -> None:
    start_ns = time.time_ns() // 10**9 * 10**9 + 10**9
    sim = Simulator(fat_tree(k=4), SimConfig(seed=3, start_time_ns=start_ns))
    sim.add_job(JobSpec(hosts=12, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    sim.add_fault(FaultSpec(type="gray_loss", entity="agg-0-0:eth1~leaf-0-0:eth3",
                            start_s=FAULT_AT_S, duration_s=FAULT_FOR_S,
                            params={"loss_rate": 1e-2}))
    fabric = SimulatedFabric(sim, SimulatedFabricConfig(
        speed=1.0, snmp_interval_s=2.0, gnmi_interval_s=2.0,
        int_exporter=IntExporterConfig(collector_port=free_port())))
    bus = MemoryBus()
    bus.start()
    pipeline = PipelineService(PipelineServiceConfig(
        worker=PipelineConfig(keyframe_interval_s=10, poll_timeout_s=0.2),
        sampling=SamplingConfig(slow_interval_s=SLOW_S, fast_interval_s=FAST_S, calm_s=CALM_S,
                                announce_default=True),
        store={"url": f"sqlite:///{tmp_path / 'f.db'}"}), bus, sim.fabric.topology)
    pipeline.start()
    fabric.start()
    collection = Collection(fabric.inventory(), bus)
    collection.start()
    assert collection.snmp is not None
    seen: list[tuple[float, float]] = []  # (fabric time s, interval of leaf-0-0)
    until_s = FAULT_AT_S + FAULT_FOR_S + CALM_S + 2 * SLOW_S + 4  # of fabric time
    try:
        deadline = time.monotonic() + 3 * until_s  # a loaded machine may run the fabric late
        while sim.time_s < until_s and time.monotonic() < deadline:
            seen.append((sim.time_s, collection.snmp.interval_of("leaf-0-0")))
            time.sleep(0.2)
    finally:
        collection.stop()
        fabric.stop()
        pipeline.stop()
        bus.stop()
    before = [i for t, i in seen if 2 < t < FAULT_AT_S]
    assert before
    assert set(before) == {SLOW_S}, "quiet devices are sampled slowly"
    fast = [t for t, i in seen if i == FAST_S]
    assert fast, seen
    assert fast[0] - FAULT_AT_S <= 2 * SLOW_S, "fast within two intervals of the fault"
    ended = FAULT_AT_S + FAULT_FOR_S
    # from the first fast reading on (sim time has tick resolution: readings taken earlier
    # in the same tick, before the policy arrived, are not "during")
    first = next(k for k, (_, i) in enumerate(seen) if i == FAST_S)
    during = {i for t, i in seen[first:] if t <= ended}
    assert during == {FAST_S}, "fast for as long as the fault lasts"
    after = [i for t, i in seen if t > ended + CALM_S + 2 * SLOW_S]
    assert after
    assert set(after) == {SLOW_S}, "slow again once the fault cleared and calm returned"
