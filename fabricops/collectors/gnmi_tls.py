"""The server certificate of a gNMI target, fetched without verifying it (``skip_verify``).

gRPC has no switch to skip verification, so a target reached with
``skip_verify`` is trusted as it presents itself: its certificate is fetched
with a plain TLS handshake (offering the endpoint's client certificate, when
it has one, for servers that ask), then used as the only root and its first
DNS name (else common name) as the name expected. The connection is then
encrypted but not authenticated; meant for labs.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class ServerCertificate:
    """A server's certificate as PEM, and the name it is issued to (None if it has none)."""

    pem: bytes
    name: str | None


def fetch_server_certificate(endpoint: Any, timeout_s: float = 5.0) -> ServerCertificate:
    """The certificate ``endpoint.address`` presents; OSError names the address and cause."""
    host, _, port = endpoint.address.rpartition(":")
    host = host.strip("[]")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    try:
        if endpoint.cert_file is not None:
            ctx.load_cert_chain(endpoint.cert_file, endpoint.key_file)
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock, \
                ctx.wrap_socket(sock, server_hostname=host) as tls:
            der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError) as exc:
        raise OSError(f"cannot fetch the certificate of {endpoint.address}: {exc}") from exc
    if der is None:
        raise OSError(f"{endpoint.address} presented no certificate")
    return ServerCertificate(ssl.DER_cert_to_PEM_cert(der).encode(), _name_of(der))


def _name_of(der: bytes) -> str | None:
    cert = x509.load_der_x509_certificate(der)
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        dns = names.value.get_values_for_type(x509.DNSName)
        if dns:
            return str(dns[0])
    except x509.ExtensionNotFound:
        pass
    common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(common[0].value) if common else None
