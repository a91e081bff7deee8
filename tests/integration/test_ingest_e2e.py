"""End to end: a running simulated fabric of 80 switches, the three collectors, Kafka.

Every frame and INT report the collectors publish is consumed by a consumer
group; a broker that goes away for 10 s loses none of what was published
meanwhile.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry

from fabricops.collectors.collection import Collection
from fabricops.core.bus import Message, Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.frame import Frame
from fabricops.core.intreport import IntBatch
from fabricops.core.kafkabus import KafkaBus
from fabricops.simulator.agents.int_exporter import IntExporterConfig
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec

from .conftest import TansuBroker, bus_config, free_port, poll_until

pytestmark = pytest.mark.integration
Key = tuple[str, str, int]


class RecordingSink:
    """Publishes through the bus sink and remembers each frame's key and publish time."""

    def __init__(self, inner: BusFrameSink) -> None:
        self.inner = inner
        self.published: list[tuple[Key, float]] = []
        self._lock = threading.Lock()

    def publish_frames(self, frames: Sequence[Frame]) -> None:
        now = time.monotonic()
        with self._lock:
            self.published += [((f.device, f.source.value, f.seq), now) for f in frames]
        self.inner.publish_frames(frames)


def _fabric(speed: float = 2.0) -> SimulatedFabric:
    sim = Simulator(fat_tree(k=8), SimConfig(seed=5))
    sim.add_job(JobSpec(hosts=32, placement="random", compute_s=0.5, comm_bytes_per_nic=5e10))
    assert len(sim.fabric.switch_nodes) >= 64
    config = SimulatedFabricConfig(
        speed=speed, snmp_interval_s=2.0 * 2.0 / speed, gnmi_interval_s=1.0,
        int_exporter=IntExporterConfig(collector_port=free_port(), sample_flows_per_tick=8))
    return SimulatedFabric(sim, config)


def _consume(bus: KafkaBus, prefix: str, want_frames: int, want_reports: int,
             timeout_s: float) -> tuple[list[Key], int]:
    """Read telemetry and INT with a group of two consumers until both counts are reached."""
    topics = [topic_name(Topic.TELEMETRY, prefix), topic_name(Topic.INT, prefix)]
    group = f"e2e-{uuid.uuid4().hex[:6]}"
    consumers = [bus.subscribe(topics, group) for _ in range(2)]

    def split(received: list[list[Message]]) -> tuple[list[Key], int]:
        keys: list[Key] = []
        reports = 0
        for msg in (m for got in received for m in got):
            if msg.topic == topics[0]:
                f = Frame.decode(msg.value)
                keys.append((f.device, f.source.value, f.seq))
            else:
                reports += IntBatch.decode(msg.value).n_reports
        return keys, reports

    def done(received: list[list[Message]]) -> bool:
        keys, reports = split(received)
        return len(set(keys)) >= want_frames and reports >= want_reports

    try:
        received = poll_until(list(consumers), done, timeout_s, commit=True)
    finally:
        for consumer in consumers:
            consumer.close()
    return split(received)


def _start(fabric: SimulatedFabric, bus: KafkaBus, prefix: str) -> tuple[Collection,
                                                                          RecordingSink]:
    fabric.start()
    collection = Collection(fabric.inventory(), bus, prefix=prefix, group=f"{prefix}collectors")
    recorder = RecordingSink(collection.frame_sink.inner)
    collection.frame_sink.inner = recorder  # type: ignore[assignment]
    collection.start()
    return collection, recorder


def _stop(fabric: SimulatedFabric, collection: Collection) -> None:
    collection.stop()
    fabric.stop()


def test_every_published_frame_and_report_is_consumed(
    restartable_kafka_broker: TansuBroker,
) -> None:
    prefix = f"e2e{uuid.uuid4().hex[:6]}."
    bus = KafkaBus(bus_config(restartable_kafka_broker.bootstrap), CollectorRegistry())
    bus.start()
    fabric = _fabric()
    try:
        collection, recorder = _start(fabric, bus, prefix)
        every_target = {"snmp": (80, 80), "gnmi": (80, 80), "int": (1, 1)}
        try:
            time.sleep(8.0)
            live = collection.status()
            # on a loaded machine some of the 80 in-process agents answer late at first
            deadline = time.monotonic() + 60
            while live.targets_up != every_target and time.monotonic() < deadline:
                time.sleep(0.5)
                live = collection.status()
        finally:
            _stop(fabric, collection)
        bus.drain(30)
        published = {k for k, _ in recorder.published}
        status = collection.status()
        keys, reports = _consume(bus, prefix, len(published), status.int_reports, 60.0)
    finally:
        bus.stop()
    assert set(status.frames) == {"snmp", "gnmi"}
    assert live.targets_up == every_target
    assert status.int_reports > 0
    assert {k[0] for k in published} == set(fabric.switches)
    assert len(recorder.published) == len(published), "collectors never publish a key twice"
    assert set(keys) == published, "every published frame was consumed"
    assert len(keys) == len(set(keys)), "a clean run delivers each frame once"
    assert reports == status.int_reports


def test_broker_outage_loses_nothing_published_meanwhile(
    restartable_kafka_broker: TansuBroker,
) -> None:
    broker = restartable_kafka_broker
    prefix = f"out{uuid.uuid4().hex[:6]}."
    fabric = _fabric(speed=1.0)
    # A short delivery timeout hands undelivered records back to the bus's own
    # buffer during the outage: a memory-storage broker forgets its topics when
    # it stops, and acknowledges (then drops) writes to topics it no longer has.
    bus = KafkaBus(bus_config(broker.bootstrap, delivery_timeout_ms=5000,
                              request_timeout_ms=3000), CollectorRegistry())
    bus.start()
    try:
        collection, recorder = _start(fabric, bus, prefix)
        try:
            time.sleep(3.0)
            broker.stop()
            stopped_at = time.monotonic()
            time.sleep(10.0)
            broker.start()
            time.sleep(4.0)
        finally:
            _stop(fabric, collection)
        bus.drain(60)
        meanwhile = {k for k, t in recorder.published if t >= stopped_at}
        keys, _ = _consume(bus, prefix, len(meanwhile), 0, 90.0)
    finally:
        bus.stop()
    assert len(meanwhile) > 80, "the collectors kept publishing during the outage"
    missing = meanwhile - set(keys)
    assert not missing, f"{len(missing)} frames published during/after the outage were lost"
