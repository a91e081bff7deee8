"""Every topic's records decode from the topic's ``.proto`` file alone, with a generic
protobuf decoder (and with protoc's own), and carry their key and headers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, text_format

from fabricops.core import frame, intreport, wire_records, wire_schema
from fabricops.core.actions import Action
from fabricops.core.bus import CONTENT_TYPE, Message, Topic, header, topic_name
from fabricops.core.deadletter import DeadLetter
from fabricops.core.frame import Frame
from fabricops.core.intreport import IntBatch
from fabricops.core.membus import MemoryBus
from fabricops.core.records import Diagnosis, Event, SamplingPolicy
from fabricops.core.wire_compat import compile_protos
from tests.conftest import require_program
from tests.core.topic_samples import (
    Sent,
    compile_alone,
    expected_fields,
    plain,
    proto_file_of,
    protoc_decode,
    publish_every_topic,
)

RECORDS: dict[Topic, Any] = {Topic.TELEMETRY: Frame, Topic.INT: IntBatch,
                             Topic.EVENTS: Event, Topic.DIAGNOSES: Diagnosis,
                             Topic.ACTIONS: Action, Topic.CONTROL: SamplingPolicy,
                             Topic.DEAD_LETTERS: DeadLetter}


@pytest.fixture(scope="module")
def protoc() -> str:
    return require_program("protoc", "to compile the wire schemas as another language would")


@pytest.fixture(scope="module")
def on_the_bus() -> tuple[dict[Topic, list[Sent]], dict[Topic, list[Message]]]:
    """What every producer path published on a memory bus, and what a consumer got."""
    bus = MemoryBus()
    bus.start()
    sent = publish_every_topic(bus)
    reader = bus.subscribe([topic_name(t) for t in Topic], "wire-test")
    got: dict[Topic, list[Message]] = {t: [] for t in Topic}
    for msg in reader.poll(0.0, 1000):
        got[Topic(msg.topic.removeprefix("fabricops."))].append(msg)
    bus.stop()
    for records in got.values():
        records.sort(key=lambda m: (m.key, m.partition, m.offset))
    return sent, got


@pytest.mark.parametrize("topic", list(Topic))
def test_each_topic_decodes_from_its_proto_file_alone(
    topic: Topic, protoc: str, tmp_path: Path,
    on_the_bus: tuple[dict[Topic, list[Sent]], dict[Topic, list[Message]]],
) -> None:
    sent, got = on_the_bus
    generic = compile_alone(protoc, topic.schema, tmp_path)
    assert len(got[topic]) == len(sent[topic])
    for msg, want in zip(got[topic], sorted(sent[topic], key=lambda s: s.key), strict=True):
        decoded = generic.FromString(msg.value)
        fields = plain(decoded)
        if topic is Topic.DEAD_LETTERS:
            assert fields.pop("ts_ns") > 0
        assert fields == expected_fields(topic, want.record)
        by_protoc = text_format.Parse(protoc_decode(protoc, topic.schema, tmp_path, msg.value),
                                      generic())
        assert by_protoc == decoded, "protoc reads the record as the runtime does"


@pytest.mark.parametrize("topic", list(Topic))
def test_each_record_carries_its_key_and_headers(
    topic: Topic, on_the_bus: tuple[dict[Topic, list[Sent]], dict[Topic, list[Message]]],
) -> None:
    sent, got = on_the_bus
    wanted = sorted(sent[topic], key=lambda s: s.key)
    assert [m.key for m in got[topic]] == [s.key for s in wanted]
    for msg, want in zip(got[topic], wanted, strict=True):
        assert [name for name, _ in msg.headers] == ["content-type", "schema", "schema-version",
                                                     "source"]
        assert header(msg.headers, "content-type") == CONTENT_TYPE.encode()
        assert header(msg.headers, "schema") == topic.schema.encode()
        assert header(msg.headers, "schema-version") == topic.value.rsplit(".v", 1)[1].encode()
        assert header(msg.headers, "source") == want.source.encode()


@pytest.mark.parametrize("topic", list(Topic))
def test_each_record_decodes_back_to_what_was_sent(
    topic: Topic, on_the_bus: tuple[dict[Topic, list[Sent]], dict[Topic, list[Message]]],
) -> None:
    sent, got = on_the_bus
    for msg, want in zip(got[topic], sorted(sent[topic], key=lambda s: s.key), strict=True):
        record = RECORDS[topic].decode(msg.value)
        if topic is Topic.DEAD_LETTERS:
            assert (record.topic, record.offset, record.key, record.value) == (
                want.record.topic, want.record.offset, want.record.key, want.record.value)
        else:
            assert record == want.record


def test_every_topic_names_the_schema_its_record_uses() -> None:
    own = {Topic.TELEMETRY: frame.SCHEMA, Topic.INT: intreport.SCHEMA}
    for topic, record in RECORDS.items():
        assert own.get(topic, getattr(record, "SCHEMA", None)) == topic.schema
        wire_schema.message_descriptor(topic.schema)
        assert proto_file_of(topic.schema).startswith(
            topic.schema.rsplit(".", 1)[0].replace(".", "/"))


@pytest.mark.parametrize("record", [Event, Diagnosis, Action, SamplingPolicy, DeadLetter])
def test_each_record_model_agrees_with_its_message(record: type[wire_records.WireModel]) -> None:
    wire_records.check(record)


def test_the_committed_descriptor_set_is_what_protoc_builds_from_the_proto_files(
    protoc: str, tmp_path: Path,
) -> None:
    root = Path(str(wire_schema.schema_root()))
    out = tmp_path / "fresh.binpb"
    compile_protos(protoc, root, wire_schema.proto_files(), out)
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    assert fresh == wire_schema.descriptor_set(), (
        "fabricops/schemas/wire.binpb is stale: run python -m fabricops.core.wire_compat build")
