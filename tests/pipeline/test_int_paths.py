"""INT reports from the simulated fabric become named INT paths in the store, once."""

from __future__ import annotations

from fabricops.core.bus import DEFAULT_PREFIX, Message, Topic, topic_name
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.int_paths import IntPathBook
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.simulator.agents.int_exporter import IntExporter, IntExporterConfig, ListSender
from fabricops.store.records import path_switches
from fabricops.store.store import Store

from .conftest import small_sim


def test_int_reports_become_paths_through_named_switches_and_ports(store: Store) -> None:
    sim = small_sim()
    sim.step()
    exporter = IntExporter(IntExporterConfig(sample_flows_per_tick=16), sim, ListSender())
    batch = exporter.build_batch(sim)
    assert batch.n_reports > 0
    topic = topic_name(Topic.INT, DEFAULT_PREFIX)
    msgs = [Message(topic, 0, 0, b"s", batch.encode(), 0),
            Message(topic, 0, 1, b"s", b"not an INT batch", 0)]
    worker = PipelineWorker(PipelineConfig(max_future_s=1e9), MemoryBus(), store,
                            int_paths=IntPathBook(sim.fabric.topology))
    result = worker.process(msgs)
    assert result.rejected == {"undecodable_int": 1}
    paths = store.int_paths(t0_ns=0, t1_ns=2**62)
    assert sum(p.n_reports for p in paths) == batch.n_reports
    switches = {n.id for n in sim.fabric.topology.switches()}
    for p in paths:
        hops = path_switches(p.path)
        assert hops
        assert set(hops) <= switches, p.path
        assert all(":eth" in hop for hop in p.path.split(">")), p.path
    worker.process(msgs[:1])  # a re-delivery
    assert store.int_paths(t0_ns=0, t1_ns=2**62) == paths
