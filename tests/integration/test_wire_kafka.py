"""Through Kafka (Tansu): every topic's records keep their key and headers on the broker and
decode from the topic's ``.proto`` file alone, read by a plain Kafka client."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from prometheus_client import CollectorRegistry

from fabricops.core.bus import Topic, record_headers, topic_name
from fabricops.core.kafkabus import KafkaBus
from tests.conftest import require_program
from tests.core.topic_samples import compile_alone, expected_fields, plain, publish_every_topic
from tests.integration.conftest import bus_config

pytestmark = pytest.mark.integration


def test_every_topic_keeps_key_and_headers_and_decodes_from_its_schema(
    kafka_broker: str, tmp_path: Path,
) -> None:
    protoc = require_program("protoc", "to compile the wire schemas as another language would")
    prefix = f"wire{uuid.uuid4().hex[:8]}."
    bus = KafkaBus(bus_config(kafka_broker), CollectorRegistry())
    bus.start()
    try:
        for topic in Topic:
            bus.ensure_topic(topic_name(topic, prefix))
        sent = publish_every_topic(bus, prefix)
        bus.drain(30)
    finally:
        bus.stop()
    consumer = KafkaConsumer(*(topic_name(t, prefix) for t in Topic),
                             bootstrap_servers=kafka_broker, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None)
    want = sum(len(v) for v in sent.values())
    got = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < want and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
    finally:
        consumer.close()
    assert len(got) == want, f"{len(got)} of {want} records read back"
    for topic in Topic:
        generic = compile_alone(protoc, topic.schema, tmp_path / topic.value)
        mine = sorted((r for r in got if r.topic == topic_name(topic, prefix)),
                      key=lambda r: r.key)
        for record, one in zip(mine, sorted(sent[topic], key=lambda s: s.key), strict=True):
            assert record.key == one.key
            assert [(k, bytes(v)) for k, v in record.headers] == list(
                record_headers(topic, one.source))
            fields = plain(generic.FromString(record.value))
            if topic is Topic.DEAD_LETTERS:
                fields.pop("ts_ns")
            assert fields == expected_fields(topic, one.record), topic


def test_a_fabricops_consumer_sees_the_headers_a_producer_sent(kafka_broker: str) -> None:
    topic = f"wire{uuid.uuid4().hex[:8]}.{Topic.EVENTS.value}"
    headers = record_headers(Topic.EVENTS, "pipeline")
    bus = KafkaBus(bus_config(kafka_broker), CollectorRegistry())
    bus.start()
    try:
        bus.ensure_topic(topic)
        consumer = bus.subscribe([topic], f"g-{uuid.uuid4().hex[:6]}")
        bus.publish(topic, b"leaf-0:eth1", [b"\x08\x01"], headers)
        bus.drain(30)
        got = []
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            got = consumer.poll(0.5)
        consumer.close()
    finally:
        bus.stop()
    (message,) = got
    assert (message.key, message.headers) == (b"leaf-0:eth1", tuple(headers))
