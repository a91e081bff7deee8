"""KafkaBus's config and metrics, and its kafka-python clients besides the producer.

A ``KafkaGroupConsumer`` is one KafkaConsumer in a group with auto-commit off:
``commit`` commits the offsets after everything ``poll`` returned, so what was
polled and not committed is delivered again after a restart or a rebalance;
a commit that a rebalance overtakes is counted, not raised (the next poll
rejoins). ``joining_s`` tells how long the member has waited for a rebalance
to finish. Every other failure is a BusError naming the brokers, the group,
the topics and the cause.
A ``TopicCreator`` creates topics with the admin client on first use. A
``ProducerOutage`` tells the producer's outages in two log lines each.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import kafka.errors as kerr
from kafka import ConsumerRebalanceListener, KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.structs import OffsetAndMetadata
from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabricops.core.bus import BusError, Message
from fabricops.core.logthrottle import Outage

log = logging.getLogger(__name__)

#: A commit refused because the group moves partitions: not an outage.
MOVED = (kerr.RebalanceInProgressError, kerr.CommitFailedError,
         kerr.IllegalGenerationError, kerr.UnknownMemberIdError)


class KafkaBusConfig(BaseModel):
    """Brokers, the local buffer, the producer and the consumers of a KafkaBus."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap_servers: str = Field(default="127.0.0.1:9092", description="host:port[,host:port]")
    client_id: str = Field(default="fabricops", description="Client id shown by the brokers")
    buffer_records: int = Field(
        default=10_000, ge=1, description="Records held locally (10,000 64-port frames: ~250 MB)")
    buffer_full_policy: Literal["drop_oldest", "block"] = Field(
        default="drop_oldest", description="What publish does when the buffer is full")
    block_timeout_ms: int = Field(default=100, ge=0, description="Longest wait of 'block'")
    topic_partitions: int = Field(default=8, ge=1, description="Partitions of created topics")
    topic_replication: int = Field(default=1, ge=1, description="Replicas of created topics")
    compression: Literal["lz4", "zstd", "gzip", "none"] = "lz4"
    linger_ms: int = Field(default=20, ge=0, description="Producer wait to fill a batch")
    batch_size_bytes: int = Field(default=1 << 20, ge=1024, description="Producer batch size")
    max_request_size_bytes: int = Field(default=8 << 20, ge=1024, description="Largest request")
    max_in_flight_requests: int = Field(default=1, ge=1, description="Per connection; 1 = ordered")
    enable_idempotence: bool = Field(default=False, description="Needs producer-id support")
    delivery_timeout_ms: int = Field(default=30_000, ge=1000, description="Producer's own retries")
    request_timeout_ms: int = Field(default=10_000, ge=100, description="One broker request")
    max_block_ms: int = Field(default=5_000, ge=10, description="Sender wait for metadata/memory")
    connect_timeout_ms: int = Field(default=5_000, ge=100, description="Bootstrap attempt")
    retry_backoff_ms: int = Field(
        default=250, ge=0, description="First pause before re-sending; doubles per round of "
        "retries without an acknowledgement")
    reconnect_backoff_max_ms: int = Field(
        default=5_000, ge=50, le=5_000,
        description="Longest pause between rounds of retries, and between reconnects to a "
        "broker (jittered by the client)")
    reconnect_jitter: float = Field(
        default=0.2, ge=0, lt=1,
        description="Each pause between rounds of retries is shortened by a random fraction "
        "of at most this")
    stop_timeout_s: float = Field(default=10.0, ge=0, description="stop() delivery budget")
    session_timeout_ms: int = Field(default=10_000, ge=1000, description="Consumer liveness")
    heartbeat_interval_ms: int = Field(default=3_000, ge=100, description="< session timeout")
    max_poll_interval_ms: int = Field(default=300_000, ge=1000, description="Also rebalance wait")
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    commit_timeout_ms: int = Field(default=10_000, ge=100, description="Longest commit wait")
    join_wait_ms: int = Field(default=10_000, ge=0,
                              description="Longest a poll waits for a group join to finish")

    @model_validator(mode="after")
    def _timeouts_fit(self) -> KafkaBusConfig:
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ValueError("delivery_timeout_ms must be at least linger_ms + request_timeout_ms")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be below session_timeout_ms")
        return self

    @property
    def longest_rebalance_s(self) -> float:
        """The longest a healthy rebalance lasts: the brokers wait up to the rebalance
        timeout (``max_poll_interval_ms``) for the members, and a session more for one
        that died."""
        return (self.max_poll_interval_ms + self.session_timeout_ms) / 1000

    def producer_options(self) -> dict[str, Any]:
        """kafka-python KafkaProducer keyword arguments for this config."""
        return {
            "bootstrap_servers": self.bootstrap_servers.split(","), "client_id": self.client_id,
            "acks": "all", "retries": 2**31 - 1, "linger_ms": self.linger_ms,
            "batch_size": self.batch_size_bytes, "max_request_size": self.max_request_size_bytes,
            "compression_type": None if self.compression == "none" else self.compression,
            "max_in_flight_requests_per_connection": self.max_in_flight_requests,
            "enable_idempotence": self.enable_idempotence,
            "delivery_timeout_ms": self.delivery_timeout_ms,
            "request_timeout_ms": self.request_timeout_ms, "max_block_ms": self.max_block_ms,
            "bootstrap_timeout_ms": self.connect_timeout_ms,
            "retry_backoff_ms": self.retry_backoff_ms,
            "reconnect_backoff_ms": 50, "reconnect_backoff_max_ms": self.reconnect_backoff_max_ms,
        }


class KafkaMetrics:
    """Prometheus metrics of one KafkaBus (producer side and its consumers)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str, labels: list[str]) -> Counter:
            return Counter(f"fabricops_kafkabus_{name}", doc, labels, registry=registry)

        self.published = counter("published_records", "Records accepted by publish", ["topic"])
        self.acked = counter("acked_records", "Records acknowledged by the brokers", ["topic"])
        self.failed = counter("failed_deliveries", "Deliveries that failed", ["topic"])
        self.retried = counter("retried_records", "Records queued again after a failure",
                               ["topic"])
        self.dropped = counter("dropped_records", "Records given up: buffer_full, rejected "
                               "by the broker, or still buffered at stop", ["topic", "reason"])
        self.errors = counter("errors", "Producer-side errors by exception type", ["error"])
        self.consumed = counter("consumed_records", "Records returned by poll",
                                ["topic", "group"])
        self.commits_overtaken = counter(
            "commits_overtaken", "Commits refused because the group was moving partitions "
            "(their records are delivered again)", ["group"])
        self.buffered = Gauge("fabricops_kafkabus_buffered_records",
                              "Records queued, being retried or in flight", registry=registry)
        self.lag = Gauge("fabricops_kafkabus_consumer_lag_records",
                         "High watermark minus the next offset to poll, per owned partition",
                         ["topic", "group", "partition"], registry=registry)


def counter_total(counter: Counter) -> float:
    """The sum of a labelled counter over all its label values."""
    return sum(s.value for m in counter.collect() for s in m.samples
               if s.name.endswith("_total"))


class ProducerOutage:
    """The brokers' outage as a KafkaBus producer sees it, in two log lines (``Outage``).

    ``failed`` on every failure to reach the brokers: the first logs the cause
    and the local buffer's fill. ``recovered`` on every acknowledgement: the first
    after failures logs the outage's length and the records published, buffered
    at most, still buffered and dropped meanwhile. ``buffered`` follows the
    buffer's fill. Not thread-safe: the bus calls it under its lock.
    """

    def __init__(self, log: logging.Logger, config: KafkaBusConfig, metrics: KafkaMetrics,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._outage = Outage(log, f"Kafka at {config.bootstrap_servers}", clock)
        self._capacity = config.buffer_records
        self._metrics = metrics
        self._published_before = self._dropped_before = 0.0
        self._peak = 0

    @property
    def down(self) -> bool:
        return self._outage.down

    def failed(self, cause: str, buffered: int) -> None:
        if not self._outage.down:
            self._published_before = counter_total(self._metrics.published)
            self._dropped_before = counter_total(self._metrics.dropped)
            self._peak = buffered
        self._outage.failed(f"{cause}; buffering locally ({buffered:,} of "
                            f"{self._capacity:,} records held)")

    def buffered(self, n: int) -> None:
        if self._outage.down:
            self._peak = max(self._peak, n)

    def recovered(self, buffered: int) -> None:
        if not self._outage.down:
            return
        published = counter_total(self._metrics.published) - self._published_before
        dropped = counter_total(self._metrics.dropped) - self._dropped_before
        self._outage.recovered(f"{published:,.0f} records published meanwhile, at most "
                               f"{self._peak:,} buffered, {buffered:,} still buffered, "
                               f"{dropped:,.0f} dropped meanwhile")


class TopicCreator:
    """Creates each topic once (``topic_partitions``, ``topic_replication``) if missing.

    Failures go to ``on_error`` and are not retried for that topic: the broker's
    auto-creation may still provide it. Thread-safe.
    """

    def __init__(self, config: KafkaBusConfig,
                 on_error: Callable[[str, BaseException], None]) -> None:
        self._config = config
        self._on_error = on_error
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def ensure(self, topic: str) -> None:
        """Create ``topic`` unless this creator has handled it before."""
        with self._lock:
            if topic in self._known:
                return
            try:
                admin = KafkaAdminClient(
                    bootstrap_servers=self._config.bootstrap_servers.split(","),
                    client_id=self._config.client_id,
                    bootstrap_timeout_ms=self._config.connect_timeout_ms)
            except (kerr.KafkaError, OSError) as exc:
                self._on_error(f"cannot create topic {topic!r}", exc)
                return
            try:
                admin.create_topics([NewTopic(topic, self._config.topic_partitions,
                                              self._config.topic_replication)])
            except kerr.TopicAlreadyExistsError:
                pass
            except (kerr.KafkaError, OSError) as exc:
                self._on_error(f"cannot create topic {topic!r}", exc)
            finally:
                admin.close()
            self._known.add(topic)

    def forget_all(self) -> None:
        """Check every topic again on next use (after the brokers may have lost them)."""
        with self._lock:
            self._known.clear()


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
            self._metrics.consumed.labels(msg.topic, self.group).inc()
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

