"""Real records of every topic, published as the platform's producers publish them, and
their schemas compiled from the ``.proto`` files alone, as another language's build would."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from fabricops.core.actions import (
    Action,
    ActionKind,
    ActionMode,
    ActionState,
    AuditEntry,
    Step,
    StepOp,
)
from fabricops.core.bus import DEFAULT_PREFIX, Bus, Message, Topic, record_headers, topic_name
from fabricops.core.busio import BusFrameSink, BusIntSink, publish_events
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.frame import Frame, Source
from fabricops.core.records import (
    Diagnosis,
    Event,
    EventKind,
    Evidence,
    RankedEntity,
    SamplingPolicy,
    Severity,
)
from fabricops.core.wire_compat import compile_protos
from fabricops.core.wire_schema import proto_files, schema_root, upper_snake
from tests.collectors.int_samples import COMMON_BITS, random_batch


@dataclass(frozen=True)
class Sent:
    """One record as published: what it is, its key and its ``source`` header."""

    record: Any
    key: bytes
    source: str


def publish_every_topic(bus: Bus, prefix: str = DEFAULT_PREFIX) -> dict[Topic, list[Sent]]:
    """Publish records on every topic through the producers' own paths; what was sent."""
    frame = Frame.build("leaf-0-3", 1_700_000_000_123_456_789, Source.GNMI, 42,
                        ["leaf-0-3:eth1", "leaf-0-3:eth2", "leaf-0-3:eth1"],
                        ["in_octets", "queue_depth_bytes", "oper_status"], [2**64 - 1, 12.5, 1])
    BusFrameSink(bus, prefix).publish_frames([frame])
    rng = np.random.default_rng(5)
    batch = random_batch(rng, 4, [1, 3, 2, 5], COMMON_BITS, sink=np.array([7, 9, 7, 9]),
                         ts_ns=np.arange(4) + 10**18)
    BusIntSink(bus, prefix).publish_int(batch)
    events = [Event(ts_ns=5, device="leaf-0-3", entity=entity, metric="in_errors",
                    kind=EventKind.THRESHOLD, value=3.5, severity=Severity.CRITICAL,
                    detail="over 1/s") for entity in ("leaf-0-3:eth1", "leaf-0-3:eth2")]
    publish_events(bus, events, source="pipeline", prefix=prefix)
    diagnosis = Diagnosis(
        id="dx-1", ts_ns=7, onset_ns=3, root="leaf-0-3:eth1~spine-0:eth4", root_kind="link",
        fault_type="fcs_errors", confidence=0.75,
        ranked=(RankedEntity(entity="leaf-0-3:eth1~spine-0:eth4", kind="link",
                             probability=0.75, fault_type="fcs_errors"),),
        evidence=(Evidence(entity="leaf-0-3:eth1", signal="fcs_error_ratio", value=0.01),
                  Evidence(entity="spine-0:eth4", signal="pause_share", value=0.2,
                           baseline=0.0)),
        missing=("leaf-0-3:eth9",), affected_hosts=("host-001",), affected_jobs=("job-1",),
        action="drain the link", model_version="m1")
    action = Action(
        id="act-1", diagnosis_id="dx-1", created_ns=8, ts_ns=9, kind=ActionKind.DRAIN_LINK,
        target=diagnosis.root, fault_type="fcs_errors", confidence=0.75, mode=ActionMode.AUTO,
        state=ActionState.APPLIED,
        steps=(Step(op=StepOp.SET_WEIGHT, target="leaf-0-3:eth1",
                    params={"weight": 0, "share": 0.5, "l4": True, "job": "job-1"}),),
        undo=(Step(op=StepOp.SET_WEIGHT, target="leaf-0-3:eth1", params={"weight": 1}),),
        affected_hosts=("host-001",), reason="fcs errors",
        audit=(AuditEntry(ts_ns=8, actor="policy", state=ActionState.PROPOSED),
               AuditEntry(ts_ns=9, actor="actuator:sim", state=ActionState.APPLIED,
                          note="weight 0")))
    policy = SamplingPolicy(device="leaf-0-3", interval_s=0.1, ts_ns=11, expires_ns=99,
                            reason="suspect")
    for topic, record, key, source in (
            (Topic.DIAGNOSES, diagnosis, diagnosis.root, "rca"),
            (Topic.ACTIONS, action, action.id, "remediation"),
            (Topic.CONTROL, policy, policy.device, "pipeline")):
        bus.publish(topic_name(topic, prefix), key.encode(), [record.encode()],
                    record_headers(topic, source))
    poison = Message(topic_name(Topic.TELEMETRY, prefix), 3, 17, b"leaf-0-3", b"\x00\xff", 0,
                     (("schema", b"fabricops.telemetry.v2.Frame"), ("source", b"gnmi")))
    DeadLetterBox(bus, "fabricops-pipeline", prefix=prefix).put(poison, "undecodable", "garbage")
    return {
        Topic.TELEMETRY: [Sent(frame, b"leaf-0-3", "gnmi")],
        Topic.INT: [Sent(batch.take([0, 2]), b"7", "int"), Sent(batch.take([1, 3]), b"9", "int")],
        Topic.EVENTS: [Sent(e, e.entity.encode(), "pipeline") for e in events],
        Topic.DIAGNOSES: [Sent(diagnosis, diagnosis.root.encode(), "rca")],
        Topic.ACTIONS: [Sent(action, b"act-1", "remediation")],
        Topic.CONTROL: [Sent(policy, b"leaf-0-3", "pipeline")],
        Topic.DEAD_LETTERS: [Sent(poison, poison.topic.encode(), "fabricops-pipeline")],
    }


def proto_file_of(schema: str) -> str:
    """The ``.proto`` file (relative to the schema root) that declares message ``schema``."""
    package = schema.rsplit(".", 1)[0]
    found = [f for f in proto_files() if f.startswith(package.replace(".", "/") + "/")]
    assert len(found) == 1, (schema, found)
    return found[0]


def compile_alone(protoc: str, schema: str, workdir: Path) -> Any:
    """The message class of ``schema``, from its ``.proto`` file alone: the file is copied
    into an empty directory, compiled by protoc and loaded into a pool of its own."""
    name = proto_file_of(schema)
    copy = workdir / name
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(str(schema_root() / name)), copy)
    out = workdir / "schema.binpb"
    compile_protos(protoc, workdir, [name], out)
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema))


def protoc_decode(protoc: str, schema: str, workdir: Path, value: bytes) -> str:
    """protoc's own text rendering of ``value`` as message ``schema`` (``--decode``)."""
    done = subprocess.run([protoc, f"-I{workdir}", f"--decode={schema}", proto_file_of(schema)],
                          cwd=workdir, input=value, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def plain(msg: Any) -> dict[str, Any]:
    """A decoded message as plain values, by the schema alone: enums by value name (its
    prefix dropped, lower case), unset optional fields and messages as None."""
    out: dict[str, Any] = {}
    for fd in msg.DESCRIPTOR.fields:
        value = getattr(msg, fd.name)
        entry = fd.message_type
        if entry is not None and entry.GetOptions().map_entry:
            out[fd.name] = {k: getattr(v, v.WhichOneof(v.DESCRIPTOR.oneofs[0].name))
                            for k, v in value.items()}
        elif fd.is_repeated:
            out[fd.name] = [_plain_value(fd, v) for v in value]
        elif fd.has_presence and not msg.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = _plain_value(fd, value)
    return out


def _plain_value(fd: Any, value: Any) -> Any:
    if fd.message_type is not None:
        return plain(value)
    if fd.enum_type is not None:
        name = fd.enum_type.values_by_number[value].name
        return name.removeprefix(upper_snake(fd.enum_type.name) + "_").lower()
    return value


def lists(value: Any) -> Any:
    """``value`` with every tuple a list (a model dump compared with ``plain``)."""
    if isinstance(value, dict):
        return {k: lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [lists(v) for v in value]
    return value


def expected_fields(topic: Topic, record: Any) -> dict[str, Any]:
    """What ``plain`` of the record's message must be."""
    if topic is Topic.TELEMETRY:
        return {"n_samples": record.n_samples, "device": record.device, "ts_ns": record.ts_ns,
                "source": record.source.value, "seq": record.seq,
                "entities": list(record.entities), "entity_idx": record.entity_idx.tolist(),
                "metric": record.metric.tolist(), "raw": record.raw.tolist()}
    if topic is Topic.INT:
        cols = {n: getattr(record, n).tolist() for n in record.__dataclass_fields__
                if n != "hop_start"}
        return {"n_reports": record.n_reports, "n_hops": record.n_hops, **cols}
    if topic is Topic.DEAD_LETTERS:  # its ts_ns is when it was set aside
        return {"topic": record.topic, "partition": record.partition, "offset": record.offset,
                "group": "fabricops-pipeline", "reason": "undecodable", "detail": "garbage",
                "key": record.key, "value": record.value,
                "headers": [{"key": k, "value": v} for k, v in record.headers]}
    expected: dict[str, Any] = lists(record.model_dump())  # StrEnum members equal their values
    return expected
