"""KafkaBus: the Bus on a Kafka cluster, through kafka-python.

Publishing: ``publish`` only appends to a bounded local buffer
(``buffer_records``, counting records queued, being retried and in flight).
When it is full, ``buffer_full_policy`` applies: ``drop_oldest`` drops the
oldest queued record (counted), ``block`` waits up to ``block_timeout_ms`` for
room and then raises BusError. A sender thread connects (again and again while
the brokers are away) and hands records to a KafkaProducer (acks=all, lz4,
linger/batching, kafka-python's own retries within ``delivery_timeout_ms``).
A record whose delivery failed is queued again, ahead of newer ones, and the
producer is rebuilt (fresh metadata, topics checked again) before it is resent;
so brokers that are away and come back lose nothing from the buffer. Records
the broker rejects for good (too large, invalid or forbidden topic) are dropped
and counted. Per key, order holds unless a delivery fails and is retried.
An outage is logged once when it starts (with the cause and the buffer's
size) and once when it ends (with its length, the records still buffered and
those dropped meanwhile).

Topics are created on first use with the admin client (``topic_partitions``),
falling back to the broker's auto-creation. Consumers are KafkaConsumers in a
group with auto-commit off: ``commit`` commits what was polled.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence

import kafka.errors as kerr
from kafka import KafkaProducer
from prometheus_client import CollectorRegistry

from fabricops.core.bus import BusError
from fabricops.core.kafkaclient import (
    KafkaBusConfig,
    KafkaGroupConsumer,
    KafkaMetrics,
    TopicCreator,
    open_group_consumer,
)
from fabricops.core.logthrottle import Outage

__all__ = ["KafkaBus", "KafkaBusConfig", "KafkaGroupConsumer"]
log = logging.getLogger(__name__)

_Record = tuple[str, bytes, bytes]  # topic, key, value
_SEND_BATCH = 512
_REJECTED = (kerr.MessageSizeTooLargeError, kerr.InvalidTopicError,
             kerr.TopicAuthorizationFailedError, kerr.InvalidRecordError)


class KafkaBus:
    """The Bus on Kafka (see the module docstring); metrics go to ``registry``."""

    def __init__(self, config: KafkaBusConfig | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        self.config = config or KafkaBusConfig()
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = KafkaMetrics(self.registry)
        self.last_error: str | None = None  # latest producer-side problem, naming the brokers
        self._cond = threading.Condition()
        self._pending: deque[_Record] = deque()
        self._retry: deque[_Record] = deque()
        self._in_flight = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._producer: KafkaProducer | None = None
        self._generation = 0  # producers built so far; a failure rebuilds the current one
        self._rebuild = False
        self._topics = TopicCreator(self.config, self._note_error)
        self._outage = Outage(log, f"Kafka at {self.config.bootstrap_servers}")
        self._dropped_at_start = 0.0

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the sender thread; returns at once (it connects in the background)."""
        with self._cond:
            if self._thread is not None:
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="kafkabus-sender", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Deliver what is buffered within ``stop_timeout_s``; count the rest as dropped."""
        with self._cond:
            thread, self._stopping = self._thread, True
            self._cond.notify_all()
        if thread is not None:
            thread.join()
        with self._cond:
            self._thread = None
            for topic, _, _ in (*self._retry, *self._pending):
                self.metrics.dropped.labels(topic, "stopped").inc()
            if self._in_flight:
                self.metrics.dropped.labels("*", "stopped").inc(self._in_flight)
            self._retry.clear()
            self._pending.clear()
            self._in_flight = 0
            self._set_buffered()

    # -- publishing ---------------------------------------------------------------------

    def publish(self, topic: str, key: bytes, values: Sequence[bytes]) -> None:
        """Buffer ``values`` for ``topic`` under ``key``; waits only under policy 'block'.

        Under 'block', the BusError of a buffer that stays full leaves the values
        before the one that found no room published.
        """
        with self._cond:
            if self._thread is None or self._stopping:
                raise BusError(f"kafka bus at {self.config.bootstrap_servers} cannot publish "
                               f"to topic {topic!r}: the bus is not started")
            try:
                for value in values:
                    full = self._buffered() >= self.config.buffer_records
                    if full and not self._make_room(topic):
                        self.metrics.dropped.labels(topic, "buffer_full").inc()
                        continue
                    self._pending.append((topic, key, bytes(value)))
                    self.metrics.published.labels(topic).inc()
            finally:
                self._set_buffered()
                self._cond.notify_all()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every buffered record is acknowledged; False if ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._buffered():
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    return False
                self._cond.wait(left)
            return True

    def drain(self, timeout_s: float = 10.0) -> None:
        """``flush``, raising BusError naming the brokers and last error if records remain."""
        if not self.flush(timeout_s):
            raise BusError(f"{self.buffered_records()} records not acknowledged by Kafka at "
                           f"{self.config.bootstrap_servers} within {timeout_s:g} s; "
                           f"last error: {self.last_error or 'none'}")

    def buffered_records(self) -> int:
        """Records queued, being retried or in flight."""
        with self._cond:
            return self._buffered()

    def subscribe(self, topics: Sequence[str], group: str) -> KafkaGroupConsumer:
        """Join ``group`` for ``topics`` (created if missing); BusError names the brokers."""
        for topic in topics:
            self.ensure_topic(topic)
        return open_group_consumer(self.config, topics, group, self.metrics)

    def ensure_topic(self, topic: str) -> None:
        """Create ``topic`` once per bus if it is missing; problems go to ``last_error``."""
        self._topics.ensure(topic)

    # -- buffer, with self._cond held ---------------------------------------------------

    def _buffered(self) -> int:
        return len(self._pending) + len(self._retry) + self._in_flight

    def _set_buffered(self) -> None:
        self.metrics.buffered.set(self._buffered())

    def _make_room(self, topic: str) -> bool:
        """Apply the full-buffer policy; True if one more record may be queued."""
        if self.config.buffer_full_policy == "block":
            deadline = time.monotonic() + self.config.block_timeout_ms / 1000
            while self._buffered() >= self.config.buffer_records:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BusError(
                        f"kafka bus buffer full ({self.config.buffer_records} records) "
                        f"publishing to topic {topic!r}: Kafka at "
                        f"{self.config.bootstrap_servers} has not acknowledged for "
                        f"{self.config.block_timeout_ms} ms; last error: {self.last_error}")
                self._cond.wait(left)
            return True
        oldest = self._retry or self._pending
        if not oldest:
            return False
        self.metrics.dropped.labels(oldest.popleft()[0], "buffer_full").inc()
        return True

    # -- sender thread ------------------------------------------------------------------

    def _run(self) -> None:
        """The sender loop; an unexpected error is counted and the loop goes on."""
        while True:
            try:
                self._send_loop()
                return
            except Exception as exc:
                self._note_error("sender loop failed; restarting it", exc)
                self._rebuild = True
                time.sleep(self.config.retry_backoff_ms / 1000)

    def _send_loop(self) -> None:
        stop_deadline: float | None = None
        while True:
            batch, retrying = self._next_batch()
            if not batch:
                break
            if retrying:
                time.sleep(self.config.retry_backoff_ms / 1000)
            if self._rebuild:
                self._close_producer(timeout_s=0)
            producer = self._producer or self._connect()
            sent = 0 if producer is None else self._send_all(producer, batch)
            if sent < len(batch):
                self._requeue(batch[sent:])
                if stop_deadline is None and self._stopping:
                    stop_deadline = time.monotonic() + self.config.stop_timeout_s
                if stop_deadline is not None and time.monotonic() > stop_deadline:
                    break
                time.sleep(self.config.retry_backoff_ms / 1000)
        self._close_producer(self.config.stop_timeout_s)

    def _next_batch(self) -> tuple[list[_Record], bool]:
        """Records to send (retries first), marked in flight; empty when stopping."""
        with self._cond:
            while not (self._retry or self._pending or self._stopping):
                self._cond.wait()
            source = self._retry or self._pending
            batch = [source.popleft() for _ in range(min(_SEND_BATCH, len(source)))]
            self._in_flight += len(batch)
            return batch, source is self._retry and bool(batch)

    def _connect(self) -> KafkaProducer | None:
        try:
            self._producer = KafkaProducer(**self.config.producer_options())
        except (kerr.KafkaError, OSError, ValueError) as exc:
            self._note_error("cannot connect the producer", exc)
            return None
        with self._cond:
            self._generation += 1
        return self._producer

    def _send_all(self, producer: KafkaProducer, batch: list[_Record]) -> int:
        """Hand ``batch`` to the producer; how many were accepted."""
        generation = self._generation
        for i, record in enumerate(batch):
            topic, key, value = record
            self.ensure_topic(topic)
            try:
                future = producer.send(topic, key=key, value=value)
            except _REJECTED as exc:
                self._on_failure(record, generation, exc)
                continue
            except kerr.KafkaError as exc:
                self._note_error(f"cannot send to topic {topic!r}", exc)
                self._rebuild = True
                return i
            future.add_callback(self._on_ack, topic)
            future.add_errback(self._on_failure, record, generation)
        return len(batch)

    def _on_ack(self, topic: str, _metadata: object) -> None:
        with self._cond:
            self._in_flight -= 1
            self.metrics.acked.labels(topic).inc()
            self._set_buffered()
            self._cond.notify_all()
            if self._outage.down:
                dropped = self._dropped() - self._dropped_at_start
                self._outage.recovered(f"{self._buffered():,} records still buffered, "
                                       f"{dropped:,.0f} dropped meanwhile")

    def _on_failure(self, record: _Record, generation: int, exc: BaseException) -> None:
        """Queue ``record`` again (unless rejected for good); rebuild the producer."""
        topic = record[0]
        self._note_error(f"delivery to topic {topic!r} failed", exc)
        with self._cond:
            self._in_flight -= 1
            self.metrics.failed.labels(topic).inc()
            if isinstance(exc, _REJECTED):
                self.metrics.dropped.labels(topic, "rejected").inc()
            else:
                self._retry.append(record)
                self.metrics.retried.labels(topic).inc()
                self._rebuild = self._rebuild or generation == self._generation
            self._set_buffered()
            self._cond.notify_all()

    def _requeue(self, records: list[_Record]) -> None:
        with self._cond:
            self._in_flight -= len(records)
            self._retry.extendleft(reversed(records))
            self._cond.notify_all()

    def _close_producer(self, timeout_s: float) -> None:
        """Close the producer; what it could not deliver in ``timeout_s`` fails (retried)."""
        producer, self._producer, self._rebuild = self._producer, None, False
        if producer is None:
            return
        self._topics.forget_all()
        try:
            producer.flush(timeout=timeout_s)
        except kerr.KafkaError as exc:
            self._note_error("records undelivered when the producer closed", exc)
        try:
            producer.close(timeout=timeout_s)
        except kerr.KafkaError as exc:  # close flushes again; what it drops fails and is retried
            self._note_error("producer did not close cleanly", exc)

    def _note_error(self, what: str, exc: BaseException) -> None:
        """Count a producer-side failure; the first of an outage is logged, the rest not."""
        self.last_error = f"Kafka at {self.config.bootstrap_servers}: {what}: {exc!r}"
        self.metrics.errors.labels(type(exc).__name__).inc()
        if not self._outage.down:
            self._dropped_at_start = self._dropped()
        self._outage.failed(f"{what}: {exc!r}; publishing into the local buffer "
                            f"({self.config.buffer_records:,} records)")

    def _dropped(self) -> float:
        return sum(s.value for m in self.metrics.dropped.collect() for s in m.samples
                   if s.name.endswith("_total"))
