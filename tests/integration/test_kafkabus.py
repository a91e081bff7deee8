"""KafkaBus against a real Kafka-protocol broker (Tansu, started by the fixtures)."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from fabricops.core.bus import BusError, Message, Topic, topic_name
from fabricops.core.busio import BusFrameSink, frames_from_messages
from fabricops.core.frame import Frame
from fabricops.core.kafkabus import KafkaBus
from tests.integration.conftest import TansuBroker, bus_config, free_port, poll_until

pytestmark = pytest.mark.integration

DEVICES = [f"leaf-{i // 8}-{i % 8}" for i in range(64)]
METRICS = ["in_octets", "out_octets", "temperature_c"]
FrameId = tuple[str, int]


def frame(device: str, seq: int) -> Frame:
    ports = [f"{device}:eth{p}" for p in range(4)]
    entities = [p for p in ports for _ in METRICS]
    values = np.arange(len(entities)) + seq
    return Frame.build(device, time.time_ns(), "sim", seq, entities, METRICS * 4, values)


def ids(frames: list[Frame]) -> list[FrameId]:
    return [(f.device, f.seq) for f in frames]


@pytest.fixture
def prefix() -> str:
    return f"it{uuid.uuid4().hex[:8]}."


@pytest.fixture
def kafka_bus(kafka_broker: str) -> Iterator[KafkaBus]:
    bus = KafkaBus(bus_config(kafka_broker), CollectorRegistry())
    bus.start()
    yield bus
    bus.stop()


def test_group_of_two_shares_64_devices_frames_at_least_once(
    kafka_bus: KafkaBus, prefix: str
) -> None:
    topic = topic_name(Topic.TELEMETRY, prefix)
    group = f"{prefix}pipeline"
    a, b = kafka_bus.subscribe([topic], group), kafka_bus.subscribe([topic], group)
    poll_until([a, b], lambda _: bool(a.assignment() and b.assignment()), 60)
    assert a.assignment()
    assert a.assignment().isdisjoint(b.assignment())

    sink = BusFrameSink(kafka_bus, prefix)
    sent = [frame(d, s) for s in range(5) for d in DEVICES]
    sink.publish_frames(sent)
    kafka_bus.drain(20)
    got = poll_until([a, b], lambda r: sum(map(len, r)) >= len(sent), 30)
    for member, msgs in zip((a, b), got, strict=True):
        assert msgs, "each member of the group gets a share"
        assert {(m.topic, m.partition) for m in msgs} <= member.assignment()
    frames = frames_from_messages(got[0] + got[1])
    assert sorted(ids(frames)) == sorted(ids(sent)), "every frame exactly once"
    for device in DEVICES:
        assert [f.seq for f in frames if f.device == device] == list(range(5))
    a.commit()
    b.commit()

    resent = [frame(d, 5) for d in DEVICES]
    sink.publish_frames(resent)
    kafka_bus.drain(20)
    first_try = poll_until([a, b], lambda r: sum(map(len, r)) >= len(resent), 30)
    assert sorted(ids(frames_from_messages(first_try[0] + first_try[1]))) == sorted(ids(resent))
    # A rolling restart of one member without commit: the group rebalances and
    # what the departed member polled but never committed comes again, to
    # whichever member owns its partitions now; nothing committed comes back.
    # (Not both members at once: when the group's last member leaves, the Tansu
    # test broker keeps the departed leader and the next member never syncs.)
    uncommitted = set(ids(frames_from_messages(first_try[1])))
    assert uncommitted, "the member restarted had polled part of the last batch"
    b.close()
    c = kafka_bus.subscribe([topic], group)
    again = poll_until([a, c], lambda r: uncommitted <= set(
        ids(frames_from_messages(r[0] + r[1]))), 60)
    redelivered = ids(frames_from_messages(again[0] + again[1]))
    assert uncommitted <= set(redelivered) <= set(ids(resent))
    assert len(redelivered) == len(set(redelivered)), "each at most once after the restart"
    assert poll_until([a, c], lambda _: False, 2.0) == [[], []]
    a.close()
    c.close()


def test_broker_outage_of_10_s_loses_nothing_published_meanwhile(
    restartable_kafka_broker: TansuBroker, prefix: str
) -> None:
    broker = restartable_kafka_broker
    registry = CollectorRegistry()
    bus = KafkaBus(bus_config(broker.bootstrap, delivery_timeout_ms=5000,
                                   request_timeout_ms=3000), registry)
    bus.start()
    sink = BusFrameSink(bus, prefix)
    published: list[FrameId] = []
    slowest_s = 0.0
    first_after_stop: int | None = None
    seq, started = 0, time.monotonic()
    try:
        while time.monotonic() - started < 14.0:
            elapsed = time.monotonic() - started
            if elapsed > 1.0 and first_after_stop is None:
                broker.stop()
                first_after_stop = seq
            if elapsed > 11.0 and not broker.running:
                broker.start()
            batch = [frame(d, seq) for d in DEVICES[:8]]
            t = time.monotonic()
            sink.publish_frames(batch)
            slowest_s = max(slowest_s, time.monotonic() - t)
            published += ids(batch)
            seq += 1
            time.sleep(0.05)
        bus.drain(40)
    finally:
        bus.stop()
    # a publish that waited for the broker would take its 3 s request timeout
    assert slowest_s < 1.0, f"publish blocked {slowest_s:.3f} s during the outage"
    assert first_after_stop is not None

    reader = KafkaBus(bus_config(broker.bootstrap), CollectorRegistry())
    member = reader.subscribe([topic_name(Topic.TELEMETRY, prefix)], "audit")
    must_have = {i for i in published if i[1] >= first_after_stop}
    seen: Counter[FrameId] = Counter()
    deadline = time.monotonic() + 30
    while not must_have <= seen.keys() and time.monotonic() < deadline:
        seen.update(ids(frames_from_messages(member.poll(timeout_s=0.5))))
    member.close()
    assert must_have - seen.keys() == set(), "frames published during/after the outage lost"
    acked = registry.get_sample_value(
        "fabricops_kafkabus_acked_records_total", {"topic": topic_name(Topic.TELEMETRY, prefix)})
    assert acked == len(published)


def unused_port() -> int:
    port = free_port()
    with socket.socket() as probe:  # nothing listens there: connections are refused
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    return port


def test_unreachable_brokers_are_named_and_publish_stays_fast() -> None:
    bootstrap = f"127.0.0.1:{unused_port()}"
    registry = CollectorRegistry()
    bus = KafkaBus(bus_config(bootstrap, buffer_records=10, connect_timeout_ms=500,
                               stop_timeout_s=1.0), registry)
    bus.start()
    try:
        t = time.monotonic()
        for i in range(100):
            bus.publish("fabricops.x.v1", b"k", [str(i).encode()])
        assert time.monotonic() - t < 0.4  # under one 0.5 s connect timeout; ~1 ms unloaded
        assert bus.buffered_records() <= 10
        dropped = registry.get_sample_value("fabricops_kafkabus_dropped_records_total",
                                            {"topic": "fabricops.x.v1", "reason": "buffer_full"})
        assert dropped == 90
        assert bus.flush(1.5) is False
        with pytest.raises(BusError, match=bootstrap):
            bus.drain(0.5)
        assert bus.last_error is not None
        assert bootstrap in bus.last_error
        with pytest.raises(BusError, match=f"{bootstrap}.*group 'g'"):
            bus.subscribe(["fabricops.x.v1"], "g")
    finally:
        bus.stop()


def test_block_policy_raises_a_named_error_when_the_buffer_stays_full() -> None:
    bootstrap = f"127.0.0.1:{unused_port()}"
    bus = KafkaBus(bus_config(bootstrap, buffer_records=5, buffer_full_policy="block",
                               block_timeout_ms=50, connect_timeout_ms=500, stop_timeout_s=0.5))
    bus.start()
    try:
        bus.publish("t.v1", b"k", [b"x"] * 5)
        t = time.monotonic()
        with pytest.raises(BusError, match=r"buffer full.*'t.v1'"):
            bus.publish("t.v1", b"k", [b"y"])
        assert 0.04 < time.monotonic() - t < 1.0
    finally:
        bus.stop()


def test_concurrent_publishers_all_acked(kafka_bus: KafkaBus, prefix: str) -> None:
    topic = f"{prefix}concurrent.v1"

    def publish_many(n: int) -> None:
        for i in range(200):
            kafka_bus.publish(topic, f"k{n}".encode(), [f"{n}:{i}".encode()])

    threads = [threading.Thread(target=publish_many, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kafka_bus.drain(20)
    assert kafka_bus.buffered_records() == 0
    acked = kafka_bus.registry.get_sample_value(
        "fabricops_kafkabus_acked_records_total", {"topic": topic})
    assert acked == 800


def test_a_held_commit_stops_at_the_hold_on_the_broker(
    kafka_bus: KafkaBus, kafka_broker: str, prefix: str
) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = topic_name(Topic.TELEMETRY, prefix)
    group = f"{prefix}held"
    member = kafka_bus.subscribe([topic], group)
    poll_until([member], lambda _: bool(member.assignment()), 60)
    BusFrameSink(kafka_bus, prefix).publish_frames([frame("leaf-0-0", s) for s in range(6)])
    kafka_bus.drain(20)
    [got] = poll_until([member], lambda r: len(r[0]) >= 6, 30)
    part = (got[0].topic, got[0].partition)  # one device: one partition
    probe = KafkaConsumer(bootstrap_servers=kafka_broker, group_id=group,
                          enable_auto_commit=False)
    try:
        member.commit({part: got[3].offset})  # frames 3, 4, 5 are still held
        assert probe.committed(TopicPartition(*part)) == got[3].offset
        member.commit({})  # nothing held: everything polled
        assert probe.committed(TopicPartition(*part)) == got[5].offset + 1
    finally:
        probe.close()
        member.close()


def test_a_member_knows_which_partitions_it_has_read_to_their_end(
    kafka_bus: KafkaBus, prefix: str
) -> None:
    """From the high watermark the broker's fetch answers carry: a partition with
    records still to read is not read to its end."""
    topic = topic_name(Topic.TELEMETRY, prefix)
    member = kafka_bus.subscribe([topic], f"{prefix}ends")
    poll_until([member], lambda _: bool(member.assignment()), 60)
    BusFrameSink(kafka_bus, prefix).publish_frames([frame("leaf-0-0", s) for s in range(6)])
    kafka_bus.drain(20)
    got: list[Message] = []
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = member.poll(0.5, max_records=2)
    part = (got[0].topic, got[0].partition)  # one device: one partition
    assert len(got) < 6
    assert part not in member.caught_up(), "records of it are still to be read"
    while len(got) < 6 and time.monotonic() < deadline:
        got += member.poll(0.5, max_records=2)
    assert len(got) == 6
    assert part in member.caught_up()
    assert member.caught_up() <= member.assignment()
    member.close()
