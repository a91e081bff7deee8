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

Between two rounds of retries the sender waits a backoff (``Backoff``): from
``retry_backoff_ms``, doubling per round without an acknowledgement, never
more than ``reconnect_backoff_max_ms`` (at most 5 s), shortened by a random
fraction of at most ``reconnect_jitter``; brokers back after an outage of any
length are sent to again within that cap. An outage is logged once when it
starts (with the cause and the buffer's fill) and once when it ends (with its
length, the records published, buffered at most, still buffered and dropped
meanwhile). Records rejected for good and defects of the sender are logged at
most once per cause every ``ThrottledLog`` interval, with their count.

Topics are created on first use with the admin client (``topic_partitions``),
falling back to the broker's auto-creation. Consumers are KafkaConsumers in a
group with auto-commit off: ``commit`` commits what was polled.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Sequence

import kafka.errors as kerr
from kafka import KafkaProducer
from prometheus_client import CollectorRegistry

from fabricops.core.backoff import Backoff
from fabricops.core.bus import BusError, Headers
from fabricops.core.kafkaclient import KafkaBusConfig, KafkaMetrics, ProducerOutage, TopicCreator
from fabricops.core.kafkagroup import KafkaGroupConsumer, open_group_consumer
from fabricops.core.logthrottle import ThrottledLog

__all__ = ["KafkaBus", "KafkaBusConfig", "KafkaGroupConsumer"]
log = logging.getLogger(__name__)

_Record = tuple[str, bytes, bytes, Headers]  # topic, key, value, headers
_SEND_BATCH = 512
_REJECTED = (kerr.MessageSizeTooLargeError, kerr.InvalidTopicError,
             kerr.TopicAuthorizationFailedError, kerr.InvalidRecordError)


class KafkaBus:
    """The Bus on Kafka (see the module docstring); metrics go to ``registry``.

    ``rng`` draws the backoff's jitter (seed it in tests).
    """

    def __init__(self, config: KafkaBusConfig | None = None,
                 registry: CollectorRegistry | None = None,
                 rng: random.Random | None = None) -> None:
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
        cap_s = self.config.reconnect_backoff_max_ms / 1000
        self._backoff = Backoff(min(self.config.retry_backoff_ms / 1000, cap_s), cap_s,
                                self.config.reconnect_jitter)
        self._rng = rng or random.Random()
        self._rounds = 0  # retry rounds since the last acknowledgement
        self._stop_deadline: float | None = None
        self._outage = ProducerOutage(log, self.config, self.metrics)
        self._warnings = ThrottledLog(log)

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the sender thread; returns at once (it connects in the background)."""
        with self._cond:
            if self._thread is not None:
                return
            self._stopping, self._stop_deadline = False, None
            self._thread = threading.Thread(target=self._run, name="kafkabus-sender", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Deliver what is buffered within ``stop_timeout_s``; count the rest as dropped
        (and say so in one line)."""
        with self._cond:
            thread, self._stopping = self._thread, True
            self._cond.notify_all()
        if thread is not None:
            thread.join()
        with self._cond:
            self._thread = None
            undelivered = self._buffered()
            for topic, *_ in (*self._retry, *self._pending):
                self.metrics.dropped.labels(topic, "stopped").inc()
            if self._in_flight:
                self.metrics.dropped.labels("*", "stopped").inc(self._in_flight)
            self._retry.clear()
            self._pending.clear()
            self._in_flight = 0
            self._set_buffered()
        self._warnings.flush()
        if undelivered:
            log.warning("Kafka bus stopped with %s records undelivered (dropped); last error: %s",
                        f"{undelivered:,}", self.last_error or "none")

    # -- publishing ---------------------------------------------------------------------

    def publish(self, topic: str, key: bytes, values: Sequence[bytes],
                headers: Headers = ()) -> None:
        """Buffer ``values`` for ``topic`` under ``key``, each with ``headers`` (Kafka record
        headers); waits only under policy 'block'.

        Under 'block', the BusError of a buffer that stays full leaves the values
        before the one that found no room published.
        """
        with self._cond:
            if self._thread is None or self._stopping:
                raise BusError(f"kafka bus at {self.config.bootstrap_servers} cannot publish "
                               f"to topic {topic!r}: the bus is not started")
            taken = 0
            try:
                for value in values:
                    full = self._buffered() >= self.config.buffer_records
                    if full and not self._make_room(topic):
                        self.metrics.dropped.labels(topic, "buffer_full").inc()
                        continue
                    self._pending.append((topic, key, bytes(value), headers))
                    taken += 1
            finally:
                if taken:  # counted once a call (a label lookup costs 4x the count)
                    self.metrics.published.labels(topic).inc(taken)
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
        n = self._buffered()
        self.metrics.buffered.set(n)
        self._outage.buffered(n)

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
                self.metrics.errors.labels(type(exc).__name__).inc()
                self._warnings.error("Kafka bus sender loop failures", "Kafka bus sender loop "
                                     "failed; restarting it: %r", exc)
                self._rebuild = True
                self._pause()

    def _send_loop(self) -> None:
        while True:
            batch, retrying = self._next_batch()
            if not batch:
                break
            if retrying:
                self._pause()
            if self._rebuild:
                self._close_producer(timeout_s=0)
            producer = self._producer or self._connect()
            sent = 0 if producer is None else self._send_all(producer, batch)
            if sent < len(batch):
                self._requeue(batch[sent:])
                if self._stopping and self._stop_left_s() <= 0:
                    break
        self._close_producer(self.config.stop_timeout_s)

    def _pause(self) -> None:
        """Wait before a round of retries: the backoff of the rounds since the last
        acknowledgement. A stop cuts the wait short, then bounds it by the stop budget."""
        with self._cond:
            self._rounds += 1
            delay_s = self._backoff.delay_s(self._rounds, self._rng)
            if not self._stopping:
                self._cond.wait_for(lambda: self._stopping, timeout=delay_s)
                return
        time.sleep(min(delay_s, self._stop_left_s()))

    def _stop_left_s(self) -> float:
        """Seconds left of ``stop_timeout_s`` once stopping, counted from the first call."""
        if self._stop_deadline is None:
            self._stop_deadline = time.monotonic() + self.config.stop_timeout_s
        return max(self._stop_deadline - time.monotonic(), 0.0)

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
            topic, key, value, headers = record
            self.ensure_topic(topic)
            try:
                future = producer.send(topic, key=key, value=value, headers=list(headers))
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
            self._rounds = 0
            self._set_buffered()
            self._cond.notify_all()
            self._outage.recovered(self._buffered())

    def _on_failure(self, record: _Record, generation: int, exc: BaseException) -> None:
        """Queue ``record`` again (unless rejected for good); rebuild the producer."""
        topic = record[0]
        rejected = isinstance(exc, _REJECTED)
        if rejected:
            self.last_error = (f"Kafka at {self.config.bootstrap_servers}: a record for topic "
                               f"{topic!r} rejected: {exc!r}")
            self.metrics.errors.labels(type(exc).__name__).inc()
            self._warnings.warning(f"records rejected by Kafka ({type(exc).__name__})",
                                   "Kafka at %s rejected a record for topic %r for good "
                                   "(dropped): %r", self.config.bootstrap_servers, topic, exc)
        else:
            self._note_error(f"delivery to topic {topic!r} failed", exc)
        with self._cond:
            self._in_flight -= 1
            self.metrics.failed.labels(topic).inc()
            if rejected:
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
        """Count a failure to reach the brokers; the first of an outage is logged."""
        self.last_error = f"Kafka at {self.config.bootstrap_servers}: {what}: {exc!r}"
        self.metrics.errors.labels(type(exc).__name__).inc()
        with self._cond:
            self._outage.failed(f"{what}: {exc!r}", self._buffered())
