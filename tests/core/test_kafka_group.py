"""A Kafka group member's view of its rebalances: how long it has waited for one to
finish, and a commit a rebalance overtakes (counted, not an outage). The real
broker's side is in tests/integration/test_group_churn.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kafka.errors as kerr
import pytest
from prometheus_client import CollectorRegistry

from fabricops.core.bus import BusError
from fabricops.core.kafkaclient import KafkaBusConfig, KafkaMetrics
from fabricops.core.kafkagroup import JoinWatch, KafkaGroupConsumer


def test_a_member_waits_from_subscription_and_from_each_revocation_to_its_assignment(
) -> None:
    now = [100.0]
    watch = JoinWatch(clock=lambda: now[0])
    now[0] = 104.0
    assert watch.waited_s() == 4.0, "joining since the subscription"
    watch.on_partitions_assigned(set())
    assert watch.waited_s() == 0.0, "settled, even with no partition"
    now[0] = 200.0
    watch.on_partitions_revoked({("t", 0)})
    now[0] = 230.0
    watch.on_partitions_revoked(set())  # a retried join does not restart the wait
    now[0] = 260.0
    assert watch.waited_s() == 60.0
    watch.on_partitions_assigned({("t", 1)})
    assert watch.waited_s() == 0.0


class _Refusing:
    """The few KafkaConsumer calls ``commit`` makes; every commit raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def commit(self, **_: Any) -> None:
        raise self.error

    def assignment(self) -> set[Any]:
        return set()


def _member(error: Exception, clock: Callable[[], float] = lambda: 0.0
            ) -> tuple[KafkaGroupConsumer, KafkaMetrics]:
    metrics = KafkaMetrics(CollectorRegistry())
    member = KafkaGroupConsumer(_Refusing(error), ("t",), "g", metrics,  # type: ignore[arg-type]
                                KafkaBusConfig(), JoinWatch(), clock=clock)
    return member, metrics


@pytest.mark.parametrize("error", [kerr.RebalanceInProgressError(), kerr.CommitFailedError(),
                                   kerr.IllegalGenerationError(),
                                   kerr.UnknownMemberIdError()])
def test_a_commit_overtaken_by_a_rebalance_is_counted_and_not_an_outage(
    error: Exception,
) -> None:
    member, metrics = _member(error)
    member.commit()
    assert metrics.commits_overtaken.labels("g")._value.get() == 1


def test_a_commit_the_broker_cannot_take_is_a_named_bus_error() -> None:
    member, metrics = _member(kerr.KafkaConnectionError("connection reset"))
    with pytest.raises(BusError, match="group 'g' on \\['t'\\]: commit failed"):
        member.commit()
    assert metrics.commits_overtaken.labels("g")._value.get() == 0


def test_commits_refused_for_longer_than_a_rebalance_can_last_are_an_outage() -> None:
    now = [0.0]
    member, metrics = _member(kerr.IllegalGenerationError(), clock=lambda: now[0])
    limit = KafkaBusConfig().longest_rebalance_s
    assert limit == 310.0, "max_poll_interval_ms and a session, by default"
    for now[0] in (0.0, 100.0, limit):
        member.commit()  # within a rebalance's length: counted
    now[0] = limit + 1
    with pytest.raises(BusError, match="every commit for 311 s failed"):
        member.commit()
    assert metrics.commits_overtaken.labels("g")._value.get() == 4


class _Fetching:
    """The few KafkaConsumer calls ``poll`` makes; one poll returns ``records``."""

    def __init__(self, records: dict[Any, list[Any]]) -> None:
        self.records = records

    def poll(self, **_: Any) -> dict[Any, list[Any]]:
        out, self.records = self.records, {}
        return out

    def assignment(self) -> set[Any]:
        return set(self.records)

    def end_offsets(self, partitions: Any) -> dict[Any, int]:
        return dict.fromkeys(partitions, 0)


def test_records_polled_are_counted_per_topic_and_group() -> None:
    from kafka.consumer.fetcher import ConsumerRecord
    from kafka.structs import TopicPartition

    def record(topic: str, partition: int, offset: int) -> ConsumerRecord:
        return ConsumerRecord(topic=topic, partition=partition, leader_epoch=-1, offset=offset,
                              timestamp=0, timestamp_type=0, key=b"k", value=b"v", headers=[],
                              checksum=None, serialized_key_size=1, serialized_value_size=1,
                              serialized_header_size=-1)

    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    fetched = {a0: [record("a", 0, 5), record("a", 0, 6)], a1: [record("a", 1, 0)],
               b0: [record("b", 0, 9)]}
    registry = CollectorRegistry()
    metrics = KafkaMetrics(registry)
    member = KafkaGroupConsumer(_Fetching(fetched), ("a", "b"), "g",  # type: ignore[arg-type]
                                metrics, KafkaBusConfig(), JoinWatch())
    got = member.poll(timeout_s=0.0)
    assert [(m.topic, m.partition, m.offset) for m in got] == [
        ("a", 0, 5), ("a", 0, 6), ("a", 1, 0), ("b", 0, 9)]
    assert registry.get_sample_value("fabricops_kafkabus_consumed_records_total",
                                     {"topic": "a", "group": "g"}) == 3
    assert registry.get_sample_value("fabricops_kafkabus_consumed_records_total",
                                     {"topic": "b", "group": "g"}) == 1
