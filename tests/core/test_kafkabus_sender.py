"""KafkaBus's sender against a fake broker: backoff between rounds of retries, an
outage told in two lines, rejected records in one line per interval with a count,
and a stop that does not sit out a long pause.

The fake stands in for kafka-python's KafkaProducer and KafkaAdminClient (the
real broker runs in ``tests/integration/test_kafkabus.py`` and
``test_bus_outage_log.py``).
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import kafka.errors as kerr
import pytest
from kafka.future import Future
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from fabricops.core import kafkabus, kafkaclient
from fabricops.core.bus import Topic, record_headers
from fabricops.core.kafkabus import KafkaBus, KafkaBusConfig

LOGGER = "fabricops.core.kafkabus"


class FakeBroker:
    """Up or down; refuses connections while down, and records for ``reject`` topics."""

    def __init__(self) -> None:
        self.up = False
        self.reject: set[str] = set()
        self.connects: list[float] = []
        self.delivered: list[tuple[str, bytes]] = []
        self.headers: list[list[tuple[str, bytes]]] = []
        self.lock = threading.Lock()

    def producer(self, **_options: Any) -> FakeProducer:
        with self.lock:
            self.connects.append(time.monotonic())
        if not self.up:
            raise kerr.KafkaConnectionError("connection refused")
        return FakeProducer(self)

    def admin(self, **_options: Any) -> FakeAdmin:
        if not self.up:
            raise kerr.KafkaConnectionError("connection refused")
        return FakeAdmin()


class FakeProducer:
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker

    def send(self, topic: str, key: bytes, value: bytes,
             headers: list[tuple[str, bytes]] | None = None) -> Future:
        if topic in self.broker.reject:
            raise kerr.MessageSizeTooLargeError(f"{len(value)} bytes is too large")
        if not self.broker.up:
            return Future().failure(kerr.KafkaConnectionError("broker went away"))
        with self.broker.lock:
            self.broker.delivered.append((topic, value))
            self.broker.headers.append(list(headers or []))
        return Future().success(None)

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        pass


class FakeAdmin:
    def create_topics(self, _topics: object) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> FakeBroker:
    fake = FakeBroker()
    monkeypatch.setattr(kafkabus, "KafkaProducer", fake.producer)
    monkeypatch.setattr(kafkaclient, "KafkaAdminClient", fake.admin)
    return fake


def _bus(**config: Any) -> KafkaBus:
    return KafkaBus(KafkaBusConfig(**config), CollectorRegistry(), rng=random.Random(5))


def _wait_for(done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "not in time (a guard, not a measure)"
        time.sleep(0.005)


def _ours(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_an_outage_backs_off_is_two_lines_and_loses_nothing(
    broker: FakeBroker, caplog: pytest.LogCaptureFixture,
) -> None:
    bus = _bus(retry_backoff_ms=20, reconnect_backoff_max_ms=200)
    values = [b"r%d" % i for i in range(30)]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        bus.start()
        try:
            bus.publish("fabricops.t.v1", b"k", values[:1])  # the brokers are away
            _wait_for(lambda: bool(broker.connects))
            for value in values[1:]:
                bus.publish("fabricops.t.v1", b"k", [value])
                time.sleep(0.03)
            down_s = time.monotonic() - broker.connects[0]
            broker.up = True
            assert bus.flush(30)
        finally:
            bus.stop()
    assert [v for _, v in broker.delivered] == values, "nothing lost, order kept"
    gaps = [b - a for a, b in zip(broker.connects, broker.connects[1:], strict=False)]
    floors = [0.8 * min(0.02 * 2**n, 0.2) for n in range(len(gaps))]
    assert all(g >= f - 0.002 for g, f in zip(gaps, floors, strict=False)), gaps
    assert len(broker.connects) <= down_s / 0.16 + 6, "backed off to its cap, not spinning"
    lines = _ours(caplog)
    assert len(lines) == 2, lines
    assert "unavailable" in lines[0]
    assert "buffering locally" in lines[0]
    back = lines[1]
    assert re.search(r"back after [0-9.]+ s \([0-9]+ failed attempts\)", back), back
    assert "29 records published meanwhile, at most 30 buffered" in back
    assert "0 dropped meanwhile" in back


def test_records_rejected_for_good_are_one_line_per_interval_with_a_count(
    broker: FakeBroker, caplog: pytest.LogCaptureFixture,
) -> None:
    broker.up = True
    broker.reject.add("fabricops.big.v1")
    bus = _bus()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        bus.start()
        try:
            bus.publish("fabricops.big.v1", b"k", [b"x" * 100] * 50)
            bus.publish("fabricops.t.v1", b"k", [b"fine"])
            assert bus.flush(30)
            during = _ours(caplog)
        finally:
            bus.stop()
    assert len(during) == 1, during
    assert "rejected a record for topic 'fabricops.big.v1' for good" in during[0]
    assert "unavailable" not in during[0], "a rejected record is not an outage"
    assert any("49 more held back" in line for line in _ours(caplog)), _ours(caplog)
    assert bus.registry.get_sample_value(
        "fabricops_kafkabus_dropped_records_total",
        {"topic": "fabricops.big.v1", "reason": "rejected"}) == 50
    assert broker.delivered == [("fabricops.t.v1", b"fine")]


def test_headers_reach_the_producer_with_every_record(broker: FakeBroker) -> None:
    broker.up = True
    bus = _bus()
    headers = record_headers(Topic.EVENTS, "pipeline")
    bus.start()
    try:
        bus.publish("fabricops.events.v2", b"leaf-0:eth1", [b"a", b"b"], headers)
        bus.publish("fabricops.t.v1", b"k", [b"bare"])
        assert bus.flush(30)
    finally:
        bus.stop()
    assert broker.headers == [list(headers), list(headers), []]
    assert dict(broker.headers[0])["schema"] == b"fabricops.events.v2.Event"


def test_a_stop_does_not_sit_out_a_long_pause(
    broker: FakeBroker, caplog: pytest.LogCaptureFixture,
) -> None:
    bus = _bus(retry_backoff_ms=5000, stop_timeout_s=0.2)  # every pause is 4-5 s
    caplog.set_level(logging.INFO, logger=LOGGER)
    bus.start()
    bus.publish("fabricops.t.v1", b"k", [b"stuck"])
    _wait_for(lambda: bool(broker.connects))
    time.sleep(0.2)  # the sender is in its first pause now
    started = time.monotonic()
    bus.stop()
    assert time.monotonic() - started < 3.5, "stop cut the 4-5 s pause short"
    assert bus.registry.get_sample_value(
        "fabricops_kafkabus_dropped_records_total",
        {"topic": "fabricops.t.v1", "reason": "stopped"}) == 1
    assert "stopped with 1 records undelivered (dropped)" in _ours(caplog)[-1]


def test_the_reconnect_backoff_cannot_be_set_past_5_s() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 5000"):
        KafkaBusConfig(reconnect_backoff_max_ms=30_000)
    with pytest.raises(ValidationError, match="less than 1"):
        KafkaBusConfig(reconnect_jitter=1.0)


def test_records_taken_for_sending_are_counted_per_topic(broker: FakeBroker) -> None:
    broker.up = True
    bus = _bus()
    bus.start()
    try:
        bus.publish("fabricops.t.v1", b"k", [b"a", b"b", b"c"])
        bus.publish("fabricops.t.v1", b"j", [b"d"])
        bus.publish("fabricops.u.v1", b"k", [b"e"])
        assert bus.flush(30)
    finally:
        bus.stop()
    counts = {topic: bus.registry.get_sample_value(
        "fabricops_kafkabus_published_records_total", {"topic": topic})
        for topic in ("fabricops.t.v1", "fabricops.u.v1")}
    assert counts == {"fabricops.t.v1": 4, "fabricops.u.v1": 1}
