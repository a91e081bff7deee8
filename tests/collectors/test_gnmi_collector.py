"""The gNMI collector against the simulated target: streams, reconnects, failures, TLS."""

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
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from fabricops.collectors.gnmi import GnmiCollector
from fabricops.collectors.gnmi_config import GnmiCollectorConfig, GnmiEndpoint
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.records import SamplingPolicy
from fabricops.core.sinks import ListSink
from fabricops.simulator.agents.gnmi_target import GnmiTargetConfig
from tests.collectors.gnmi_fabric import Fabric, serving
from tests.conftest import missing_peer


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
