"""A broker outage is two log lines from the bus, not one per record: one when it
starts (with the cause) and one when it ends (with its length and what the buffer
held); the Kafka client library's own lines stay out of an operator's log."""

from __future__ import annotations

import logging
import time

import pytest
from prometheus_client import CollectorRegistry

from fabricops.cli.common import configure_logging
from fabricops.core.kafkabus import KafkaBus

from .conftest import TansuBroker, bus_config

pytestmark = pytest.mark.integration


def test_an_outage_is_logged_when_it_starts_and_when_it_ends(
    restartable_kafka_broker: TansuBroker, caplog: pytest.LogCaptureFixture,
) -> None:
    broker = restartable_kafka_broker
    configure_logging(debug=False)
    bus = KafkaBus(bus_config(broker.bootstrap, delivery_timeout_ms=3000,
                              request_timeout_ms=2000), CollectorRegistry())
    with caplog.at_level(logging.INFO):
        bus.start()
        try:
            bus.publish("fabricops.outage.v1", b"k", [b"before"])
            assert bus.flush(30)
            broker.stop()
            for i in range(40):  # records keep coming while the broker is away
                bus.publish("fabricops.outage.v1", b"k", [b"during %d" % i])
                time.sleep(0.1)
            broker.start()
            assert bus.flush(60)
        finally:
            bus.stop()
    ours = [r.getMessage() for r in caplog.records if r.name == "fabricops.core.kafkabus"]
    assert sum("unavailable" in m for m in ours) == 1, ours
    assert sum("back after" in m for m in ours) == 1, ours
    assert any("dropped meanwhile" in m for m in ours)
    assert not [r for r in caplog.records if r.name.startswith("kafka")
                and r.levelno >= logging.WARNING], "the client library's lines are kept out"
