"""Simulator -> per-host NIC trees -> host agents -> bus -> RCA, with no other NIC feed.

The simulator writes a sysfs-shaped tree per host each tick; one HostAgent per
host reads its tree and publishes its frames; the switches' frames and INT
reports come from the simulator as before, and the simulator's own host frames
are dropped. The RCA must still name the root of a NIC fault.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabricops.agent.config import AgentConfig
from fabricops.agent.service import HostAgent
from fabricops.core.bus import Topic, topic_name
from fabricops.core.busio import BusFrameSink, BusIntSink, frames_from_messages
from fabricops.core.frame import Source
from fabricops.core.intreport import IntBatch
from fabricops.core.membus import MemoryBus
from fabricops.core.records import Diagnosis
from fabricops.evaluation.scenarios import TOPOLOGIES, topology_of
from fabricops.rca.engine import RcaEngine
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.simulator.agents.int_exporter import IntExporter, IntExporterConfig, ListSender
from fabricops.simulator.host_trees import HostTreeWriter
from fabricops.simulator.scenario import build_simulator, scenario_from_dict

LEAF_SPINE = 0  # 16 hosts of 8 NICs
ONSET = 22.0


def run(tmp_path: Path, fault: dict[str, Any], *, ticks: int = 36) -> list[Diagnosis]:
    topo = topology_of(LEAF_SPINE)
    hosts = [n.id for n in topo.hosts()]
    doc = {"name": "agent-feed", "seed": 7, "duration_s": ticks, "tick_s": 1.0,
           "topology": {"builder": TOPOLOGIES[LEAF_SPINE][0],
                        "params": TOPOLOGIES[LEAF_SPINE][1]},
           "jobs": [{"name": "job-llm-01", "hosts": len(hosts), "placement": "random",
                     "compute_s": 0.5, "comm_bytes_per_nic": 40e9}],
           "faults": [{**fault, "start_s": ONSET}]}
    sim = build_simulator(scenario_from_dict(doc, "agent-feed"), topo)
    exporter = IntExporter(IntExporterConfig(seed=7, sample_flows_per_tick=64), sim,
                           ListSender())
    writer = HostTreeWriter(sim, tmp_path)
    bus = MemoryBus()
    bus.start()
    frames_out, int_out = BusFrameSink(bus), BusIntSink(bus)
    consumer = bus.subscribe([topic_name(Topic.TELEMETRY), topic_name(Topic.INT)], "rca")
    engine = RcaEngine(topo, RcaModel.load(DEFAULT_MODEL), None, sim.placement())
    agents = [HostAgent(AgentConfig(root=tmp_path / h, host=h), frames_out, topology=topo)
              for h in hosts]
    int_topic = topic_name(Topic.INT)
    diagnoses = []
    host_sources = set()
    for tick in range(ticks):
        sim.step()
        writer.write()
        if tick == 0:
            for agent in agents:
                agent.discover()
        frames_out.publish_frames([f for f in sim.frames() if f.device not in hosts])
        for agent in agents:
            assert agent.collect(ts_ns=sim.ts_ns) is not None
        int_out.publish_int(exporter.build_batch(sim))
        while msgs := consumer.poll(0.0, 100_000):
            frames = frames_from_messages(m for m in msgs if m.topic != int_topic)
            host_sources |= {f.source for f in frames if f.device in hosts}
            engine.ingest_frames(frames)
            for m in msgs:
                if m.topic == int_topic:
                    engine.ingest_int(IntBatch.decode(m.value))
        step = engine.step()
        if step.diagnosis is not None:
            diagnoses.append(step.diagnosis)
    bus.stop()
    assert host_sources == {Source.HOST}, "host frames came from elsewhere than the agents"
    assert all(a.plans and {p.nic.named_by for p in a.plans} == {"lldp"} for a in agents)
    return diagnoses


@pytest.fixture(scope="module", autouse=True)
def _model() -> None:
    if not DEFAULT_MODEL.exists():
        pytest.fail(f"the packaged RCA model {DEFAULT_MODEL} is missing; run fabricops rca train")


@pytest.mark.slow
def test_a_pfc_storm_is_localized_from_agent_data_alone(tmp_path: Path) -> None:
    nic = "host-010:nic3"
    diagnoses = run(tmp_path, {"type": "pfc_storm", "entity": nic})
    assert diagnoses, "no diagnosis at all"
    assert all(d.ts_ns > 1_767_225_600_000_000_000 + ONSET * 1e9 for d in diagnoses)
    assert (diagnoses[-1].root, diagnoses[-1].fault_type) == (nic, "pfc_storm")


@pytest.mark.slow
def test_a_slow_receiver_is_localized_from_agent_data_alone(tmp_path: Path) -> None:
    nic = "host-009:nic4"
    diagnoses = run(tmp_path, {"type": "slow_receiver", "entity": nic,
                               "params": {"drain_share": 0.2}})
    assert diagnoses, "no diagnosis at all"
    assert (diagnoses[-1].root, diagnoses[-1].fault_type) == (nic, "slow_receiver")
