"""The simulated gNMI target on a running simulation, checked with pygnmi and raw stubs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry
from pygnmi.client import gNMIclient, gNMIException
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabricops.core.topology import Topology
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.driver import DriverConfig, SimulationDriver
from fabricops.simulator.agents.gnmi_set import DriverSetHandler
from fabricops.simulator.agents.gnmi_target import GnmiTarget, GnmiTargetConfig

from .conftest import PYGNMI_STREAM, _gnmi_path, _updates, streaming_sim

SPEED = 20.0  # 1 s ticks, 50 ms of wall time each
IF_LEAVES = {"in-octets": "in_octets", "out-octets": "out_octets",
             "in-unicast-pkts": "in_pkts", "carrier-transitions": "carrier_transitions"}


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
