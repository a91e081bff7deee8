"""A poison record of each kind on every topic, with every consumer of the platform
running on one bus: every worker stays alive, every poison record reaches the
dead-letter topic from each group that read it, and no valid record is lost."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fabricops.api.alert_config import AlertReceiver
from fabricops.api.alerts import AlertDispatcher, AlertsConfig
from fabricops.api.fabric_metrics import FabricMetrics, FabricMetricsConfig
from fabricops.collectors.policy import PolicyListener
from fabricops.core import frame_codec
from fabricops.core.actions import Action, ActionKind, ActionMode
from fabricops.core.bus import DEFAULT_PREFIX, Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.deadletter import DeadLetter
from fabricops.core.frame import Frame
from fabricops.core.liveness import Liveness
from fabricops.core.membus import MemoryBus
from fabricops.core.records import Diagnosis, SamplingPolicy
from fabricops.core.wire_schema import message_class
from fabricops.pipeline.keyframe import decode_block
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.rca.service import RcaService, RcaServiceConfig
from fabricops.remediation.actuator import Actuators
from fabricops.remediation.engine import RemediationConfig, RemediationEngine
from fabricops.remediation.service import RemediationService, RemediationServiceConfig
from fabricops.remediation.watch import FabricWatch
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig
from tests.collectors.int_samples import random_batch


def _poison(valid: bytes, *, wrong_version: bytes, out_of_range: bytes) -> dict[str, bytes]:
    """Records each consumer of a topic must set aside: bytes that are no protobuf message,
    the topic's previous encoding, a record cut short, values out of range, and the three
    ways a protobuf record breaks (a varint cut short, a length past the end, a field of
    the wrong wire type)."""
    return {"garbage": b"\x00\xffgarbage\x13", "wrong_version": wrong_version,
            "truncated": valid[:3], "out_of_range": out_of_range,
            "truncated_varint": b"\x08\xff", "length_past_end": b"\x12\x50ab",
            "wrong_wire_type": b"\x0d\x00\x00\x00\x00"}


def _message(record: Any) -> Any:
    """``record`` as a message of the protobuf runtime, built from the schema."""
    return message_class(record.SCHEMA).FromString(record.encode())


def _frame_poison(frame: Frame) -> dict[str, bytes]:
    old = bytearray(frame_codec.encode(frame))
    old[3] = 99  # the legacy codec's version byte
    negative_ts = message_class(Topic.TELEMETRY.schema).FromString(frame.encode())
    negative_ts.ts_ns = -5
    return _poison(frame.encode(), wrong_version=bytes(old),
                   out_of_range=negative_ts.SerializeToString())


def _int_poison() -> dict[str, bytes]:
    rng = np.random.default_rng(1)
    valid = random_batch(rng, 1, 3, 0xFD00).encode()
    far = message_class(Topic.INT.schema).FromString(valid)
    far.ts_ns[0] = 2**63 + 5
    return _poison(valid, wrong_version=b"FOI\x01\x01\x00\x00\x00\x00\x00\x00\x00",
                   out_of_range=far.SerializeToString())


def _record_poison(record: Any, field: str, bad: Any) -> dict[str, bytes]:
    out_of_range = _message(record)
    setattr(out_of_range, field, bad)
    return _poison(record.encode(), wrong_version=b'{"schema": 99}',
                   out_of_range=out_of_range.SerializeToString())


def _diagnosis() -> Diagnosis:
    return Diagnosis(id="dx-1", ts_ns=1, onset_ns=1, root="leaf-0-0", root_kind="switch",
                     fault_type="link_flap", confidence=0.5)


def _action() -> Action:
    return Action(id="act-1", diagnosis_id="dx-1", created_ns=1, ts_ns=1,
                  kind=ActionKind.TICKET, target="leaf-0-0", fault_type="link_flap",
                  confidence=0.5, mode=ActionMode.OBSERVE)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'f.db'}"))
    s.start()
    yield s  # type: ignore[misc]
    s.stop()


def test_every_worker_survives_every_poison_record_and_no_valid_record_is_lost(
    store: Store,
) -> None:
    topo = fat_tree(k=4)
    sim = Simulator(topo, SimConfig(seed=2))
    sim.add_job(JobSpec(hosts=12, placement="random", compute_s=0.2, comm_bytes_per_nic=3e10))
    bus = MemoryBus()
    bus.start()
    liveness = Liveness()
    pipeline = PipelineWorker(PipelineConfig(max_future_s=1e9, poll_timeout_s=0.05), bus,
                              store, liveness=liveness)
    rca = RcaService(RcaServiceConfig(), bus, topo, None, store, liveness=liveness)
    engine = RemediationEngine(RemediationConfig.model_validate(
        {"safety": {"mode": ActionMode.OBSERVE}}), topo, Actuators({}), FabricWatch(topo))
    remediation = RemediationService(RemediationServiceConfig(), bus, engine, store,
                                     liveness=liveness)
    receiver = AlertReceiver(name="chatops", url="http://127.0.0.1:9/hook", secret="k")
    alerts = AlertDispatcher(AlertsConfig(receivers=(receiver,)), bus, store,
                             liveness=liveness)
    metrics = FabricMetrics(FabricMetricsConfig(), bus, topo, liveness=liveness)
    policy = PolicyListener(bus, [], group="collector", liveness=liveness)
    workers = [pipeline, rca, remediation, alerts, metrics, policy]

    sink = BusFrameSink(bus)
    sent: set[tuple[str, str, int]] = set()

    def tick(n: int) -> None:
        for _ in range(n):
            sim.step()
            frames = sim.frames()
            sent.update((f.device, f.source.value, f.ts_ns) for f in frames)
            sink.publish_frames(frames)

    tick(5)
    policy = SamplingPolicy(device="leaf-0-0", interval_s=1.0, ts_ns=1)
    poison = {
        Topic.TELEMETRY: _frame_poison(sim.frames()[0]),
        Topic.INT: _int_poison(),
        Topic.CONTROL: _record_poison(policy, "interval_s", -1.0),
        Topic.DIAGNOSES: _record_poison(_diagnosis(), "confidence", 7.5),
        Topic.ACTIONS: _record_poison(_action(), "state", 99),
    }
    for topic, records in poison.items():
        bus.publish(topic_name(topic), b"poison", list(records.values()))
    for w in workers:
        w.start()
    tick(30)
    readers = {Topic.TELEMETRY: ["fabricops-pipeline", "fabricops-rca", "fabricops-remediation",
                                 "fabricops-metrics"],
               Topic.INT: ["fabricops-pipeline", "fabricops-rca", "fabricops-remediation"],
               Topic.CONTROL: ["collector"],
               Topic.DIAGNOSES: ["fabricops-remediation", "fabricops-alerts"],
               Topic.ACTIONS: ["fabricops-alerts"]}
    try:
        _wait_until_read(bus, readers)
        assert liveness.dead_workers() == []
        assert {s.name for s in liveness.states()} == {
            "pipeline-worker", "rca", "remediation", "alerts", "fabric-metrics",
            "policy-listener"}
    finally:
        for w in workers:
            w.stop()
    assert _behind(bus, readers, bus.committed) == {}, "stopping commits all that was read"

    letters = Counter((d.group, d.topic, d.value) for d in _dead_letters(bus))
    for topic, groups in readers.items():
        for group in groups:
            for kind, value in poison[topic].items():
                assert letters[(group, topic_name(topic), value)] == 1, (
                    f"{group} did not set aside the {kind} record of {topic}")
    stored = {(s.device, s.source, t) for s in store.segments(t0_ns=0, t1_ns=2**62)
              for t in decode_block(s.payload).ts_ns.tolist()}
    assert sent <= stored, f"{len(sent - stored)} valid frames lost"


def _behind(bus: MemoryBus, readers: dict[Topic, list[str]],
            offsets: Callable[[str, str], dict[int, int]]) -> dict[tuple[str, str], object]:
    """(group, topic) -> (its offsets, the end offsets), where it is not at the end."""
    out: dict[tuple[str, str], object] = {}
    for t, gs in readers.items():
        end = bus.end_offsets(topic_name(t))
        for g in gs:
            at = offsets(g, topic_name(t))
            if sum(at.values()) < sum(end):
                out[(g, t.value)] = (at, end)
    return out


def _wait_until_read(bus: MemoryBus, readers: dict[Topic, list[str]],
                     timeout_s: float = 30.0) -> None:
    """Until every group has read to the end of every topic it reads (or time runs out);
    the pipeline commits only the frames of the windows it has written."""
    done = threading.Event()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _behind(bus, readers, bus.read_positions):
            return
        done.wait(0.1)
    raise AssertionError("the consumers did not read every record in time: "
                         f"{_behind(bus, readers, bus.read_positions)}")


def _dead_letters(bus: MemoryBus) -> list[DeadLetter]:
    consumer = bus.subscribe([topic_name(Topic.DEAD_LETTERS, DEFAULT_PREFIX)], "reader")
    return [DeadLetter.decode(m.value) for m in consumer.poll(1.0, 100_000)]
