"""The simulated gNMI target on a board fed by hand, what a subscription sends frame by
frame, and path patterns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from pydantic import SecretStr
from pygnmi.client import gNMIclient, gNMIException
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.openconfig import (
    OPENCONFIG,
    PathSyntaxError,
    format_path,
    matches,
    parse_path,
)
from fabricops.core.topology import Topology
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.gnmi_encode import (
    JSON_IETF,
    LeafTables,
    encode_notification,
    prefix_bytes,
    value_encoder,
)
from fabricops.simulator.agents.gnmi_set import RecordingSetHandler
from fabricops.simulator.agents.gnmi_stream import StreamState, subscriptions_of
from fabricops.simulator.agents.gnmi_target import GnmiTarget, GnmiTargetConfig
from fabricops.simulator.engine import Simulator

from .conftest import PYGNMI_STREAM, _gnmi_path, _updates, streaming_sim

TICK_NS = 1_000_000_000


# Targets without a running simulation: a board fed by hand.

@pytest.fixture
def fed(fabric: Topology) -> Iterator[tuple[Simulator, FrameBoard, GnmiTarget]]:
    sim, board = streaming_sim(fabric), FrameBoard()
    sim.step()
    board.publish(sim.frames())
    config = GnmiTargetConfig(username="admin", password=SecretStr("s3cret"))
    target = GnmiTarget(config, board, [n.id for n in fabric.switches()],
                        RecordingSetHandler())
    target.start()
    try:
        yield sim, board, target
    finally:
        target.stop()


def test_set_and_get_of_the_ecmp_hash_fields(
    fed: tuple[Simulator, FrameBoard, GnmiTarget],
) -> None:
    _, _, target = fed
    handler = target.set_handler
    assert isinstance(handler, RecordingSetHandler)
    state = "/ecmp/hash/state/include-l4"
    with gNMIclient(target=("127.0.0.1", target.port), insecure=True, username="admin",
                    password="s3cret") as client:
        before = _updates(client.get(path=[state], target="leaf-1", encoding="proto"))
        result = client.set(update=[("/ecmp/hash/config/include-l4", False)], target="leaf-1")
        after = _updates(client.get(path=["/ecmp"], target="leaf-1", encoding="json_ietf"))
        client.set(replace=[("/ecmp/hash/config", {"include-l4": True})], target="spine-0")
        with pytest.raises(gNMIException, match="needs a boolean include-l4"):
            client.set(update=[("/ecmp/hash/config/include-l4", "l3")], target="leaf-1")
        with pytest.raises(gNMIException, match="/ecmp/hash/state/include-l4 has"):
            client.get(path=["/ecmp/hash/config"], target="leaf-1", encoding="proto")
        with pytest.raises(gNMIException, match="target 'leaf-99' is not served"):
            client.set(update=[("/ecmp/hash/config/include-l4", True)], target="leaf-99")
    assert list(before.values()) == [True]
    assert after == {"ecmp/hash/state/include-l4": False}
    assert handler.hash_l4 == {"leaf-1": False, "spine-0": True}
    assert result["response"] == [{"path": "ecmp/hash/config/include-l4", "op": "UPDATE"}]


def test_credentials_are_checked(fed: tuple[Simulator, FrameBoard, GnmiTarget]) -> None:
    _, _, target = fed
    wrong = gNMIclient(target=("127.0.0.1", target.port), insecure=True,
                       username="admin", password="guess")
    with pytest.raises(gNMIException, match="invalid username or password"):
        wrong.connect()
    wrong.close()
    with gNMIclient(target=("127.0.0.1", target.port), insecure=True, username="admin",
                    password="s3cret") as client:
        assert client.capabilities()["gnmi_version"] == "0.8.0"


@PYGNMI_STREAM
def test_stream_sample_follows_the_interval_in_device_time(
    fed: tuple[Simulator, FrameBoard, GnmiTarget],
) -> None:
    """A 30 s SAMPLE subscription sends every 30th 1 s tick, however fast the ticks come.

    The test feeds the board itself, as fast as it can step the simulator, and waits for
    each due notification before the next tick: the device's clock alone paces the stream,
    and a loaded machine cannot make it skip a tick. Pacing by the wall clock would need
    30 s for each notification; the 10 s timeout catches that.
    """
    sim, board, target = fed
    interval_ticks = 30
    request = {"mode": "stream", "encoding": "proto", "subscription": [
        {"path": "/interfaces/interface[name=eth1]/state/counters", "mode": "sample",
         "sample_interval": interval_ticks * TICK_NS}]}
    with gNMIclient(target=("127.0.0.1", target.port), insecure=True, username="admin",
                    password="s3cret") as client:
        stream = client.subscribe2(subscribe=request, target="leaf-0")
        first = stream.get_update(timeout=10)
        t0 = first["update"]["timestamp"]
        since_first, octets = [], []
        for tick in range(1, 3 * interval_ticks + 1):
            sim.step()
            board.publish(sim.frames())
            if tick % interval_ticks == 0:
                update = stream.get_update(timeout=10)["update"]
                since_first.append(update["timestamp"] - t0)
                octets += [u["val"] for u in update["update"] if u["path"].endswith("in-octets")]
        stream.close()
    assert first["sync_response"] is True
    assert len(first["update"]["update"]) == 9
    assert since_first == [30 * TICK_NS, 60 * TICK_NS, 90 * TICK_NS]
    assert octets == sorted(octets)
    assert len(set(octets)) == 3


def test_a_switch_without_frames_is_unavailable_even_mid_stream(
    fed: tuple[Simulator, FrameBoard, GnmiTarget],
) -> None:
    sim, board, target = fed
    metadata = (("username", "admin"), ("password", "s3cret"))
    request = gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(
        prefix=gnmi_pb2.Path(target="leaf-1"), encoding=gnmi_pb2.PROTO,
        subscription=[gnmi_pb2.Subscription(path=gnmi_pb2.Path(), mode=gnmi_pb2.SAMPLE)]))
    with grpc.insecure_channel(target.address) as channel:
        stream = gnmi_pb2_grpc.gNMIStub(channel).Subscribe(iter([request]), metadata=metadata,
                                                          timeout=10)
        assert next(stream).HasField("update")
        assert next(stream).sync_response
        sim.step()
        board.publish([f for f in sim.frames() if f.device != "leaf-1"])
        with pytest.raises(grpc.RpcError) as err:
            list(stream)
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "'leaf-1' is down" in err.value.details()


def test_encoded_notifications_parse_as_gnmi(fabric: Topology) -> None:
    sim = streaming_sim(fabric)
    sim.step()
    frame = next(f for f in sim.frames() if f.device == "leaf-0")
    table = LeafTables(OPENCONFIG).of(frame)
    indices = table.select(parse_path("/interfaces/interface[name=eth3]"))
    for encoding in (gnmi_pb2.PROTO, JSON_IETF):
        data = encode_notification(table, frame.raw, indices, frame.ts_ns,
                                   prefix_bytes("leaf-0"), value_encoder(encoding))
        note = gnmi_pb2.Notification.FromString(data)
        assert note.timestamp == frame.ts_ns
        assert note.prefix.target == "leaf-0"
        by_leaf = {u.path.elem[-1].name: u.val for u in note.update}
        octets = int(frame.raw[indices[0]])
        status = by_leaf["oper-status"]
        if encoding == gnmi_pb2.PROTO:
            assert by_leaf["in-octets"].uint_val == octets
            assert status.string_val == "UP"
        else:
            assert by_leaf["in-octets"].json_ietf_val == f'"{octets}"'.encode()
            assert status.json_ietf_val == b'"UP"'
    assert CATALOGUE.by_id(int(frame.metric[indices[0]])).name == "in_octets"


# What a subscription sends, frame by frame (no transport).

def _frames(fabric: Topology, ticks: int) -> list[Any]:
    sim = streaming_sim(fabric)
    out = []
    for _ in range(ticks):
        sim.step()
        out.append(next(f for f in sim.frames() if f.device == "leaf-0"))
    return out


def _sub_list(*subs: Any, mode: int = gnmi_pb2.SubscriptionList.STREAM) -> Any:
    return gnmi_pb2.SubscriptionList(prefix=gnmi_pb2.Path(target="leaf-0"), mode=mode,
                                     encoding=gnmi_pb2.PROTO, subscription=list(subs))


def _sent(state: StreamState, frames: list[Any]) -> list[tuple[int, set[str]]]:
    """(second of the frame, leaf names sent) for each frame after the first that sent any."""
    out = []
    state.snapshot(frames[0])
    for frame in frames[1:]:
        data = state.step(frame)
        if data is not None:
            note = gnmi_pb2.Notification.FromString(data)
            second = (frame.ts_ns - frames[0].ts_ns) // TICK_NS
            out.append((second, {u.path.elem[-1].name for u in note.update}))
    return out


def test_sample_runs_on_device_time_and_on_change_sends_changes(fabric: Topology) -> None:
    frames = _frames(fabric, 10)
    tables = LeafTables(OPENCONFIG)
    counters = _gnmi_path("/interfaces/interface[name=eth1]/state/counters/in-octets")
    status = _gnmi_path("/interfaces/interface[name=eth1]/state/oper-status")
    sample = gnmi_pb2.Subscription(path=counters, mode=gnmi_pb2.SAMPLE,
                                   sample_interval=3 * TICK_NS)
    on_change = gnmi_pb2.Subscription(path=status, mode=gnmi_pb2.ON_CHANGE,
                                      heartbeat_interval=4 * TICK_NS)
    state = StreamState("leaf-0", subscriptions_of(_sub_list(sample, on_change), 5 * TICK_NS),
                        tables)
    assert _sent(state, frames) == [(3, {"in-octets"}), (4, {"oper-status"}),
                                    (6, {"in-octets"}), (8, {"oper-status"}),
                                    (9, {"in-octets"})]
    defined = gnmi_pb2.Subscription(path=_gnmi_path("/interfaces/interface[name=eth1]/state"))
    state = StreamState("leaf-0", subscriptions_of(_sub_list(defined), 5 * TICK_NS), tables)
    assert [s for s, _ in _sent(state, frames)] == [5]
    quiet = gnmi_pb2.Subscription(path=status, mode=gnmi_pb2.SAMPLE, suppress_redundant=True)
    state = StreamState("leaf-0", subscriptions_of(_sub_list(quiet), 5 * TICK_NS), tables)
    assert _sent(state, frames) == []


@pytest.mark.parametrize(("pattern", "leaf", "hit"), [
    ("/interfaces", "/interfaces/interface[name=eth1]/state/oper-status", True),
    ("/interfaces/interface[name=*]/state", "/interfaces/interface[name=eth1]/state/mtu", True),
    ("/interfaces/interface/state", "/interfaces/interface[name=eth1]/state/mtu", True),
    ("/interfaces/interface[name=eth2]", "/interfaces/interface[name=eth1]/state", False),
    ("/*/interface[name=eth1]/state", "/interfaces/interface[name=eth1]/state/x", True),
    ("/.../oper-status", "/interfaces/interface[name=eth1]/state/oper-status", True),
    ("/.../in-octets", "/interfaces/interface[name=eth1]/state/oper-status", False),
    ("/openconfig-interfaces:interfaces", "/interfaces/interface[name=eth1]/state", True),
    ("/", "/components/component[name=eth1]", True),
    ("/interfaces/interface[name=eth1]/state/oper-status", "/interfaces/interface[name=eth1]",
     False),
])
def test_path_patterns(pattern: str, leaf: str, hit: bool) -> None:
    assert matches(parse_path(pattern), parse_path(leaf)) is hit


def test_path_text_round_trips_with_escapes() -> None:
    text = r"/a/b[name=Ethernet1/1][x=a\]b]/c"
    assert format_path(parse_path(text)) == text
    assert parse_path(text)[1].key("name") == "Ethernet1/1"
    with pytest.raises(PathSyntaxError, match="not closed"):
        parse_path("/a/b[name=x")
