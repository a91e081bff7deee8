"""A target that sends each sample instant as several notifications (one per
interface or container, one timestamp), over real gRPC: the collector sends each
instant as one frame, and the pipeline stores every sample of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.collectors.gnmi_config import GnmiEndpoint
from fabricops.collectors.gnmi_instant import SINGLE_INSTANTS, HeldInstant
from fabricops.collectors.gnmi_mapping import NotificationMapper
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.pipeline.keyframe import decode_block
from fabricops.store.store import Store, StoreConfig
from tests.collectors.gnmi_replay import REPLAY_TS_NS, ReplayTarget, load_replay, notification
from tests.collectors.test_gnmi_dialects import DEV, DIALECTS, collecting, counter, wait
from tests.pipeline.conftest import bare_worker, messages

PORTS = ("Ethernet1", "Ethernet2", "Ethernet3")
S = 10**9


def port_note(port: str, t_s: int) -> bytes:
    note: dict[str, Any] = {
        "prefix": {"path": f"/interfaces/interface[name={port}]/state"},
        "timestamp": REPLAY_TS_NS + t_s * S,
        "update": [{"path": "counters/in-octets", "uint": 1000 * t_s + int(port[-1])},
                   {"path": "oper-status", "string": "UP"}]}
    return gnmi_pb2.SubscribeResponse(update=notification(note)).SerializeToString()


def samples(frames: list[Frame]) -> set[tuple[int, str, str, float]]:
    """(s after the first instant, entity, metric, value) of every sample of ``frames``."""
    return {((f.ts_ns - REPLAY_TS_NS) // S, f.entities[e].removeprefix(f"{DEV}:"),
             CATALOGUE.by_id(m).name, v)
            for f in frames
            for e, m, v in zip(f.entity_idx.tolist(), f.metric.tolist(), f.values().tolist(),
                               strict=True)}


def test_each_instant_goes_out_as_one_frame_the_last_one_after_the_hold() -> None:
    # two instants of a notification per port; no sync_response and nothing after the
    # second: it goes out when its hold ends
    target = ReplayTarget([port_note(p, t) for t in (0, 1) for p in PORTS]).start()
    try:
        with collecting(GnmiEndpoint(device=DEV, address=target.address),
                        join_hold_s=0.2) as (collector, sink):
            wait(lambda: len(sink.frames) >= 2)
            frames = list(sink.frames)
    finally:
        target.stop()
    assert [((f.ts_ns - REPLAY_TS_NS) // S, f.seq) for f in frames] == [(0, 0), (1, 1)]
    assert [f.entities for f in frames] == [tuple(f"{DEV}:{p}" for p in PORTS)] * 2
    assert samples(frames) == {(t, p, m, v) for t in (0, 1) for p in PORTS for m, v in (
        ("in_octets", 1000 * t + int(p[-1])), ("oper_status", 1))}
    assert counter(collector, "fabricops_gnmi_notifications_joined_total") == 4
    assert counter(collector, "fabricops_gnmi_frames_total") == 2
    assert collector.status()[DEV].frames == 2


def test_a_target_that_sends_instants_whole_is_not_held_up_until_it_splits_one() -> None:
    held, sent = HeldInstant(), []

    def receive(t_s: int, port: str) -> None:
        frame = Frame.build(DEV, REPLAY_TS_NS + t_s * S, "gnmi", 0, [port], ["in_octets"], [1])
        if not held.belongs(frame):
            sent.append(held.take())
        held.add(frame, 0)
        if not held.waits:
            sent.append(held.take())

    for t_s in range(SINGLE_INSTANTS + 1):  # whole instants: held until the next comes...
        receive(t_s, "eth1")
    assert [len(parts) for parts in sent] == [1] * (SINGLE_INSTANTS + 1), \
        "...then the last goes out at once"
    receive(9, "eth1")
    receive(9, "eth2")  # a part of the instant just sent: held again from then on
    receive(10, "eth1")
    receive(10, "eth2")
    receive(11, "eth1")
    assert [[p.entities for p in parts] for parts in sent[-3:]] == [
        [("eth1",)], [("eth2",)], [("eth1",), ("eth2",)]]
    assert held.parts
    assert held.waits


def test_a_whole_instant_goes_out_at_once_once_the_target_is_known_for_them() -> None:
    notes = [port_note("Ethernet1", t) for t in range(SINGLE_INSTANTS + 1)]
    target = ReplayTarget(notes).start()
    try:
        with collecting(GnmiEndpoint(device=DEV, address=target.address,
                                     sample_interval_s=60.0),
                        join_hold_s=1.0) as (collector, sink):
            wait(lambda: len(sink.frames) == SINGLE_INSTANTS + 1)
    finally:
        target.stop()
    # each instant went out when the next came, the last at once: none waited its 1 s
    quick = collector.registry.get_sample_value("fabricops_gnmi_publish_lag_seconds_bucket",
                                                {"le": "0.5"})
    assert quick == SINGLE_INSTANTS + 1
    assert counter(collector, "fabricops_gnmi_notifications_joined_total") == 0


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_dialects_instant_is_stored_whole_by_the_pipeline(dialect: str,
                                                             tmp_path: Path) -> None:
    replay = load_replay(dialect)
    target = ReplayTarget(replay.responses).start()
    try:
        with collecting(GnmiEndpoint(device=DEV, address=target.address, profile=dialect)
                        ) as (collector, sink):
            wait(lambda: collector.status()[DEV].synced)
            frames = list(sink.frames)
    finally:
        target.stop()
    mapper = NotificationMapper(DEV, dialect)
    parts = sum(mapper.map(n, seq=0, received_ns=1).frame is not None
                for n in replay.notifications)
    assert parts > 1, "the replay sends its instant in parts"
    assert len(frames) == 1, "one instant, one frame"
    assert counter(collector, "fabricops_gnmi_notifications_joined_total") == parts - 1
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'fabricops.db'}"))
    store.start()
    try:
        worker = bare_worker(store)
        result = worker.process(messages(*frames))
        assert result.rejected == {}
        worker.flush()
        (segment,) = store.segments(t0_ns=0, t1_ns=2**62)
        block = decode_block(segment.payload)
    finally:
        store.stop()
    kept = {(e.removeprefix(f"{DEV}:"), CATALOGUE.by_id(int(m)).name)
            for e, m in zip(block.entity, block.metric.tolist(), strict=True)}
    assert kept == {(p, m) for _, p, m, _ in samples(frames)}
    assert block.present.all()
