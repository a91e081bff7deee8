"""A kafka-python member of a consumer group (the ``Consumer`` protocol of the bus).

A ``KafkaGroupConsumer`` is one KafkaConsumer in a group with auto-commit off:
``commit`` commits the offsets after everything ``poll`` returned, so what was
polled and not committed is delivered again after a restart or a rebalance;
a commit that a rebalance overtakes is counted, not raised (the next poll
rejoins). ``joining_s`` tells how long the member has waited for a rebalance
to finish. Every other failure is a BusError naming the brokers, the group,
the topics and the cause.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Mapping, Sequence

import kafka.errors as kerr
from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.structs import OffsetAndMetadata

from fabricops.core.bus import BusError, Message
from fabricops.core.kafkaclient import KafkaBusConfig, KafkaMetrics

log = logging.getLogger(__name__)

#: A commit refused because the group moves partitions: not an outage.
MOVED = (kerr.RebalanceInProgressError, kerr.CommitFailedError,
         kerr.IllegalGenerationError, kerr.UnknownMemberIdError)

def open_group_consumer(config: KafkaBusConfig, topics: Sequence[str], group: str,
                        metrics: KafkaMetrics) -> KafkaGroupConsumer:
    """Connect a member of ``group`` for ``topics``; BusError names brokers and cause."""
    try:
        consumer = KafkaConsumer(
            bootstrap_servers=config.bootstrap_servers.split(","),
            client_id=config.client_id, group_id=group, enable_auto_commit=False,
            auto_offset_reset=config.auto_offset_reset,
            session_timeout_ms=config.session_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            max_poll_interval_ms=config.max_poll_interval_ms,
            request_timeout_ms=max(config.request_timeout_ms, 1000),
            bootstrap_timeout_ms=config.connect_timeout_ms,
            max_partition_fetch_bytes=config.max_request_size_bytes,
            retry_backoff_ms=config.retry_backoff_ms, reconnect_backoff_ms=50,
            reconnect_backoff_max_ms=config.reconnect_backoff_max_ms,
            # eager: every rebalance revokes, then assigns (JoinWatch relies on it)
            partition_assignment_strategy=(RangePartitionAssignor,
                                           RoundRobinPartitionAssignor))
        joins = JoinWatch()
        consumer.subscribe(list(topics), listener=joins)
    except (kerr.KafkaError, OSError, ValueError) as exc:
        raise BusError(f"Kafka at {config.bootstrap_servers}: group {group!r} cannot "
                       f"subscribe to {list(topics)}: {exc!r}") from exc
    return KafkaGroupConsumer(consumer, tuple(topics), group, metrics, config, joins)


class JoinWatch(ConsumerRebalanceListener):  # type: ignore[misc]
    """When this member began waiting for its group to finish a rebalance.

    A member waits from its subscription until its first assignment, and again
    from each revocation (a rebalance began) until the assignment that ends it.
    This holds for eager assignors (range, round robin), which revoke everything
    and assign again, even nothing, at every rebalance; a cooperative assignor
    calls neither when nothing moves. kafka-python calls the listener on its
    network thread while the member's own thread waits in ``poll``.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.since: float | None = clock()

    def on_partitions_revoked(self, revoked: object) -> None:
        """A rebalance began (or a join was tried again): the wait starts, once."""
        if self.since is None:
            self.since = self._clock()

    def on_partitions_assigned(self, assigned: object) -> None:
        """The rebalance ended: the member is settled, with or without partitions."""
        self.since = None

    def waited_s(self) -> float:
        """Seconds waited so far for the rebalance under way; 0 when there is none."""
        since = self.since
        return 0.0 if since is None else max(self._clock() - since, 0.0)


class KafkaGroupConsumer:
    """A member of a Kafka consumer group (the ``Consumer`` protocol)."""

    def __init__(self, consumer: KafkaConsumer, topics: tuple[str, ...], group: str,
                 metrics: KafkaMetrics, config: KafkaBusConfig, joins: JoinWatch,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.topics = topics
        self.group = group
        self._joins = joins
        self._clock = clock
        self._refused_since: float | None = None
        self._consumer = consumer
        self._metrics = metrics
        self._config = config
        self._next: dict[tuple[str, int], int] = {}

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Message]:
        """Records from the owned partitions; waits up to ``timeout_s`` for some.

        While this member owns no partition (it is joining the group, or
        rejoining in a rebalance) the call keeps polling until the join is done,
        for at most ``join_wait_ms``: kafka-python 3.0 drops a JoinGroup answer
        that arrives between two polls and sends a new JoinGroup, which restarts
        the rebalance for every member. So each member needs a thread of its own:
        members polled in turn from one thread wait on each other's joins.
        """
        start = time.monotonic()
        join_deadline = start + self._config.join_wait_ms / 1000
        deadline = start + timeout_s
        try:
            while True:
                now = time.monotonic()
                wait_s = deadline - now if now < deadline else min(0.5, join_deadline - now)
                batches = self._consumer.poll(timeout_ms=max(int(wait_s * 1000), 0),
                                              max_records=max_records)
                now = time.monotonic()
                if batches or now >= join_deadline or (
                        now >= deadline and self._consumer.assignment()):
                    break
        except (kerr.KafkaError, OSError) as exc:
            raise self._error("poll", exc) from exc
        out = [Message(r.topic, r.partition, r.offset, r.key or b"", r.value or b"",
                       r.timestamp, tuple((k, bytes(v)) for k, v in r.headers or ()))
               for records in batches.values() for r in records]
        for msg in out:
            self._next[(msg.topic, msg.partition)] = msg.offset + 1
        for topic, n in collections.Counter(msg.topic for msg in out).items():
            self._metrics.consumed.labels(topic, self.group).inc(n)  # once a topic a poll
        self._update_lag()
        return out

    def commit(self, hold: Mapping[tuple[str, int], int] | None = None) -> None:
        """Commit the offsets after every record polled, no further than ``hold`` for the
        partitions in it (blocks up to commit_timeout_ms).

        A commit refused because the group is moving partitions is counted and not
        raised: the records since the last commit go again to their next owner, and
        the next poll rejoins. Refused for longer than a rebalance can last
        (``longest_rebalance_s``), it is a BusError.
        """
        try:
            self._commit(hold)
        except MOVED as exc:
            self._metrics.commits_overtaken.labels(self.group).inc()
            now = self._clock()
            if self._refused_since is None:
                self._refused_since = now
            refused_s = now - self._refused_since
            if refused_s > self._config.longest_rebalance_s:
                raise self._error(f"every commit for {refused_s:.0f} s", exc) from exc
            log.info("group %r: a commit was overtaken by a rebalance (%s); the records "
                     "since the last commit are delivered again", self.group,
                     type(exc).__name__)
        except (kerr.KafkaError, OSError) as exc:
            raise self._error("commit", exc) from exc
        else:
            self._refused_since = None

    def _commit(self, hold: Mapping[tuple[str, int], int] | None) -> None:
        if not hold:
            self._consumer.commit(timeout_ms=self._config.commit_timeout_ms)
            return
        offsets = {}
        for tp in self._consumer.assignment():
            # the consumer's own position: after a rebalance it restarts at the
            # committed offset, whatever this member had read before
            position = self._consumer.position(tp, timeout_ms=self._config.commit_timeout_ms)
            if position is not None:
                done = min(position, hold.get((tp.topic, tp.partition), position))
                offsets[tp] = OffsetAndMetadata(done, "", -1)
        if offsets:
            self._consumer.commit(offsets=offsets, timeout_ms=self._config.commit_timeout_ms)

    def close(self) -> None:
        """Leave the group without committing."""
        try:
            self._consumer.close(autocommit=False, timeout_ms=self._config.commit_timeout_ms)
        except (kerr.KafkaError, OSError) as exc:
            raise self._error("close", exc) from exc

    def assignment(self) -> set[tuple[str, int]]:
        """The (topic, partition) pairs this member owns now."""
        return {(tp.topic, tp.partition) for tp in self._consumer.assignment()}

    def joining_s(self) -> float:
        """Seconds this member has waited for the group to finish a rebalance."""
        return self._joins.waited_s()

    def caught_up(self) -> set[tuple[str, int]]:
        """The owned partitions read to the high watermark their last fetch carried (a
        partition this member has returned no record of is not among them)."""
        out = set()
        for tp in self._consumer.assignment():
            high = self._consumer.highwater(tp)
            nxt = self._next.get((tp.topic, tp.partition))
            if high is not None and nxt is not None and nxt >= high:
                out.add((tp.topic, tp.partition))
        return out

    def _update_lag(self) -> None:
        """Lag from the high watermarks the last fetches carried (no extra request)."""
        for tp in self._consumer.assignment():
            high = self._consumer.highwater(tp)
            nxt = self._next.get((tp.topic, tp.partition))
            if high is not None and nxt is not None:
                self._metrics.lag.labels(tp.topic, self.group, str(tp.partition)).set(
                    max(high - nxt, 0))

    def _error(self, what: str, exc: BaseException) -> BusError:
        return BusError(f"Kafka at {self._config.bootstrap_servers}: group {self.group!r} "
                        f"on {list(self.topics)}: {what} failed: {exc!r}")

