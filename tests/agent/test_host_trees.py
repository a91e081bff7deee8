"""The simulator's host trees, read by the agent, give the simulator's own NIC values."""

from __future__ import annotations

from pathlib import Path

from fabricops.agent.config import AgentConfig
from fabricops.agent.service import HostAgent
from fabricops.core.frame import Frame
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec, FaultType
from fabricops.simulator.host_trees import HostTreeWriter
from fabricops.simulator.workload import JobSpec
from tests.agent.conftest import ListSink

SHARED = ("in_octets", "out_octets", "in_pkts", "out_pkts", "in_errors", "in_fcs_errors",
          "in_discards", "out_discards", "carrier_transitions", "pfc_rx_pause{prio=3}",
          "pfc_tx_pause{prio=3}", "cnp_sent", "cnp_handled", "rdma_retransmits",
          "out_of_sequence", "oper_status")


def values(frame: Frame) -> dict[tuple[str, str], int | float]:
    return {(s["entity"], s["metric"]): s["value"] for s in frame.to_json_dict()["samples"]}


def test_agent_frames_match_the_simulators_own(tmp_path: Path) -> None:
    topo = fat_tree(k=4)
    sim = Simulator(topo, SimConfig(seed=3))
    sim.add_job(JobSpec(hosts=16, placement="random", compute_s=0.3, comm_bytes_per_nic=30e9))
    sim.add_fault(FaultSpec(type=FaultType.PFC_STORM, entity="host-003:nic0", start_s=2.0))
    writer = HostTreeWriter(sim, tmp_path)
    hosts = [n.id for n in topo.hosts()]
    sink = ListSink()
    agents = {h: HostAgent(AgentConfig(root=tmp_path / h, host=h), sink, topology=topo)
              for h in hosts}
    compared = 0
    for tick in range(6):
        sim.step()
        writer.write()
        own = {f.device: values(f) for f in sim.frames() if f.device in agents}
        for host, agent in agents.items():
            if tick == 0:
                agent.discover()
            frame = agent.collect(ts_ns=sim.ts_ns)
            assert frame is not None
            got = values(frame)
            for (entity, metric), value in own[host].items():
                if metric in SHARED:
                    assert got[(entity, metric)] == value, (entity, metric)
                    compared += 1
    assert compared == 6 * len(hosts) * len(SHARED)
    storm = values(next(f for f in reversed(sink.frames) if f.device == "host-003"))
    assert storm[("host-003:nic0", "pfc_tx_pause{prio=3}")] > 0
