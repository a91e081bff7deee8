"""The collector over TLS, for real: a CA, server and client certificates made here,
the replay served over TLS (and mutual TLS), reached with the CA and a server name
override, with skip-verify, and refused with the wrong name."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import ValidationError

from fabricops.collectors.gnmi_config import GnmiEndpoint
from tests.collectors.gnmi_replay import ReplayTarget, load_replay
from tests.collectors.test_gnmi_dialects import DEV, collecting, samples_of, wait

SERVER_NAME = "gnmi.leaf1.example.net"


@dataclass(frozen=True)
class Pki:
    ca: Path
    server: tuple[bytes, bytes]  # key, chain (PEM)
    client_cert: Path
    client_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
          issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool,
          names: list[x509.GeneralName]) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fabric test CA")])
    ca = _cert("fabric test CA", ca_key, ca_name, ca_key, ca=True, names=[])
    server_key = _key()
    server = _cert(SERVER_NAME, server_key, ca_name, ca_key, ca=False,
                   names=[x509.DNSName(SERVER_NAME)])
    client_key = _key()
    client = _cert("collector", client_key, ca_name, ca_key, ca=False,
                   names=[x509.DNSName("collector.example.net")])
    (root / "ca.pem").write_bytes(_pem(ca))
    (root / "client.pem").write_bytes(_pem(client))
    (root / "client.key").write_bytes(_key_pem(client_key))
    return Pki(root / "ca.pem", (_key_pem(server_key), _pem(server)), root / "client.pem",
               root / "client.key")


def _synced_over(target: ReplayTarget, endpoint: GnmiEndpoint) -> dict[tuple[str, str], float]:
    try:
        with collecting(endpoint) as (collector, sink):
            wait(lambda: collector.status()[DEV].synced)
            assert collector.status()[DEV].up
    finally:
        target.stop()
    return samples_of(sink.frames)


def test_tls_with_the_ca_and_a_server_name_override(pki: Pki) -> None:
    replay = load_replay("openconfig")
    target = ReplayTarget(replay.responses, tls=pki.server).start()
    got = _synced_over(target, GnmiEndpoint(
        device=DEV, address=target.address, insecure=False, ca_file=pki.ca,
        tls_server_name=SERVER_NAME))
    assert got[("Ethernet1", "in_octets")] == 98817263551


def test_mutual_tls_with_a_client_certificate(pki: Pki) -> None:
    replay = load_replay("sonic")
    target = ReplayTarget(replay.responses, tls=pki.server,
                          client_ca=pki.ca.read_bytes()).start()
    got = _synced_over(target, GnmiEndpoint(
        device=DEV, address=target.address, profile="sonic", insecure=False, ca_file=pki.ca,
        tls_server_name=SERVER_NAME, cert_file=pki.client_cert, key_file=pki.client_key))
    assert got[("Ethernet0", "pfc_rx_pause{prio=3}")] == 17


def test_skip_verify_trusts_the_certificate_the_target_presents(pki: Pki) -> None:
    replay = load_replay("openconfig")
    target = ReplayTarget(replay.responses, tls=pki.server).start()
    got = _synced_over(target, GnmiEndpoint(device=DEV, address=target.address,
                                            insecure=False, skip_verify=True))
    assert got[("Ethernet1", "out_octets")] == 87102331187


def test_a_wrong_server_name_is_refused_and_named(pki: Pki) -> None:
    replay = load_replay("openconfig")
    target = ReplayTarget(replay.responses, tls=pki.server).start()
    endpoint = GnmiEndpoint(device=DEV, address=target.address, insecure=False,
                            ca_file=pki.ca, tls_server_name="other.example.net")
    try:
        with collecting(endpoint, connect_timeout_s=1.0) as (collector, sink):
            wait(lambda: collector.status()[DEV].reconnects >= 1)
            status = collector.status()[DEV]
    finally:
        target.stop()
    assert not sink.frames
    assert not status.up
    assert status.last_error is not None
    assert f"{DEV} at {target.address}" in status.last_error
    assert target.subscribes == 0


def test_tls_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(ValidationError, match="skip_verify needs TLS"):
        GnmiEndpoint(device=DEV, address="127.0.0.1:1", skip_verify=True)
    with pytest.raises(ValidationError, match="cert_file and key_file go together"):
        GnmiEndpoint(device=DEV, address="127.0.0.1:1", insecure=False,
                     cert_file=Path("c.pem"))
