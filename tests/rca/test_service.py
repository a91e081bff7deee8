"""RcaService on the bus: telemetry in, a diagnosis out on diagnoses.v2 and in the store."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from fabricops.core.bus import Topic, record_headers, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.membus import MemoryBus
from fabricops.core.records import Diagnosis
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.rca.service import RcaService, RcaServiceConfig
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec, FaultType
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig

LINK = "agg-0-0:eth1~leaf-0-0:eth3"


def test_a_link_going_down_is_published_and_stored_once_per_revision(tmp_path: Path) -> None:
    topo = fat_tree(k=4)
    sim = Simulator(topo, SimConfig(seed=3))
    sim.add_job(JobSpec(hosts=16, placement="random", compute_s=0.3, comm_bytes_per_nic=30e9))
    sim.add_fault(FaultSpec(type=FaultType.LINK_DOWN, entity=LINK, start_s=15.0))
    bus = MemoryBus()
    bus.start()
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'f.db'}"))
    store.start()
    service = RcaService(RcaServiceConfig(), bus, topo, RcaModel.load(DEFAULT_MODEL), store)
    sink = BusFrameSink(bus)
    consumer = bus.subscribe([topic_name(Topic.TELEMETRY), topic_name(Topic.INT)], "rca")
    watcher = bus.subscribe([topic_name(Topic.DIAGNOSES)], "test")
    for _ in range(22):
        sim.step()
        sink.publish_frames(sim.frames())
        service.process(consumer.poll(0.0, 10_000))
    records = watcher.poll(0.0, 100)
    published = [Diagnosis.decode(m.value) for m in records]
    assert published, "no diagnosis published"
    assert [m.key for m in records] == [d.root.encode() for d in published], "keyed by root"
    assert {m.headers for m in records} == {record_headers(Topic.DIAGNOSES, "rca")}
    assert all(d.ts_ns > sim.config.start_time_ns + 15e9 for d in published)
    last = published[-1]
    assert (last.root, last.fault_type) == (LINK, "link_down")
    stored = store.diagnoses(t0_ns=0, t1_ns=2**62)
    assert [d.id for d in stored] == [d.id for d in published]
    assert len({d.id for d in published}) == 1, "one incident, revised in place"
    store.stop()
    bus.stop()


def test_a_diagnosis_that_firms_up_is_revised_at_once() -> None:
    """A first guess below remediation's confidence floor that firms up is published
    again when it does, not only at the next republication."""
    bus = MemoryBus()
    bus.start()
    service = RcaService(RcaServiceConfig(republish_s=30.0), bus, fat_tree(k=4), None)
    script = [0.61, 0.97, 0.99, 0.85, 0.97, 0.9]  # one step a second
    published = []
    for i, confidence in enumerate(script):
        ts = (100 + i) * 10**9
        d = Diagnosis(id="inc-1", ts_ns=ts, onset_ns=100 * 10**9, root=LINK, root_kind="link",
                      fault_type="gray_loss", confidence=confidence)
        service.engine.view.newest_ns = ts
        service.engine.step = lambda now, d=d: SimpleNamespace(diagnoses=(d,))  # type: ignore[method-assign]
        published += [p.confidence for p in service.process([])]
    assert published == [0.61, 0.97], "risen by 0.36: revised; by 0.02 or after a dip: not"
    late = Diagnosis(id="inc-1", ts_ns=131 * 10**9, onset_ns=100 * 10**9, root=LINK,
                     root_kind="link", fault_type="gray_loss", confidence=0.9)
    service.engine.view.newest_ns = late.ts_ns
    service.engine.step = lambda now: SimpleNamespace(diagnoses=(late,))  # type: ignore[method-assign]
    assert [p.confidence for p in service.process([])] == [0.9], "republished after 30 s"
    bus.stop()
