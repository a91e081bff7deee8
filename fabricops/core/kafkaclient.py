"""KafkaBus's config and metrics, and its kafka-python clients besides the producer
and the group consumer (:mod:`.kafkagroup`).

A ``TopicCreator`` creates topics with the admin client on first use. A
``ProducerOutage`` tells the producer's outages in two log lines each.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

import kafka.errors as kerr
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabricops.core.logthrottle import Outage


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
