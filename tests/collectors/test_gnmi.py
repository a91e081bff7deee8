"""The gNMI collector: pure notification mapping, then against the simulated target."""

from __future__ import annotations

import datetime
import gc
import ipaddress
import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from pydantic import SecretStr, ValidationError
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.collectors.gnmi import GnmiCollector
from fabricops.collectors.gnmi_config import (
    DEFAULT_PATHS,
    GnmiCollectorConfig,
    GnmiEndpoint,
    PolicyBook,
    subscribe_request,
)
from fabricops.collectors.gnmi_mapping import NotificationMapper
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame, Source
from fabricops.core.openconfig import parse_path
from fabricops.core.records import SamplingPolicy
from fabricops.core.sinks import ListSink
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.driver import DriverConfig, SimulationDriver
from fabricops.simulator.agents.gnmi_target import GnmiTarget, GnmiTargetConfig
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from tests.conftest import missing_peer

TS = 1_767_225_600_000_000_000

# ---------------------------------------------------------------- pure mapping


def _path(text: str) -> Any:
    return gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=e.name, key=dict(e.keys))
                               for e in parse_path(text)])


def _note(updates: list[tuple[str, Any]], prefix: str = "", ts: int = TS) -> Any:
    return gnmi_pb2.Notification(
        timestamp=ts, prefix=gnmi_pb2.Path(target="leaf-0", elem=_path(prefix).elem),
        update=[gnmi_pb2.Update(path=_path(p), val=gnmi_pb2.TypedValue(**v)) for p, v in updates])


def _samples(frame: Frame | None) -> dict[tuple[str, str], int | float]:
    assert frame is not None
    values = frame.values()
    return {(frame.entities[e], CATALOGUE.by_id(m).name): (float(v) if CATALOGUE.is_float[m]
                                                           else int(frame.raw[i]))
            for i, (e, m, v) in enumerate(zip(frame.entity_idx, frame.metric, values,
                                              strict=True))}


IF = "/interfaces/interface[name=eth12]/state"
PFC = "/qos/interfaces/interface[interface-id=eth12]/pfc/priorities/priority[priority=3]/state"
QUEUE = "/qos/interfaces/interface[interface-id=eth12]/output/queues/queue[name=3]/state"
OPTIC = "/components/component[name=eth12]/transceiver/physical-channels/channel[index=0]/state"

MAPPED = [  # (path, TypedValue fields, metric, value)
    (f"{IF}/counters/in-octets", {"uint_val": 2**63 + 5}, "in_octets", 2**63 + 5),
    (f"{IF}/counters/out-octets", {"json_ietf_val": b'"123456789012"'}, "out_octets",
     123456789012),
    (f"{IF}/counters/in-fcs-errors", {"int_val": 7}, "in_fcs_errors", 7),
    (f"{IF}/counters/in-errors", {"ascii_val": "77"}, "in_errors", 77),
    (f"{IF}/counters/in-discards", {"json_ietf_val": b'"18446744073709551615"'}, "in_discards",
     2**64 - 1),
    (f"{IF}/oper-status", {"string_val": "DOWN"}, "oper_status", 2),
    (f"{PFC}/in-pause-frames", {"uint_val": 42}, "pfc_rx_pause{prio=3}", 42),
    (f"{PFC}/out-pause-frames", {"json_val": b"43"}, "pfc_tx_pause{prio=3}", 43),
    (f"{QUEUE}/instant-queue-len", {"double_val": 1500.5}, "queue_depth_bytes", 1500.5),
    (f"{OPTIC}/input-power/instant", {"decimal_val": gnmi_pb2.Decimal64(digits=-231,
                                                                        precision=2)},
     "rx_power_dbm", -2.31),
    ("/components/component[name=eth12]/state/temperature/instant", {"float_val": 41.5},
     "temperature_c", 41.5),
    ("/openconfig-interfaces:interfaces/interface[name=eth12]/state/counters/in-discards",
     {"uint_val": 3}, "in_discards", 3),
]


@pytest.mark.parametrize(("path", "val", "metric", "expected"), MAPPED,
                         ids=[m[2] for m in MAPPED])
def test_a_leaf_maps_to_its_catalogue_metric(path: str, val: dict[str, Any], metric: str,
                                             expected: float) -> None:
    mapped = NotificationMapper("leaf-0").map(_note([(path, val)]), seq=9, received_ns=1)
    assert mapped.frame is not None
    assert (mapped.unmapped, mapped.bad_values) == (0, 0)
    assert (mapped.frame.device, mapped.frame.ts_ns, mapped.frame.seq) == ("leaf-0", TS, 9)
    assert mapped.frame.source is Source.GNMI
    assert _samples(mapped.frame) == {("leaf-0:eth12", metric): pytest.approx(expected)}


SKIPPED = [  # (path, TypedValue fields, counted as)
    ("/interfaces/interface[name=eth12]/state/mtu", {"uint_val": 9000}, "unsupported"),
    ("/system/state/hostname", {"string_val": "leaf-0"}, "unmapped"),
    ("/qos/interfaces/interface[interface-id=eth12]/output/queues/queue[name=7]/state/"
     "instant-queue-len", {"double_val": 1.0}, "unsupported"),
    ("/qos/interfaces/interface[interface-id=eth12]/pfc/priorities/priority[priority=9]/"
     "state/in-pause-frames", {"uint_val": 1}, "unmapped"),
    ("/interfaces/interface/state/counters/in-octets", {"uint_val": 1}, "unmapped"),
    (f"{IF}/counters/in-octets", {"string_val": "lots"}, "bad"),
    (f"{IF}/counters/in-octets", {"int_val": -1}, "bad"),
    (f"{IF}/counters/in-octets", {"bool_val": True}, "bad"),
    (f"{IF}/oper-status", {"string_val": "SIDEWAYS"}, "bad"),
    (f"{QUEUE}/instant-queue-len", {"json_ietf_val": b"{not json"}, "encoding"),
    (f"{QUEUE}/instant-queue-len", {"any_val": {}}, "encoding"),
]


@pytest.mark.parametrize(("path", "val", "counted"), SKIPPED)
def test_unknown_paths_and_bad_values_are_counted_and_skipped(
    path: str, val: dict[str, Any], counted: str,
) -> None:
    good = (f"{IF}/counters/in-octets", {"uint_val": 1})
    mapped = NotificationMapper("leaf-0").map(_note([(path, val), good]), seq=0, received_ns=1)
    expected = {"unmapped": (1, 0, 0, 0), "bad": (0, 1, 0, 0), "unsupported": (0, 0, 1, 0),
                "encoding": (0, 0, 0, 1)}[counted]
    assert (mapped.unmapped, mapped.bad_values, sum(mapped.unsupported.values()),
            mapped.bad_encodings) == expected
    assert (mapped.leaves, mapped.mapped) == (2, 1)
    if counted == "unsupported":
        assert mapped.problem is None
        assert len(mapped.unsupported) == 1
    else:
        named = {"unmapped": path.rpartition("/")[2], "bad": "leaf-0:eth12",
                 "encoding": "instant-queue-len"}[counted]
        assert mapped.problem is not None
        assert named in mapped.problem
    assert _samples(mapped.frame) == {("leaf-0:eth12", "in_octets"): 1}


def _mapped_fields(mapped: Any) -> tuple[Any, ...]:
    return (mapped.frame, mapped.leaves, mapped.mapped, mapped.unmapped, mapped.bad_values,
            mapped.problem)


@pytest.mark.parametrize("changed", [
    {},  # the same values again
    {f"{IF}/counters/in-octets": {"uint_val": 2**64 - 1}},
    {f"{QUEUE}/instant-queue-len": {"double_val": -0.0}},
    {f"{OPTIC}/input-power/instant": {"double_val": 1e9}},  # out of range: left out
    {"/components/component[name=eth12]/state/temperature/instant": {"double_val": 1e6},
     f"{IF}/oper-status": {"string_val": "UP"}},
])
def test_a_shape_seen_before_gives_the_frame_a_first_sight_gives(
        changed: dict[str, dict[str, Any]]) -> None:
    """A mapper remembers each shape of notification (its leaves in order) and
    builds later ones from the checked layout: the frames and counts are those a
    mapper meeting the notification first gives."""
    first = [(path, val) for path, val, _, _ in MAPPED]
    later = [(path, changed.get(path, val)) for path, val in first]
    seasoned = NotificationMapper("leaf-0")
    seasoned.map(_note(first), seq=0, received_ns=1)
    again = seasoned.map(_note(later, ts=TS + 10**9), seq=1, received_ns=1)
    fresh = NotificationMapper("leaf-0").map(_note(later, ts=TS + 10**9), seq=1, received_ns=1)
    assert _mapped_fields(again) == _mapped_fields(fresh)
    assert again.frame is not None
    assert again.frame.ts_ns == TS + 10**9
    assert not again.frame.raw.flags.writeable


def test_prefix_paths_and_missing_timestamps() -> None:
    note = _note([("counters/in-octets", {"uint_val": 10}), ("oper-status", {"string_val": "UP"})],
                 prefix=IF, ts=0)
    mapped = NotificationMapper("leaf-0").map(note, seq=1, received_ns=TS + 5)
    assert mapped.no_timestamp
    assert mapped.frame is not None
    assert mapped.frame.ts_ns == TS + 5
    assert _samples(mapped.frame) == {("leaf-0:eth12", "in_octets"): 10,
                                      ("leaf-0:eth12", "oper_status"): 1}
    assert NotificationMapper("leaf-0").map(_note([]), 0, 1).frame is None


def test_the_subscription_request_and_config_checks() -> None:
    endpoint = GnmiEndpoint(device="leaf-0", address="127.0.0.1:57400", target="sw0")
    request = subscribe_request(endpoint, interval_s=2.5).subscribe
    assert request.prefix.target == "sw0"
    assert request.encoding == gnmi_pb2.PROTO
    assert request.mode == gnmi_pb2.SubscriptionList.STREAM
    assert [s.sample_interval for s in request.subscription] == [2_500_000_000] * len(
        DEFAULT_PATHS)
    assert {s.mode for s in request.subscription} == {gnmi_pb2.SAMPLE}
    assert "/interfaces/interface/state" in DEFAULT_PATHS
    with pytest.raises(ValidationError, match="host:port"):
        GnmiEndpoint(device="leaf-0", address="leaf-0")
    with pytest.raises(ValidationError, match="not closed"):
        GnmiEndpoint(device="leaf-0", address="h:1", paths=("/interfaces/interface[name=x",))
    with pytest.raises(ValidationError, match="listed twice"):
        GnmiCollectorConfig(targets=(endpoint, endpoint))


def test_policy_book_precedence_age_and_expiry() -> None:
    book = PolicyBook()
    assert book.interval_s("leaf-0", 10.0, now_ns=0) == 10.0
    assert book.offer(SamplingPolicy(device="*", interval_s=5, ts_ns=100))
    assert not book.offer(SamplingPolicy(device="*", interval_s=7, ts_ns=99))
    assert book.offer(SamplingPolicy(device="leaf-0", interval_s=1, ts_ns=50, expires_ns=1000))
    assert book.interval_s("leaf-0", 10.0, now_ns=999) == 1
    assert book.interval_s("leaf-1", 10.0, now_ns=999) == 5
    assert book.interval_s("leaf-0", 10.0, now_ns=1000) == 5
    assert book.next_expiry_ns(now_ns=10) == 1000
    assert book.next_expiry_ns(now_ns=1000) is None


# ------------------------------------------------------ against the simulated target

SPEED = 20.0


class RecordingBoard(FrameBoard):
    """A FrameBoard that keeps every frame published on it, by (device, timestamp)."""

    def __init__(self) -> None:
        super().__init__()
        self.published: dict[tuple[str, int], Frame] = {}

    def publish(self, frames: list[Frame]) -> None:
        for frame in frames:
            self.published[(frame.device, frame.ts_ns)] = frame
        super().publish(frames)


@dataclass
class Fabric:
    """A running simulated fabric served by a gNMI target, with every frame it published."""

    board: RecordingBoard
    driver: SimulationDriver
    target: GnmiTarget

    @property
    def published(self) -> dict[tuple[str, int], Frame]:
        return self.board.published


@contextmanager
def serving(config: GnmiTargetConfig | None = None) -> Iterator[Fabric]:
    topo = leaf_spine(gpus=64)
    sim = Simulator(topo, SimConfig(seed=11))
    sim.add_job(JobSpec(hosts=8, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    board = RecordingBoard()
    driver = SimulationDriver(sim, board, DriverConfig(speed=SPEED))
    target = GnmiTarget(config or GnmiTargetConfig(), board, [n.id for n in topo.switches()])
    fab = Fabric(board, driver, target)
    driver.start()
    target.start()
    try:
        yield fab
    finally:
        target.stop()
        driver.stop()


@pytest.fixture
def fabric() -> Iterator[Fabric]:
    with serving() as fab:
        yield fab


def _collector(endpoints: list[GnmiEndpoint], **config: Any) -> tuple[GnmiCollector, ListSink]:
    sink = ListSink()
    cfg = GnmiCollectorConfig(targets=tuple(endpoints), **{"backoff_initial_s": 0.05,
                                                            "backoff_max_s": 0.5, **config})
    return GnmiCollector(cfg, sink, registry=CollectorRegistry()), sink


def _wait(condition: Callable[[], object], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def _frames_of(sink: ListSink, device: str) -> list[Frame]:
    return [f for f in list(sink.frames) if f.device == device]


def test_frames_carry_the_boards_values_of_the_same_tick(fabric: Fabric) -> None:
    endpoints = [GnmiEndpoint(device=d, address=fabric.target.address, sample_interval_s=1.0)
                 for d in ("leaf-0", "spine-0")]
    collector, sink = _collector(endpoints)
    collector.start()
    try:
        _wait(lambda: len(_frames_of(sink, "leaf-0")) >= 6 and len(_frames_of(sink, "spine-0")))
    finally:
        collector.stop()
    frames = _frames_of(sink, "leaf-0")
    assert [f.seq for f in frames] == list(range(len(frames)))
    spacing = np.diff([f.ts_ns for f in frames])  # every tick, unless the target woke late
    assert np.median(spacing) == 1_000_000_000
    assert np.all(spacing % 1_000_000_000 == 0)
    assert np.all(spacing > 0)
    octets = CATALOGUE.id_of("in_octets")
    for frame in frames:
        truth = fabric.published[("leaf-0", frame.ts_ns)]
        assert frame.n_samples == truth.n_samples == 64 * 18
        assert np.array_equal(frame.raw[frame.metric == octets], truth.raw[truth.metric == octets])
        assert frame.entities == truth.entities
    status = collector.status()["leaf-0"]
    assert status.up is False
    assert status.frames == len(frames)
    registry = collector.registry
    assert registry.get_sample_value("fabricops_gnmi_samples_total", {"device": "leaf-0"}) == \
        sum(f.n_samples for f in frames)
    assert registry.get_sample_value("fabricops_gnmi_errors_total",
                                     {"device": "leaf-0", "reason": "unmapped_path"}) is None


def test_a_dropped_stream_is_resubscribed_after_the_target_returns(fabric: Fabric) -> None:
    endpoint = GnmiEndpoint(device="leaf-1", address=fabric.target.address, sample_interval_s=1)
    collector, sink = _collector([endpoint])
    collector.start()
    try:
        _wait(lambda: len(_frames_of(sink, "leaf-1")) >= 3)
        fabric.target.stop()
        _wait(lambda: not collector.status()["leaf-1"].up)
        time.sleep(0.5)
        before = len(_frames_of(sink, "leaf-1"))
        fabric.target.start()  # same port
        _wait(lambda: len(_frames_of(sink, "leaf-1")) >= before + 3)
        status = collector.status()["leaf-1"]
    finally:
        collector.stop()
    frames = _frames_of(sink, "leaf-1")
    assert status.up
    assert status.last_error is None
    assert status.reconnects >= 1
    assert collector.registry.get_sample_value("fabricops_gnmi_reconnects_total",
                                               {"device": "leaf-1"}) == status.reconnects
    assert [f.seq for f in frames] == list(range(len(frames)))
    assert [f.ts_ns for f in frames] == sorted(f.ts_ns for f in frames)


class FlakySink(ListSink):
    """Refuses every other batch."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def publish_frames(self, frames: Sequence[Frame]) -> None:
        self.calls += 1
        if self.calls % 2:
            raise ConnectionError("bus away")
        super().publish_frames(frames)


def test_a_failing_sink_is_counted_logged_once_and_collection_goes_on(
    fabric: Fabric, caplog: pytest.LogCaptureFixture,
) -> None:
    sink = FlakySink()
    endpoint = GnmiEndpoint(device="leaf-0", address=fabric.target.address, sample_interval_s=1)
    collector = GnmiCollector(GnmiCollectorConfig(targets=(endpoint,)), sink,
                              registry=CollectorRegistry())
    with caplog.at_level(logging.WARNING, logger="fabricops.collectors.gnmi"):
        collector.start()
        try:
            _wait(lambda: len(sink.frames) >= 3)
        finally:
            collector.stop()
    refused = collector.registry.get_sample_value("fabricops_gnmi_errors_total",
                                                  {"device": "leaf-0", "reason": "sink"})
    assert refused is not None
    assert refused >= 3
    lines = [r.getMessage() for r in caplog.records if r.name == "fabricops.collectors.gnmi"]
    assert sum("sink refused a frame: bus away" in line for line in lines) == 1, lines
    assert f"gNMI frames refused by the sink: {refused - 1:,.0f} more held back" in lines[-1]
    assert [f.seq for f in sink.frames] == list(range(len(sink.frames)))
    assert collector.status()["leaf-0"].reconnects == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _connections_to(port: int) -> int:
    """Established TCP connections whose local port is ``port`` (the server's side)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            count += int(local.rsplit(":", 1)[1], 16) == port and state == "01"
    return count


def test_each_target_has_a_connection_of_its_own(fabric: Fabric) -> None:
    """Targets behind one address (a proxy, the twin) do not share an HTTP/2
    connection's flow control, nor its loss."""
    port = int(fabric.target.address.rsplit(":", 1)[1])
    devices = ("leaf-0", "leaf-1", "spine-0")
    endpoints = [GnmiEndpoint(device=d, address=fabric.target.address, sample_interval_s=1)
                 for d in devices]
    collector, sink = _collector(endpoints)
    collector.start()
    try:
        _wait(lambda: {f.device for f in list(sink.frames)} == set(devices))
        connections = _connections_to(port)
    finally:
        collector.stop()
    assert connections == len(devices)


def test_collectors_started_and_stopped_in_turn_report_nothing_of_grpc(
        fabric: Fabric, caplog: pytest.LogCaptureFixture) -> None:
    """Each collector runs its own loop; grpc serves them all from one completion
    queue. Stopping one, mid-start or mid-stream, leaves no traceback behind."""
    endpoints = [GnmiEndpoint(device=d, address=fabric.target.address, sample_interval_s=1)
                 for d in ("leaf-0", "leaf-1", "spine-0")]
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        for n in range(8):
            collector, sink = _collector(endpoints)
            collector.start()
            if n % 2:
                _wait(lambda sink=sink: len(sink.frames) >= 1)
            collector.stop()
            gc.collect()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def test_an_unreachable_target_is_down_with_the_cause() -> None:
    port = _free_port()
    collector, sink = _collector([GnmiEndpoint(device="leaf-9", address=f"127.0.0.1:{port}")])
    collector.start()
    try:
        _wait(lambda: collector.status()["leaf-9"].reconnects >= 2)
        status = collector.status()["leaf-9"]
        errors = collector.registry.get_sample_value(
            "fabricops_gnmi_errors_total", {"device": "leaf-9", "reason": "unreachable"})
        up = collector.registry.get_sample_value("fabricops_gnmi_target_up", {"device": "leaf-9"})
    finally:
        collector.stop()
    assert not status.up
    assert not sink.frames
    assert up == 0
    assert status.last_error is not None
    assert f"leaf-9 at 127.0.0.1:{port}: UNAVAILABLE" in status.last_error
    assert "refused" in status.last_error.lower()
    assert errors is not None
    assert errors >= 2


def test_a_silent_target_times_out() -> None:
    with socket.socket() as listener:  # accepts connections, never speaks HTTP/2
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        collector, _ = _collector([GnmiEndpoint(device="leaf-8", address=address)],
                                  connect_timeout_s=0.3)
        collector.start()
        try:
            _wait(lambda: collector.status()["leaf-8"].last_error is not None)
            status = collector.status()["leaf-8"]
        finally:
            collector.stop()
    assert status.last_error == f"leaf-8 at {address}: no answer within 0.3 s"


def test_a_sampling_policy_resubscribes_with_its_interval(fabric: Fabric) -> None:
    endpoint = GnmiEndpoint(device="spine-0", address=fabric.target.address, sample_interval_s=1)
    collector, sink = _collector([endpoint])
    collector.start()
    try:
        _wait(lambda: len(_frames_of(sink, "spine-0")) >= 2)
        issued = time.time_ns()
        collector.apply_policy(SamplingPolicy(device="*", interval_s=4, ts_ns=issued))
        collector.apply_policy(SamplingPolicy(device="*", interval_s=9, ts_ns=issued - 1))
        _wait(lambda: collector.status()["spine-0"].interval_s == 4)
        start = len(_frames_of(sink, "spine-0"))
        _wait(lambda: len(_frames_of(sink, "spine-0")) >= start + 4)
        slow = [f.ts_ns for f in _frames_of(sink, "spine-0")[start + 1:]]
        expiry = time.time_ns() + 200_000_000
        collector.apply_policy(SamplingPolicy(device="spine-0", interval_s=2, ts_ns=time.time_ns(),
                                              expires_ns=expiry))
        _wait(lambda: collector.status()["spine-0"].interval_s == 2)
        _wait(lambda: collector.status()["spine-0"].interval_s == 4)
    finally:
        collector.stop()
    assert np.median(np.diff(slow)) == 4_000_000_000
    assert collector.status()["spine-0"].reconnects == 0


# ------------------------------------------------------------------------- TLS


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, by cryptography or else the openssl CLI."""
    cert, key = tmp / "target.pem", tmp / "target.key"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if shutil.which("openssl") is None:
            missing_peer("the TLS test needs the cryptography package or the openssl CLI "
                         "to make a self-signed certificate")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                        "-subj", "/CN=fabricops-sim", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fabricops-sim")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(private.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256()))
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return cert, key


def test_tls_with_credentials(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    config = GnmiTargetConfig(tls_cert_file=cert, tls_key_file=key, username="ops",
                              password=SecretStr("pw"))
    with serving(config) as fab:
        tls = {"address": fab.target.address, "insecure": False, "ca_file": cert,
               "username": "ops", "sample_interval_s": 1}
        endpoints = [GnmiEndpoint(device="leaf-0", password=SecretStr("pw"), **tls),
                     GnmiEndpoint(device="leaf-1", password=SecretStr("nope"), **tls),
                     GnmiEndpoint(device="spine-0", address=fab.target.address)]
        collector, sink = _collector(endpoints)
        collector.start()
        try:
            _wait(lambda: len(_frames_of(sink, "leaf-0")) >= 2
                  and collector.status()["leaf-1"].last_error is not None
                  and collector.status()["spine-0"].last_error is not None)
            status = collector.status()
        finally:
            collector.stop()
    assert _frames_of(sink, "leaf-0")[0].n_samples == 64 * 18
    assert status["leaf-1"].last_error is not None
    assert "UNAUTHENTICATED: invalid username or password" in status["leaf-1"].last_error
    assert not _frames_of(sink, "leaf-1")
    assert not _frames_of(sink, "spine-0")
    assert collector.registry.get_sample_value(
        "fabricops_gnmi_errors_total", {"device": "leaf-1", "reason": "auth"})
