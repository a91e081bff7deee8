"""A self-signed certificate for the simulated gNMI target, made when none is given.

``self_signed_pair(folder, names)`` writes ``gnmi-target.crt`` (PEM, self-signed,
ECDSA P-256) and ``gnmi-target.key`` (PEM, PKCS#8, mode 0600) into ``folder``
and returns their paths. The certificate names ``localhost``, ``127.0.0.1`` and
every host in ``names`` (DNS names and IP addresses alike) as subject
alternative names, so a client reaching the target by any of them can verify it
with the certificate itself as its only trusted root (``ca_file`` in an
inventory, ``path_cert`` in pygnmi). A pair already there is kept while it
covers those names and stays valid for another day, so clients that trust it
keep working across restarts.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_NAME: Final = "gnmi-target.crt"
KEY_NAME: Final = "gnmi-target.key"
VALID_DAYS: Final = 397
ALWAYS: Final = ("localhost", "127.0.0.1")


def self_signed_pair(folder: Path, names: Sequence[str] = ()) -> tuple[Path, Path]:
    """(certificate, key) paths in ``folder``, made or kept as the module docstring says;
    OSError names the folder if it cannot be written."""
    wanted = list(dict.fromkeys([*ALWAYS, *(n for n in names if n and n != "0.0.0.0")]))
    cert_path, key_path = folder / CERT_NAME, folder / KEY_NAME
    if _still_good(cert_path, key_path, wanted):
        return cert_path, key_path
    try:
        folder.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        _write(key_path, key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()), 0o600)
        _write(cert_path, _certificate(key, wanted).public_bytes(serialization.Encoding.PEM),
               0o644)
    except OSError as exc:
        raise OSError(f"cannot write the gNMI target's certificate into {folder}: "
                      f"{exc.strerror or exc}") from exc
    return cert_path, key_path


def _certificate(key: ec.EllipticCurvePrivateKey, names: list[str]) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0]),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fabricops simulator")])
    now = dt.datetime.now(dt.UTC)
    return (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName([_general_name(n) for n in names]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(key, hashes.SHA256()))


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _still_good(cert_path: Path, key_path: Path, names: list[str]) -> bool:
    """True if both files exist and the certificate names every one of ``names`` and
    is valid for at least another day."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        if not key_path.is_file():
            return False
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    have = {str(v) for v in sans.get_values_for_type(x509.DNSName)}
    have |= {str(v) for v in sans.get_values_for_type(x509.IPAddress)}
    left = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
    return all(n in have for n in names) and left > dt.timedelta(days=1)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` whole under a temporary name, then rename it into place."""
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(partial, mode)
    partial.replace(path)
