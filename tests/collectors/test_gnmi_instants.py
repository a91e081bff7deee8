"""A target that sends each sample instant as several notifications (one per
interface or container, one timestamp), over real gRPC: the collector sends each
instant as one frame, and the pipeline stores every sample of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.collectors.collection import gnmi_endpoints
from fabricops.collectors.gnmi_config import GnmiEndpoint
from fabricops.collectors.gnmi_instant import SINGLE_INSTANTS, HeldInstant
from fabricops.collectors.gnmi_mapping import NotificationMapper
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.inventory import InventoryError, inventory_from_dict
from fabricops.pipeline.keyframe import decode_block
from fabricops.store.store import Store, StoreConfig
from tests.collectors.gnmi_replay import REPLAY_TS_NS, ReplayTarget, load_replay, notification
from tests.collectors.test_gnmi_dialects import DEV, DIALECTS, collecting, counter, wait
from tests.pipeline.conftest import bare_worker, messages

PORTS = ("Ethernet1", "Ethernet2", "Ethernet3")
S = 10**9


def port_note(port: str, t_s: int, apart_ns: int = 0) -> bytes:
    """Port ``port``'s notification of instant ``t_s``, stamped ``apart_ns`` a port later
    than the port before it."""
    note: dict[str, Any] = {
        "prefix": {"path": f"/interfaces/interface[name={port}]/state"},
        "timestamp": REPLAY_TS_NS + t_s * S + int(port[-1]) * apart_ns,
        "update": [{"path": "counters/in-octets", "uint": 1000 * t_s + int(port[-1])},
                   {"path": "oper-status", "string": "UP"}]}
    return gnmi_pb2.SubscribeResponse(update=notification(note)).SerializeToString()


def samples(frames: list[Frame]) -> set[tuple[int, str, str, float]]:
    """(s after the first instant, entity, metric, value) of every sample of ``frames``."""
    return {(round((f.ts_ns - REPLAY_TS_NS) / S), f.entities[e].removeprefix(f"{DEV}:"),
             CATALOGUE.by_id(m).name, v)
            for f in frames
            for e, m, v in zip(f.entity_idx.tolist(), f.metric.tolist(), f.values().tolist(),
                               strict=True)}


@pytest.mark.parametrize(("apart_ns", "within_s"), [(0, 0.0), (1_000_000, 0.01)])
def test_a_split_instant_goes_out_as_one_frame_the_last_one_after_the_hold(
        apart_ns: int, within_s: float) -> None:
    # three instants of a notification per port (stamped alike, or 1 ms apart and
    # joined within 10 ms); no sync_response and nothing after the third: it goes out
    # when its hold ends
    target = ReplayTarget([port_note(p, t, apart_ns) for t in (0, 1, 2) for p in PORTS]).start()
    try:
        with collecting(GnmiEndpoint(device=DEV, address=target.address,
                                     join_within_s=within_s),
                        join_hold_s=0.2) as (collector, sink):
            wait(lambda: len(sink.frames) >= 4)
            frames = list(sink.frames)
    finally:
        target.stop()
    # the first notification went out at once (the target was not known to split its
    # instants); the second, of the same instant, made it held from then on
    # each at the time of its instant's first notification
    assert [(f.ts_ns - REPLAY_TS_NS - apart_ns, f.entities) for f in frames] == [
        (0, (f"{DEV}:Ethernet1",)), (0, (f"{DEV}:Ethernet2", f"{DEV}:Ethernet3")),
        (S, tuple(f"{DEV}:{p}" for p in PORTS)), (2 * S, tuple(f"{DEV}:{p}" for p in PORTS))]
    assert [f.seq for f in frames] == [0, 1, 2, 3]
    assert samples(frames) == {(t, p, m, v) for t in (0, 1, 2) for p in PORTS for m, v in (
        ("in_octets", 1000 * t + int(p[-1])), ("oper_status", 1))}
    assert counter(collector, "fabricops_gnmi_notifications_joined_total") == 5
    assert counter(collector, "fabricops_gnmi_frames_total") == 4
    assert collector.status()[DEV].frames == 4


def test_a_target_is_held_once_it_splits_an_instant_until_it_sends_them_whole() -> None:
    held, sent = HeldInstant(), []

    def receive(t_s: int, port: str) -> None:
        frame = Frame.build(DEV, REPLAY_TS_NS + t_s * S, "gnmi", 0, [port], ["in_octets"], [1])
        if not held.belongs(frame):
            sent.append(held.take())
        held.add(frame, 0)
        if not held.waits:
            sent.append(held.take())

    receive(0, "eth1")
    receive(1, "eth1")  # whole instants go out at once
    assert [[p.entities for p in parts] for parts in sent] == [[("eth1",)], [("eth1",)]]
    receive(1, "eth2")  # a part of the instant just sent: held from then on
    receive(2, "eth1")
    receive(2, "eth2")
    receive(3, "eth1")
    assert [[p.entities for p in parts] for parts in sent[2:]] == [
        [("eth2",)], [("eth1",), ("eth2",)]]
    assert held.waits
    for t_s in range(4, 4 + SINGLE_INSTANTS):  # whole instants, held until the next...
        receive(t_s, "eth1")
    assert [len(parts) for parts in sent[4:]] == [1] * (SINGLE_INSTANTS + 1)
    assert not held.waits, "...then at once again (the last)"
    assert not held.parts


def test_parts_stamped_apart_within_the_bound_are_one_instant_at_its_first_time() -> None:
    held, ms = HeldInstant(), 1_000_000

    def frame(at_ns: int, port: str) -> Frame:
        return Frame.build(DEV, REPLAY_TS_NS + at_ns, "gnmi", 0, [port], ["in_octets"], [1])

    held.add(frame(0, "eth1"), 0, 10 * ms)
    taken = held.take()  # went out at once: the target was not seen to split
    assert [f.ts_ns - REPLAY_TS_NS for f in taken] == [0]
    assert held.belongs(frame(4 * ms, "eth2"), 10 * ms)
    held.add(frame(4 * ms, "eth2"), 0, 10 * ms)  # a part of the instant just sent
    assert held.waits
    for at_ns, port in ((9 * ms, "eth3"), (-3 * ms, "eth4")):
        assert held.belongs(frame(at_ns, port), 10 * ms)
        held.add(frame(at_ns, port), 0, 10 * ms)
    assert not held.belongs(frame(11 * ms, "eth5"), 10 * ms)
    assert not held.belongs(frame(4 * ms, "eth5"), 0), "0: one timestamp only"
    assert [(f.ts_ns - REPLAY_TS_NS, f.entities) for f in held.take()] == [
        (0, ("eth2",)), (0, ("eth3",)), (0, ("eth4",))], "at the time of the instant sent"


def test_a_target_that_sends_its_instants_whole_is_never_held() -> None:
    target = ReplayTarget([port_note("Ethernet1", t) for t in range(4)]).start()
    try:
        with collecting(GnmiEndpoint(device=DEV, address=target.address,
                                     sample_interval_s=60.0),
                        join_hold_s=1.0) as (collector, sink):
            wait(lambda: len(sink.frames) == 4)
    finally:
        target.stop()
    # each instant went out as it came: none waited its 1 s hold
    quick = collector.registry.get_sample_value("fabricops_gnmi_publish_lag_seconds_bucket",
                                                {"le": "0.5"})
    assert quick == 4
    assert counter(collector, "fabricops_gnmi_notifications_joined_total") == 0


def test_an_inventory_sets_how_far_apart_a_targets_notifications_join() -> None:
    def target(**gnmi: Any) -> dict[str, Any]:
        return {"device": "sw1", "protocol": "gnmi", "address": "10.0.0.1:57400",
                "gnmi": gnmi}

    (endpoint,) = gnmi_endpoints(inventory_from_dict({"targets": [
        target(profile="srlinux", join_within_s=0.005)]}))
    assert endpoint.join_within_s == 0.005
    (default,) = gnmi_endpoints(inventory_from_dict({"targets": [target()]}))
    assert default.join_within_s == 0.0
    with pytest.raises(InventoryError, match="join_within_s"):
        inventory_from_dict({"targets": [target(join_within_s=0.5)]})


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
    # the first part went out alone, the rest joined once the target showed it splits
    assert len(frames) == 2
    assert len({f.ts_ns for f in frames}) == 1
    assert counter(collector, "fabricops_gnmi_notifications_joined_total") == parts - 2
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'fabricops.db'}"))
    store.start()
    try:
        worker = bare_worker(store)
        result = worker.process(messages(*frames))
        assert (result.joined, result.rejected) == (1, {})
        worker.flush()
        (segment,) = store.segments(t0_ns=0, t1_ns=2**62)
        block = decode_block(segment.payload)
    finally:
        store.stop()
    kept = {(e.removeprefix(f"{DEV}:"), CATALOGUE.by_id(int(m)).name)
            for e, m in zip(block.entity, block.metric.tolist(), strict=True)}
    assert kept == {(p, m) for _, p, m, _ in samples(frames)}
    assert block.present.all()
