"""MemoryBus keeps Kafka's semantics: keyed order, groups, at-least-once, bounded retention."""

from __future__ import annotations

import threading
import time
from collections import Counter

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from fabricops.core.bus import Bus, BusError, Consumer, Message, Topic, topic_name
from fabricops.core.bus_factory import BusConfig, make_bus
from fabricops.core.busio import BusFrameSink, frames_from_messages
from fabricops.core.frame import Frame, FrameDecodeError
from fabricops.core.kafkabus import KafkaBus
from fabricops.core.membus import MemoryBus, MemoryBusConfig, partition_for_key
from fabricops.core.settings import BusSettings

TOPIC = "fabricops.test.v1"


def make(registry: CollectorRegistry | None = None, **config: object) -> MemoryBus:
    bus = MemoryBus(MemoryBusConfig.model_validate(config), registry)
    bus.start()
    return bus


def drain(consumer: Consumer, timeout_s: float = 0.05) -> list[Message]:
    """Everything the consumer gets until a poll comes back empty."""
    out: list[Message] = []
    while batch := consumer.poll(timeout_s=timeout_s):
        out.extend(batch)
    return out


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_values_of_one_key_keep_their_order_on_one_partition() -> None:
    bus = make(partitions=4)
    for i in range(50):
        for dev in ("leaf-0-0", "leaf-0-1", "spine-0"):
            bus.publish(TOPIC, dev.encode(), [f"{dev}/{i}".encode()])
    got = drain(bus.subscribe([TOPIC], "g"))
    assert len(got) == 150
    for dev in ("leaf-0-0", "leaf-0-1", "spine-0"):
        mine = [m for m in got if m.key == dev.encode()]
        assert [m.value for m in mine] == [f"{dev}/{i}".encode() for i in range(50)]
        assert {m.partition for m in mine} == {partition_for_key(dev.encode(), 4)}
        assert [m.offset for m in mine] == sorted(m.offset for m in mine)


def test_partition_of_a_key_is_stable() -> None:
    assert partition_for_key(b"leaf-0-3", 8) == partition_for_key(b"leaf-0-3", 8)
    assert len({partition_for_key(f"dev-{i}".encode(), 8) for i in range(100)}) == 8


def test_a_member_knows_which_partitions_it_has_read_to_their_end() -> None:
    bus = make(partitions=2)
    keys = {partition_for_key(f"dev-{i}".encode(), 2): f"dev-{i}".encode() for i in range(20)}
    bus.publish(TOPIC, keys[0], [b"a", b"b", b"c"])
    bus.publish(TOPIC, keys[1], [b"d"])
    member = bus.subscribe([TOPIC], "g")
    assert member.caught_up() == set(), "nothing read yet"
    got = member.poll(0.0, max_records=2)
    read = Counter(m.partition for m in got)
    assert member.caught_up() == {(TOPIC, p) for p, n in ((0, 3), (1, 1)) if read[p] == n}
    drain(member)
    assert member.caught_up() == {(TOPIC, 0), (TOPIC, 1)}
    bus.publish(TOPIC, keys[1], [b"e"])
    assert member.caught_up() == {(TOPIC, 0)}, "a record published since is still to read"
    bus.stop()


def test_members_of_a_group_share_the_partitions() -> None:
    bus = make(partitions=6)
    a = bus.subscribe([TOPIC], "workers")
    b = bus.subscribe([TOPIC], "workers")
    assert a.assignment().isdisjoint(b.assignment())
    assert len(a.assignment()) == len(b.assignment()) == 3
    for i in range(200):
        bus.publish(TOPIC, f"dev-{i % 40}".encode(), [str(i).encode()])
    got_a, got_b = drain(a), drain(b)
    assert len(got_a) + len(got_b) == 200
    assert {m.value for m in got_a}.isdisjoint({m.value for m in got_b})
    assert got_a
    assert got_b


def test_each_group_gets_everything() -> None:
    bus = make(partitions=3)
    pipeline, archive = bus.subscribe([TOPIC], "pipeline"), bus.subscribe([TOPIC], "archive")
    bus.publish(TOPIC, b"k1", [b"a", b"b"])
    bus.publish(TOPIC, b"k2", [b"c"])
    assert sorted(m.value for m in drain(pipeline)) == [b"a", b"b", b"c"]
    assert sorted(m.value for m in drain(archive)) == [b"a", b"b", b"c"]


def test_close_without_commit_redelivers_to_the_next_member() -> None:
    bus = make(partitions=2)
    bus.publish(TOPIC, b"k", [b"1", b"2"])
    first = bus.subscribe([TOPIC], "g")
    assert [m.value for m in drain(first)] == [b"1", b"2"]
    first.commit()
    bus.publish(TOPIC, b"k", [b"3", b"4"])
    assert [m.value for m in drain(first)] == [b"3", b"4"]
    first.close()  # crash before commit
    second = bus.subscribe([TOPIC], "g")
    assert [m.value for m in drain(second)] == [b"3", b"4"]
    second.commit()
    second.close()
    assert drain(bus.subscribe([TOPIC], "g")) == []


def test_a_held_commit_stops_at_the_hold_and_the_rest_comes_again() -> None:
    bus = make(partitions=1)
    bus.publish(TOPIC, b"k", [b"0", b"1", b"2", b"3"])
    first = bus.subscribe([TOPIC], "g")
    assert [m.value for m in drain(first)] == [b"0", b"1", b"2", b"3"]
    first.commit({(TOPIC, 0): 2})  # offsets 2 and 3 are still needed
    assert bus.committed("g", TOPIC) == {0: 2}
    assert bus.read_positions("g", TOPIC) == {0: 4}, "read further than committed"
    first.commit({(TOPIC, 0): 9})  # a hold past the position commits the position
    assert bus.committed("g", TOPIC) == {0: 4}
    first.commit({(TOPIC, 0): 1})
    first.close()
    second = bus.subscribe([TOPIC], "g")
    assert [m.value for m in drain(second)] == [b"1", b"2", b"3"]


def test_rebalance_moves_uncommitted_records_to_the_new_owner() -> None:
    bus = make(partitions=2)
    keys = [k for k in (f"d{i}".encode() for i in range(20)) if partition_for_key(k, 2) == 1]
    a = bus.subscribe([TOPIC], "g")
    bus.publish(TOPIC, keys[0], [b"x", b"y"])
    assert [m.value for m in drain(a)] == [b"x", b"y"]  # polled, not committed
    b = bus.subscribe([TOPIC], "g")  # takes partition 1
    assert (TOPIC, 1) in b.assignment()
    assert [m.value for m in drain(b)] == [b"x", b"y"]
    a.commit()  # a no longer owns partition 1: its position there is not committed
    assert bus.committed("g", TOPIC).get(1) is None


def test_silent_member_is_removed_and_its_partitions_redelivered() -> None:
    bus = make(partitions=2, member_timeout_s=0.2)
    bus.publish(TOPIC, b"k", [b"v"])
    crashed = bus.subscribe([TOPIC], "g")
    assert len(drain(crashed)) == 1
    time.sleep(0.3)
    survivor = bus.subscribe([TOPIC], "g")
    assert [m.value for m in drain(survivor)] == [b"v"]
    assert len(survivor.assignment()) == 2


def test_poll_waits_for_a_record_published_meanwhile() -> None:
    bus = make()
    consumer = bus.subscribe([TOPIC], "g")
    timer = threading.Timer(0.1, bus.publish, args=(TOPIC, b"k", [b"late"]))
    timer.start()
    started = time.monotonic()
    got = consumer.poll(timeout_s=5.0)
    assert [m.value for m in got] == [b"late"]
    assert time.monotonic() - started < 2.0
    assert consumer.poll(timeout_s=0.05) == []


def test_oldest_records_past_retention_are_dropped_and_counted() -> None:
    registry = CollectorRegistry()
    bus = make(registry, partitions=2, retention_records=10)
    consumer = bus.subscribe([TOPIC], "late")
    for i in range(25):
        bus.publish(TOPIC, f"k{i % 3}".encode(), [str(i).encode()])
    got = sorted(int(m.value) for m in drain(consumer))
    assert got == list(range(15, 25))
    assert sample(registry, "fabricops_membus_dropped_records_total", topic=TOPIC) == 15
    assert sample(registry, "fabricops_membus_retained_records") == 10
    assert sample(registry, "fabricops_membus_published_records_total", topic=TOPIC) == 25


def test_retention_by_bytes() -> None:
    registry = CollectorRegistry()
    bus = make(registry, retention_bytes=1000)
    for _ in range(10):
        bus.publish(TOPIC, b"k", [bytes(199)])  # 200 bytes with the key
    assert sample(registry, "fabricops_membus_retained_bytes") == 1000
    assert sample(registry, "fabricops_membus_dropped_records_total", topic=TOPIC) == 5


def test_unstarted_or_closed_use_is_an_error_naming_the_topic() -> None:
    bus = MemoryBus()
    with pytest.raises(BusError, match="not started"):
        bus.publish(TOPIC, b"k", [b"v"])
    bus.start()
    consumer = bus.subscribe([TOPIC], "g")
    consumer.close()
    with pytest.raises(BusError, match=TOPIC):
        consumer.poll(timeout_s=0)


def test_concurrent_publishers_and_consumers_lose_nothing() -> None:
    bus = make(partitions=4)
    members = [bus.subscribe([TOPIC], "g") for _ in range(3)]
    seen: Counter[bytes] = Counter()
    lock, done = threading.Lock(), threading.Event()

    def consume(member: Consumer) -> None:
        while not done.is_set():
            batch = member.poll(timeout_s=0.05)
            with lock:
                seen.update(m.value for m in batch)
            member.commit()

    def produce(n: int) -> None:
        for i in range(500):
            bus.publish(TOPIC, f"p{n}-{i % 7}".encode(), [f"{n}:{i}".encode()])

    threads = [threading.Thread(target=consume, args=(m,)) for m in members]
    threads += [threading.Thread(target=produce, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads[3:]:
        t.join()
    deadline = time.monotonic() + 5
    while sum(seen.values()) < 2000 and time.monotonic() < deadline:
        time.sleep(0.02)
    done.set()
    for t in threads[:3]:
        t.join()
    assert len(seen) == 2000
    assert set(seen.values()) == {1}


def _frame(device: str, seq: int) -> Frame:
    ports = [f"{device}:eth{p}" for p in range(4)]
    return Frame.build(device, 1_700_000_000_000_000_000 + seq, "sim", seq,
                       ports * 2, ["in_octets"] * 4 + ["temperature_c"] * 4,
                       np.arange(8) + seq)


def test_frames_travel_through_the_bus_keyed_by_device() -> None:
    bus = make(partitions=4)
    consumer = bus.subscribe([topic_name(Topic.TELEMETRY, "x.")], "pipeline")
    sink = BusFrameSink(bus, "x.")
    sent = [_frame(f"leaf-{d}", s) for s in range(3) for d in range(5)]
    sink.publish_frames(sent)
    msgs = drain(consumer)
    assert {m.key for m in msgs} == {f"leaf-{d}".encode() for d in range(5)}
    got = frames_from_messages(msgs)
    assert sorted(got, key=lambda f: (f.device, f.seq)) == sorted(
        sent, key=lambda f: (f.device, f.seq))
    for d in range(5):
        assert [f.seq for f in got if f.device == f"leaf-{d}"] == [0, 1, 2]


def test_undecodable_message_is_named_or_set_aside() -> None:
    good = Message("t", 0, 0, b"k", _frame("leaf-0", 1).encode(), 0)
    bad = Message("t", 2, 7, b"k", b"not a frame", 0)
    with pytest.raises(FrameDecodeError, match=r"t\[2\]@7"):
        frames_from_messages([good, bad])
    rejects: list[tuple[Message, str]] = []
    assert len(frames_from_messages([good, bad, good], rejects=rejects)) == 2
    assert [m.offset for m, _ in rejects] == [7]


def test_factory_builds_each_kind_from_its_registry_entry() -> None:
    memory: Bus = make_bus(BusConfig())
    assert isinstance(memory, MemoryBus)
    kafka = make_bus(BusConfig(kind="kafka", bootstrap_servers="10.0.0.1:9092"))
    assert isinstance(kafka, KafkaBus)
    assert kafka.config.bootstrap_servers == "10.0.0.1:9092"
    from_settings = BusConfig.from_settings(BusSettings(kind="kafka", topic_prefix="p."))
    assert (from_settings.kind, from_settings.topic_prefix) == ("kafka", "p.")


def test_records_published_are_counted_per_topic() -> None:
    registry = CollectorRegistry()
    bus = make(registry)
    for key in (b"leaf-0", b"leaf-1", b"leaf-0"):
        bus.publish(TOPIC, key, [b"a", b"b"])
    bus.publish("fabricops.other.v1", b"leaf-0", [b"c"])
    assert sample(registry, "fabricops_membus_published_records_total", topic=TOPIC) == 6
    assert sample(registry, "fabricops_membus_published_records_total",
                  topic="fabricops.other.v1") == 1
