"""The simulated gNMI target, checked with pygnmi (an independent client) and raw stubs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry
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
from fabricops.simulator.agents.driver import DriverConfig, SimulationDriver
from fabricops.simulator.agents.gnmi_encode import (
    JSON_IETF,
    LeafTables,
    encode_notification,
    prefix_bytes,
    value_encoder,
)
from fabricops.simulator.agents.gnmi_set import DriverSetHandler, RecordingSetHandler
from fabricops.simulator.agents.gnmi_stream import StreamState, subscriptions_of
from fabricops.simulator.agents.gnmi_target import GnmiTarget, GnmiTargetConfig
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec

SPEED = 20.0  # 1 s ticks, 50 ms of wall time each
TICK_NS = 1_000_000_000
# pygnmi's reader thread raises CANCELLED when its channel closes before the stream's end.
PYGNMI_STREAM = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnhandledThreadExceptionWarning")
IF_LEAVES = {"in-octets": "in_octets", "out-octets": "out_octets",
             "in-unicast-pkts": "in_pkts", "carrier-transitions": "carrier_transitions"}


@pytest.fixture(scope="module")
def fabric() -> Topology:
    return leaf_spine(gpus=64)


def streaming_sim(fabric: Topology) -> Simulator:
    sim = Simulator(fabric, SimConfig(seed=5))
    sim.add_job(JobSpec(hosts=8, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    return sim


@dataclass
class Running:
    board: FrameBoard
    driver: SimulationDriver
    target: GnmiTarget
    registry: CollectorRegistry

    def client(self, **kwargs: Any) -> gNMIclient:
        return gNMIclient(target=("127.0.0.1", self.target.port), insecure=True, **kwargs)


@pytest.fixture
def running(fabric: Topology) -> Iterator[Running]:
    board = FrameBoard()
    driver = SimulationDriver(streaming_sim(fabric), board, DriverConfig(speed=SPEED))
    registry = CollectorRegistry()
    switches = [n.id for n in fabric.switches()]
    target = GnmiTarget(GnmiTargetConfig(), board, switches, DriverSetHandler(driver),
                        registry=registry)
    driver.start()
    target.start()
    try:
        yield Running(board, driver, target, registry)
    finally:
        target.stop()
        driver.stop()


def _updates(result: dict[str, Any]) -> dict[str, Any]:
    """pygnmi Get result -> {path: value}."""
    return {u["path"]: u["val"] for n in result["notification"] for u in n["update"]}


def test_capabilities_name_the_models_and_encodings(running: Running) -> None:
    with running.client() as client:
        caps = client.capabilities()
    assert {m["name"] for m in caps["supported_models"]} >= {
        "openconfig-interfaces", "openconfig-qos", "openconfig-platform"}
    assert sorted(caps["supported_encodings"]) == ["json", "json_ietf", "proto"]
    assert caps["gnmi_version"] == "0.8.0"


def test_get_returns_the_boards_values(running: Running) -> None:
    running.driver.stop()  # freeze the board so both sides read the same tick
    values = running.board.values("leaf-0")
    assert values is not None
    board = values.values
    with running.client() as client:
        subtree = _updates(client.get(path=["/interfaces"], target="leaf-0", encoding="proto",
                                      datatype="state"))
        wildcard = client.get(path=["/interfaces/interface[name=*]/state/oper-status"],
                              target="leaf-0", encoding="proto")
        json_ietf = _updates(client.get(
            path=["/interfaces/interface[name=eth7]/state/counters/in-octets"], target="leaf-0"))
        pfc = _updates(client.get(path=[
            "/qos/interfaces/interface[interface-id=eth7]/pfc/priorities/priority[priority=3]"
            "/state/in-pause-frames"], target="leaf-0", encoding="proto"))
    gauges = _raw_get(running.target.address, "leaf-0", [
        "/qos/interfaces/interface[interface-id=eth7]/output/queues/queue[name=3]/state",
        "/components/component[name=eth7]"])
    assert wildcard["notification"][0]["timestamp"] == values.frame.ts_ns
    assert len(subtree) == 64 * 10  # 9 counters and oper-status per port
    for port in range(1, 65):
        for leaf, metric in IF_LEAVES.items():
            path = f"interfaces/interface[name=eth{port}]/state/counters/{leaf}"
            assert subtree[path] == board[(f"leaf-0:eth{port}", metric)]
    statuses = {u["path"]: u["val"] for u in wildcard["notification"][0]["update"]}
    assert len(statuses) == 64
    assert set(statuses.values()) == {"UP"}
    assert int(json_ietf["interfaces/interface[name=eth7]/state/counters/in-octets"]) == \
        board[("leaf-0:eth7", "in_octets")]
    prefix = "qos/interfaces/interface[interface-id=eth7]"
    assert pfc[f"{prefix}/pfc/priorities/priority[priority=3]/state/in-pause-frames"] == \
        board[("leaf-0:eth7", "pfc_rx_pause{prio=3}")]
    assert len(gauges) == 6  # ECN marks, uint64 queue lengths, decimal64 powers and temperature
    assert gauges["ecn-marked-pkts"] == board[("leaf-0:eth7", "ecn_marked_pkts")]
    assert gauges["instant-queue-len"] == round(board[("leaf-0:eth7", "queue_depth_bytes")])
    assert gauges["max-queue-len"] == round(board[("leaf-0:eth7", "queue_watermark_bytes")])
    assert gauges["input-power/instant"] == round(board[("leaf-0:eth7", "rx_power_dbm")], 2)
    assert gauges["output-power/instant"] == round(board[("leaf-0:eth7", "tx_power_dbm")], 2)
    assert gauges["temperature/instant"] == round(board[("leaf-0:eth7", "temperature_c")], 1)


def _raw_get(address: str, device: str, paths: list[str]) -> dict[str, float]:
    """Numbers by their last two path elements (pygnmi 0.8.15 does not decode double_val)."""
    request = gnmi_pb2.GetRequest(prefix=gnmi_pb2.Path(target=device),
                                  path=[_gnmi_path(p) for p in paths], encoding=gnmi_pb2.PROTO)
    with grpc.insecure_channel(address) as channel:
        response = gnmi_pb2_grpc.gNMIStub(channel).Get(request, timeout=5)
    out = {}
    for note in response.notification:
        for u in note.update:
            leaf = "/".join(e.name for e in u.path.elem[-2:]).removeprefix("state/")
            kind = u.val.WhichOneof("value")
            if kind in ("double_val", "uint_val"):
                out[leaf] = getattr(u.val, kind)
    return out


def _gnmi_path(text: str) -> Any:
    return gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=e.name, key=dict(e.keys))
                               for e in parse_path(text)])


@PYGNMI_STREAM
def test_on_change_sends_only_what_changed(running: Running) -> None:
    request = {"mode": "stream", "encoding": "proto", "subscription": [
        {"path": "/interfaces/interface[name=*]/state/oper-status", "mode": "on_change"}]}
    with running.client() as client:
        stream = client.subscribe2(subscribe=request, target="leaf-0")
        initial = stream.get_update(timeout=5)
        time.sleep(5 / SPEED)
        quiet = stream.peek()
        client.set(update=[("/interfaces/interface[name=eth33]/config/enabled", False)],
                   target="leaf-0")
        change = stream.get_update(timeout=5)["update"]["update"]
        stream.close()
    assert len(initial["update"]["update"]) == 64
    assert not quiet
    assert change == [{"path": "interfaces/interface[name=eth33]/state/oper-status",
                       "val": "DOWN"}]


@PYGNMI_STREAM
def test_once_sends_a_snapshot_and_ends(running: Running) -> None:
    request = {"mode": "once", "encoding": "proto",
               "subscription": [{"path": "/qos/interfaces/interface[interface-id=*]/pfc"}]}
    with running.client() as client:
        responses = list(client.subscribe2(subscribe=request, target="spine-0"))
    updates = [u for r in responses if "update" in r for u in r["update"]["update"]]
    assert responses[-1].get("sync_response") is True
    assert len(updates) == 64 * 2  # rx and tx pause frames of the lossless priority
    assert all(r["update"]["timestamp"] > 0 for r in responses if "update" in r)


@PYGNMI_STREAM
def test_poll_answers_each_poll_with_a_fresh_snapshot(running: Running) -> None:
    request = {"mode": "poll", "encoding": "proto", "subscription": [
        {"path": "/interfaces/interface[name=eth2]/state/counters/out-octets"}]}
    with running.client() as client:
        poll = client.subscribe2(subscribe=request, target="leaf-1")
        answers = []
        for _ in range(3):
            answers.append(poll.get_update(timeout=10))
            running.board.wait_tick(running.board.tick + 1, timeout_s=10)
        poll.close()
    stamps = [a["update"]["timestamp"] for a in answers]
    assert all(a["sync_response"] and len(a["update"]["update"]) == 1 for a in answers)
    assert stamps == sorted(stamps)
    # pygnmi sends the next Poll as it returns an answer: the last one follows waited ticks
    assert stamps[-1] > stamps[0]


def test_unknown_target_is_not_found_and_named(running: Running) -> None:
    with running.client() as client, pytest.raises(gNMIException, match="'leaf-99'"):
        client.get(path=["/interfaces"], target="leaf-99", encoding="proto")
    with grpc.insecure_channel(running.target.address) as channel:
        stub = gnmi_pb2_grpc.gNMIStub(channel)
        request = gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(
            prefix=gnmi_pb2.Path(target="leaf-99"), encoding=gnmi_pb2.PROTO,
            subscription=[gnmi_pb2.Subscription(path=gnmi_pb2.Path())]))
        with pytest.raises(grpc.RpcError) as err:
            list(stub.Subscribe(iter([request]), timeout=5))
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    assert "leaf-99" in err.value.details()
    assert running.registry.get_sample_value(
        "fabricops_sim_gnmi_rpcs_total", {"method": "Subscribe", "code": "NOT_FOUND"}) == 1


def test_set_enabled_false_takes_the_port_down(running: Running) -> None:
    path = "/interfaces/interface[name=eth40]/state/oper-status"
    with running.client() as client:
        before = _updates(client.get(path=[path], target="leaf-1", encoding="proto"))
        result = client.set(update=[("/interfaces/interface[name=eth40]/config/enabled", False)],
                            target="leaf-1")
        running.board.wait_tick(running.board.tick + 1, timeout_s=5)
        after = _updates(client.get(path=[path], target="leaf-1", encoding="proto"))
        with pytest.raises(gNMIException, match="not settable"):
            client.set(update=[("/interfaces/interface[name=eth40]/config/description", "x")],
                       target="leaf-1")
    assert list(before.values()) == ["UP"]
    assert list(after.values()) == ["DOWN"]
    assert result["response"] == [{"path": "interfaces/interface[name=eth40]/config/enabled",
                                   "op": "UPDATE"}]


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
