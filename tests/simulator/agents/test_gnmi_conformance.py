"""The simulated gNMI target against the gNMI specification, through pygnmi over TLS with
a username and password: Capabilities, Get of each data type in each encoding, STREAM
SAMPLE every 100 ms in device time, prefix target echo, refused encodings and logins."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from pygnmi.client import gNMIclient, gNMIException
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabricops.core.catalogue import CATALOGUE, Metric
from fabricops.core.openconfig import OPENCONFIG, format_path, parse_path
from fabricops.core.roce_settings import SettingValue
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.gnmi_selfsigned import self_signed_pair
from fabricops.simulator.agents.gnmi_target import GnmiTarget, GnmiTargetConfig
from fabricops.simulator.engine import Simulator
from fabricops.simulator.scenario import build_simulator

from .gnmi_twins import PASSWORD, USER, Live, Switches, expected, live_twin, scenario, secured

pytestmark = pytest.mark.integration
LOGIN = (("username", USER), ("password", PASSWORD))
MS = 1_000_000
# pygnmi's reader thread raises CANCELLED when a stream is closed before its end.
PYGNMI_STREAM = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnhandledThreadExceptionWarning")
LEAVES: dict[str, Metric] = {format_path(OPENCONFIG.leaf_path(m, "eth3"))[1:]: m
                             for m in CATALOGUE.metrics if m.family.sources.openconfig_path
                             and m.family.scope.value == "port"}


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_pair(tmp_path_factory.mktemp("tls"))


def client(target: GnmiTarget, cert: tuple[Path, Path], password: str = PASSWORD) -> gNMIclient:
    return gNMIclient(target=("127.0.0.1", target.port), username=USER, password=password,
                      path_cert=str(cert[0]))


def stub(target: GnmiTarget, cert: tuple[Path, Path]) -> tuple[grpc.Channel, Any]:
    channel = grpc.secure_channel(target.address,
                                  grpc.ssl_channel_credentials(cert[0].read_bytes()))
    return channel, gnmi_pb2_grpc.gNMIStub(channel)


@dataclass
class Frozen:
    """A target over a board fed once by hand: every answer reads the same frame."""

    sim: Simulator
    board: FrameBoard
    target: GnmiTarget
    registry: CollectorRegistry
    settings: dict[str, dict[str, SettingValue]] = field(default_factory=dict)

    def value(self, metric: Metric) -> int | float:
        values = self.board.values("leaf-0")
        assert values is not None
        return values.values[("leaf-0:eth3", metric.name)]


@pytest.fixture(scope="module")
def frozen(cert: tuple[Path, Path]) -> Iterator[Frozen]:
    sim = build_simulator(scenario(1.0))
    sim.run(3)
    board = FrameBoard()
    board.publish(sim.frames())
    switches = [n.id for n in sim.fabric.topology.switches()]
    settings = {s: sim.settings.device_settings(s) for s in switches}
    registry = CollectorRegistry()
    target = GnmiTarget(secured(cert), board, switches, Switches(settings), registry=registry)
    target.start()
    try:
        yield Frozen(sim, board, target, registry, settings)
    finally:
        target.stop()


def updates(result: dict[str, Any]) -> dict[str, Any]:
    return {u["path"]: u.get("val") for n in result["notification"] for u in n["update"]}


def test_capabilities_over_tls_with_a_login(frozen: Frozen, cert: tuple[Path, Path]) -> None:
    with client(frozen.target, cert) as c:
        caps = c.capabilities()
    assert sorted(caps["supported_encodings"]) == ["json", "json_ietf", "proto"]
    assert caps["gnmi_version"] == "0.8.0"
    assert {m["name"] for m in caps["supported_models"]} >= {"openconfig-interfaces"}


def test_a_wrong_or_missing_password_is_unauthenticated(frozen: Frozen,
                                                        cert: tuple[Path, Path]) -> None:
    wrong = client(frozen.target, cert, password="guess")
    with pytest.raises(gNMIException) as err:
        wrong.connect()
    wrong.close()
    assert err.value.orig_exc.code() is grpc.StatusCode.UNAUTHENTICATED
    channel, gnmi = stub(frozen.target, cert)
    with channel, pytest.raises(grpc.RpcError) as raw:
        gnmi.Capabilities(gnmi_pb2.CapabilityRequest(), timeout=5)
    assert raw.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert frozen.registry.get_sample_value(
        "fabricops_sim_gnmi_rpcs_total",
        {"method": "Capabilities", "code": "UNAUTHENTICATED"}) == 2


INTERFACE = "/interfaces/interface[name=eth3]"
COUNTERS = "/interfaces/interface/state/counters"


@pytest.mark.parametrize("encoding", ["json", "json_ietf", "proto"])
@pytest.mark.parametrize("datatype", ["all", "config", "state", "operational"])
def test_get_answers_the_data_type_asked_for_in_each_encoding(
        frozen: Frozen, cert: tuple[Path, Path], datatype: str, encoding: str) -> None:
    with client(frozen.target, cert) as c:
        got = updates(c.get(path=[INTERFACE], target="leaf-0", datatype=datatype,
                            encoding=encoding))
        hash_state = None if datatype in ("config", "operational") else updates(
            c.get(path=["/ecmp/hash/state"], target="leaf-0", datatype=datatype,
                  encoding=encoding))
    mtu = frozen.settings["leaf-0"]["ports.eth3.mtu_bytes"]
    config = {"interfaces/interface[name=eth3]/config/mtu": mtu}
    state = {path: expected(m, frozen.value(m), encoding) for path, m in LEAVES.items()
             if path.startswith(INTERFACE[1:] + "/state")}
    assert len(state) == 10  # 9 counters and oper-status
    want = {"config": config, "state": state, "operational": state,
            "all": {**config, **state}}[datatype]
    assert got == want
    if hash_state is not None:
        assert hash_state == {"ecmp/hash/state/include-l4": True}


def test_operational_leaves_out_state_that_mirrors_configuration(
        frozen: Frozen, cert: tuple[Path, Path]) -> None:
    with client(frozen.target, cert) as c:
        assert updates(c.get(path=["/ecmp/hash"], target="leaf-0", datatype="config",
                             encoding="json_ietf")) == {
            "ecmp/hash/config/seed": frozen.settings["leaf-0"]["hash_seed"]}
        with pytest.raises(gNMIException, match="has no operational data"):
            c.get(path=["/ecmp/hash"], target="leaf-0", datatype="operational")


@pytest.mark.parametrize("encoding", ["json", "json_ietf"])
def test_decimal64_leaves_keep_their_fraction_digits(
        frozen: Frozen, cert: tuple[Path, Path], encoding: str) -> None:
    path = "/components/component[name=eth3]"
    with client(frozen.target, cert) as c:
        got = updates(c.get(path=[path], target="leaf-0", encoding=encoding))
    decimals = {p: m for p, m in LEAVES.items() if p.startswith(path[1:])}
    assert len(decimals) == 3  # temperature, input and output power
    assert got == {p: expected(m, frozen.value(m), encoding) for p, m in decimals.items()}


def test_decimal64_with_proto_is_double_val_or_the_deprecated_decimal_val(
        frozen: Frozen, cert: tuple[Path, Path]) -> None:
    temperature = next(m for m in LEAVES.values() if m.name == "temperature_c")
    value = frozen.value(temperature)
    path = "/components/component[name=eth3]/state/temperature/instant"
    request = gnmi_pb2.GetRequest(prefix=gnmi_pb2.Path(target="leaf-0"), path=[_path(path)],
                                  encoding=gnmi_pb2.PROTO)
    channel, gnmi = stub(frozen.target, cert)
    with channel:
        note = gnmi.Get(request, metadata=LOGIN, timeout=5).notification[0]
    assert note.update[0].val.double_val == round(value, 1)
    legacy = GnmiTarget(secured(cert, decimal64="decimal_val"), frozen.board, ["leaf-0"])
    legacy.start()
    try:
        with client(legacy, cert) as c:
            got = updates(c.get(path=[path], target="leaf-0", encoding="proto"))
    finally:
        legacy.stop()
    decimal = got[path[1:]]
    assert (decimal.digits, decimal.precision) == (round(value * 10), 1)


def _path(text: str) -> Any:
    return gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=e.name, key=dict(e.keys))
                               for e in parse_path(text)])


def test_prefix_target_and_origin_come_back_only_when_the_request_set_them(
        frozen: Frozen, cert: tuple[Path, Path]) -> None:
    leaf = _path("/interfaces/interface[name=eth3]/state/oper-status")
    named = gnmi_pb2.Path(target="leaf-0", origin="openconfig")
    subscribe = gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(
        prefix=named, mode=gnmi_pb2.SubscriptionList.ONCE, encoding=gnmi_pb2.JSON_IETF,
        subscription=[gnmi_pb2.Subscription(path=leaf)]))
    set_request = gnmi_pb2.SetRequest(prefix=gnmi_pb2.Path(target="leaf-0"), update=[
        gnmi_pb2.Update(path=_path("/ecmp/hash/config/include-l4"),
                        val=gnmi_pb2.TypedValue(bool_val=True))])
    single = GnmiTarget(secured(cert), frozen.board, ["leaf-0"])
    single.start()
    try:
        channel, gnmi = stub(frozen.target, cert)
        with channel:
            got = gnmi.Get(gnmi_pb2.GetRequest(prefix=named, path=[leaf]), metadata=LOGIN,
                           timeout=5)
            streamed = list(gnmi.Subscribe(iter([subscribe]), metadata=LOGIN, timeout=5))
            done = gnmi.Set(set_request, metadata=LOGIN, timeout=5)
        channel, gnmi = stub(single, cert)
        with channel:
            bare = gnmi.Get(gnmi_pb2.GetRequest(path=[leaf]), metadata=LOGIN, timeout=5)
    finally:
        single.stop()
    assert got.notification[0].prefix == named
    assert got.notification[0].update[0].val.json_val == b'"UP"'  # JSON: the default
    assert [r.update.prefix for r in streamed if r.HasField("update")] == [named]
    assert done.prefix == gnmi_pb2.Path(target="leaf-0")
    assert not bare.notification[0].HasField("prefix")


def test_encodings_the_target_lacks_are_refused_and_counted(
        frozen: Frozen, cert: tuple[Path, Path]) -> None:
    prefix = gnmi_pb2.Path(target="leaf-0")
    channel, gnmi = stub(frozen.target, cert)
    codes = []
    with channel:
        for encoding in (gnmi_pb2.BYTES, gnmi_pb2.ASCII, 9):
            with pytest.raises(grpc.RpcError) as err:
                gnmi.Get(gnmi_pb2.GetRequest(prefix=prefix, encoding=encoding), metadata=LOGIN,
                         timeout=5)
            codes.append(err.value.code())
        subscribe = gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(
            prefix=prefix, encoding=gnmi_pb2.ASCII,
            subscription=[gnmi_pb2.Subscription(path=_path("/interfaces"))]))
        with pytest.raises(grpc.RpcError) as err:
            list(gnmi.Subscribe(iter([subscribe]), metadata=LOGIN, timeout=5))
        codes.append(err.value.code())
    unimplemented, invalid = grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INVALID_ARGUMENT
    assert codes == [unimplemented, unimplemented, invalid, unimplemented]
    assert "ASCII is not supported" in (err.value.details() or "")
    count = frozen.registry.get_sample_value
    assert count("fabricops_sim_gnmi_refused_encodings_total",
                 {"method": "Get", "encoding": "1"}) == 1
    assert count("fabricops_sim_gnmi_refused_encodings_total",
                 {"method": "Subscribe", "encoding": "3"}) == 1


def test_a_sample_interval_below_100_ms_is_an_invalid_argument(
        frozen: Frozen, cert: tuple[Path, Path]) -> None:
    subscribe = gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(
        prefix=gnmi_pb2.Path(target="leaf-0"), encoding=gnmi_pb2.PROTO,
        subscription=[gnmi_pb2.Subscription(path=_path("/interfaces"), mode=gnmi_pb2.SAMPLE,
                                            sample_interval=99 * MS)]))
    channel, gnmi = stub(frozen.target, cert)
    with channel, pytest.raises(grpc.RpcError) as err:
        list(gnmi.Subscribe(iter([subscribe]), metadata=LOGIN, timeout=5))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "minimum of 100000000 ns" in (err.value.details() or "")


@pytest.fixture
def ticking_every_100_ms(cert: tuple[Path, Path]) -> Iterator[Live]:
    yield from live_twin(secured(cert), tick_s=0.1, speed=1.0)


@PYGNMI_STREAM
@pytest.mark.parametrize("encoding", ["json_ietf", "proto"])
def test_stream_sample_every_100_ms_carries_the_twins_values_in_device_time(
        ticking_every_100_ms: Live, cert: tuple[Path, Path], encoding: str) -> None:
    live = ticking_every_100_ms
    request = {"mode": "stream", "encoding": encoding, "subscription": [
        {"path": "/interfaces/interface[name=eth1]/state/counters", "mode": "sample",
         "sample_interval": 100 * MS}]}
    received = []
    with client(live.target, cert) as c:
        stream = c.subscribe2(subscribe=request, target="leaf-0")
        for _ in range(15):
            update = stream.get_update(timeout=10)["update"]
            received.append((update, live.sim.ts_ns, time.time_ns()))
        stream.close()
    stamps = [u["timestamp"] for u, _, _ in received]
    gaps = np.diff(stamps)
    assert all(ts <= twin and ts <= wall for ts, (_, twin, wall) in zip(stamps, received,
                                                                       strict=True))
    assert (gaps > 0).all()
    assert (gaps % (100 * MS) == 0).all()
    assert statistics.median(gaps.tolist()) == 100 * MS
    for update, _, _ in received:
        got = {"/" + u["path"]: u["val"] for u in update["update"]}
        assert len(got) == 9
        assert got == live.leaves(update["timestamp"], COUNTERS, encoding)
    assert len({tuple(sorted(u["update"][0].items())) for u, _, _ in received}) > 1


@pytest.fixture
def ticking_every_second() -> Iterator[Live]:
    yield from live_twin(GnmiTargetConfig(), tick_s=1.0, speed=4.0)


@PYGNMI_STREAM
def test_samples_faster_than_the_twin_ticks_repeat_its_newest_frame(
        ticking_every_second: Live) -> None:
    live = ticking_every_second
    request = {"mode": "stream", "encoding": "proto", "subscription": [
        {"path": "/interfaces/interface[name=eth1]/state/counters/in-octets", "mode": "sample",
         "sample_interval": 100 * MS}]}
    with gNMIclient(target=("127.0.0.1", live.target.port), insecure=True) as c:
        stream = c.subscribe2(subscribe=request, target="leaf-0")
        stamps = [stream.get_update(timeout=10)["update"]["timestamp"] for _ in range(45)]
        stream.close()
    per_frame = [stamps.count(ts) for ts in sorted(set(stamps))]
    assert stamps == sorted(stamps)
    assert set(stamps) <= set(live.frames)
    assert max(per_frame) <= 10  # one a device 100 ms, never more
    assert max(per_frame[1:-1]) >= 8, per_frame  # once the pace of device time is known
    assert (live.registry.get_sample_value("fabricops_sim_gnmi_repeated_samples_total")
            or 0) >= 20
