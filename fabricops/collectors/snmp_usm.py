"""SNMPv3 User-based Security Model messages: pure functions over bytes.

The poller's SNMPv3 requests and the answers it reads (RFC 3412 message format,
RFC 3414 USM with HMAC-MD5-96 / HMAC-SHA-96 and RFC 7860 HMAC-SHA-256-192
authentication, RFC 3826 AES-128-CFB privacy). Keys are derived from the pass
phrases once per (pass phrase, engine id) and cached (``localized_keys``): the
derivation hashes a megabyte, a message costs two HMACs and one AES pass. The
scoped PDU inside is encoded and parsed natively (see
:mod:`fabricops.collectors.snmp_pdu`); pyasn1 is not used, which is what makes
SNMPv3 cost about as much as SNMPv2c.

``encode_request`` builds an authPriv GetBulk/GetNext request (or, without keys,
the noAuthNoPriv discovery probe); ``decode_message`` checks a response's
HMAC, decrypts its scoped PDU and returns :class:`UsmResponse`. Anything
malformed, unauthenticated or undecryptable raises :class:`UsmError` naming why.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

try:  # cryptography 47+ keeps CFB among its "decrepit" modes
    from cryptography.hazmat.decrepit.ciphers.modes import CFB
except ImportError:  # pragma: no cover - older cryptography
    from cryptography.hazmat.primitives.ciphers.modes import CFB

from fabricops.collectors import snmp_pdu as pdu
from fabricops.core import snmp_mib as mib
from fabricops.core.snmp_mib import Oid

V3: Final = 3
USM: Final = 3
REPORT: Final = 0xA8
FLAG_AUTH, FLAG_PRIV, FLAG_REPORTABLE = 0x01, 0x02, 0x04
MAX_MESSAGE_BYTES: Final = 65507
_KEY_SPAN = 1 << 20  # RFC 3414 A.2: the pass phrase repeated over one megabyte


@dataclass(frozen=True)
class AuthProtocol:
    """An HMAC authentication protocol: its hash and the MAC length sent."""

    name: str
    digest: Callable[..., hashlib._Hash]
    mac_bytes: int


AUTH: Final = {
    "MD5": AuthProtocol("MD5", hashlib.md5, 12),
    "SHA": AuthProtocol("SHA", hashlib.sha1, 12),
    "SHA256": AuthProtocol("SHA256", hashlib.sha256, 24),
}
PRIV: Final = frozenset(("AES",))  # AES-128-CFB; others go through pysnmp


class UsmError(ValueError):
    """A datagram that is not a usable SNMPv3 answer; the message says why."""


@dataclass(frozen=True)
class UsmKeys:
    """Localized keys of one user at one authoritative engine."""

    auth: AuthProtocol
    auth_key: bytes
    priv_key: bytes  # 16 bytes, AES-128


@lru_cache(maxsize=4096)
def localized_keys(auth_protocol: str, auth_pass: str, priv_pass: str,
                   engine_id: bytes) -> UsmKeys:
    """The user's keys localized to ``engine_id`` (RFC 3414 A.2; cached)."""
    auth = AUTH[auth_protocol]
    return UsmKeys(auth, _localize(auth, auth_pass, engine_id),
                   _localize(auth, priv_pass, engine_id)[:16])


def _localize(auth: AuthProtocol, passphrase: str, engine_id: bytes) -> bytes:
    word = passphrase.encode()
    repeated = (word * (_KEY_SPAN // len(word) + 1))[:_KEY_SPAN]
    ku = auth.digest(repeated).digest()
    return auth.digest(ku + engine_id + ku).digest()


@dataclass(frozen=True)
class Engine:
    """The authoritative engine of an agent: id, boots and time (seconds)."""

    engine_id: bytes = b""
    boots: int = 0
    time: int = 0


@dataclass(frozen=True)
class UsmResponse:
    """A decoded answer: its message id, the engine it came from, and its PDU.

    ``report`` is the first varbind OID of a Report-PDU (e.g. usmStatsUnknownEngineIDs,
    usmStatsNotInTimeWindows), else None.
    """

    msg_id: int
    engine: Engine
    authenticated: bool
    response: pdu.Response
    report: Oid | None = None


def encode_pdu(kind: int, request_id: int, oids: Sequence[Oid], non_repeaters: int = 0,
               max_repetitions: int = 0) -> bytes:
    """A GetBulkRequest or GetNextRequest PDU (values NULL)."""
    varbinds = b"".join(mib.ber_tlv(0x30, mib.ber_oid(o) + b"\x05\x00") for o in oids)
    fields = (request_id, non_repeaters, max_repetitions) if kind == pdu.GETBULK else \
        (request_id, 0, 0)
    head = b"".join(mib.ber_value(mib.Syntax.INTEGER, v) for v in fields)
    return mib.ber_tlv(kind, head + mib.ber_tlv(0x30, varbinds))


def _int(value: int) -> bytes:
    return mib.ber_value(mib.Syntax.INTEGER, value)


def _octets(value: bytes) -> bytes:
    return mib.ber_tlv(0x04, value)


def encode_request(msg_id: int, user: str, engine: Engine, context: bytes, pdu_bytes: bytes,
                   keys: UsmKeys | None, salt: int) -> bytes:
    """An SNMPv3 request: authPriv with ``keys``, else the noAuthNoPriv discovery probe."""
    flags = FLAG_REPORTABLE | (FLAG_AUTH | FLAG_PRIV if keys else 0)
    header = mib.ber_tlv(0x30, _int(msg_id) + _int(MAX_MESSAGE_BYTES) +
                         _octets(bytes((flags,))) + _int(USM))
    scoped = mib.ber_tlv(0x30, _octets(engine.engine_id) + _octets(context) + pdu_bytes)
    mac_bytes, priv = 0, b""
    if keys is not None:
        mac_bytes = keys.auth.mac_bytes
        priv = salt.to_bytes(8, "big")
        scoped = _octets(_aes(keys.priv_key, engine.boots, engine.time, priv, scoped, True))
    placeholder = b"\x00" * mac_bytes
    params = mib.ber_tlv(0x30, _octets(engine.engine_id) + _int(engine.boots) +
                         _int(engine.time) + _octets(user.encode() if keys else b"") +
                         _octets(placeholder) + _octets(priv))
    message = bytearray(mib.ber_tlv(0x30, _int(V3) + header + _octets(params) + scoped))
    if keys is not None:  # the MAC sits just before msgPrivacyParameters, last in params
        at = len(message) - len(scoped) - len(_octets(priv)) - mac_bytes
        mac = hmac.digest(keys.auth_key, bytes(message), keys.auth.digest)[:mac_bytes]
        message[at:at + mac_bytes] = mac
    return bytes(message)


def message_id(data: bytes) -> int:
    """The msgID of an SNMPv3 message; UsmError if there is none to read."""
    try:
        _, i, end = _tlv(data, 0, len(data), 0x30)
        version, i = _integer(data, i, end)
        _, j, i = _tlv(data, i, end, 0x30)
        msg_id, _ = _integer(data, j, i)
    except (IndexError, ValueError) as exc:
        raise UsmError(f"malformed SNMPv3 message ({len(data)} bytes): {exc}") from None
    if version != V3:
        raise UsmError(f"version {version} is not SNMPv3")
    return msg_id


def new_salt() -> int:
    """A random 64-bit starting salt (each request then adds one)."""
    return int.from_bytes(os.urandom(8), "big")


def _aes(key: bytes, boots: int, time: int, salt: bytes, data: bytes, encrypt: bool
         ) -> bytes:
    iv = boots.to_bytes(4, "big") + time.to_bytes(4, "big") + salt
    cipher = Cipher(algorithms.AES(key), CFB(iv))
    op = cipher.encryptor() if encrypt else cipher.decryptor()
    return op.update(data) + op.finalize()


def _tlv(data: bytes, i: int, limit: int, tag: int | None = None) -> tuple[int, int, int]:
    """(tag, start, end) of the TLV at ``i``; ValueError if it is not well formed."""
    found = data[i]
    if tag is not None and found != tag:
        raise ValueError(f"tag 0x{found:02x} at offset {i}, expected 0x{tag:02x}")
    n, i = data[i + 1], i + 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4:
            raise ValueError(f"unsupported length form at offset {i - 1}")
        n, i = int.from_bytes(data[i:i + k], "big"), i + k
    if i + n > limit:
        raise ValueError(f"length {n} at offset {i} runs past its container")
    return found, i, i + n


def _integer(data: bytes, i: int, limit: int) -> tuple[int, int]:
    _, start, end = _tlv(data, i, limit, 0x02)
    return int.from_bytes(data[start:end], "big", signed=True), end


def _bytes(data: bytes, i: int, limit: int) -> tuple[bytes, int, int]:
    _, start, end = _tlv(data, i, limit, 0x04)
    return data[start:end], start, end


def decode_message(data: bytes, keys_of: Callable[[bytes], UsmKeys | None]) -> UsmResponse:
    """Parse, authenticate and decrypt an SNMPv3 answer; UsmError says what is wrong.

    ``keys_of(engine_id)`` gives the user's keys at that engine (None: unknown), used
    for any message flagged authenticated; one without authentication is only
    accepted as a Report (engine discovery).
    """
    try:
        return _decode(data, keys_of)
    except (IndexError, ValueError, pdu.SnmpDecodeError) as exc:
        raise UsmError(f"malformed SNMPv3 message ({len(data)} bytes): {exc}") from None


def _decode(data: bytes, keys_of: Callable[[bytes], UsmKeys | None]) -> UsmResponse:
    _, i, end = _tlv(data, 0, len(data), 0x30)
    version, i = _integer(data, i, end)
    if version != V3:
        raise ValueError(f"version {version} is not SNMPv3")
    _, j, i = _tlv(data, i, end, 0x30)
    msg_id, j = _integer(data, j, i)
    _, j = _integer(data, j, i)
    flags, j, _ = _bytes(data, j, i)
    _, p, i = _tlv(data, i, end, 0x04)
    _, p, p_end = _tlv(data, p, i, 0x30)
    engine_id, _, p = _bytes(data, p, p_end)
    boots, p = _integer(data, p, p_end)
    time, p = _integer(data, p, p_end)
    _, _, p = _bytes(data, p, p_end)
    mac, mac_at, p = _bytes(data, p, p_end)
    salt, _, _ = _bytes(data, p, p_end)
    flag = flags[0] if flags else 0
    authenticated = bool(flag & FLAG_AUTH)
    keys = keys_of(engine_id) if authenticated else None
    if authenticated:
        if keys is None or len(mac) != keys.auth.mac_bytes:
            raise ValueError("authenticated by an engine or protocol not asked")
        zeroed = data[:mac_at] + b"\x00" * len(mac) + data[mac_at + len(mac):]
        want = hmac.digest(keys.auth_key, zeroed, keys.auth.digest)[:len(mac)]
        if not hmac.compare_digest(want, mac):
            raise ValueError("wrong HMAC: not from the agent, or other keys")
    scoped = data[i:end]
    if flag & FLAG_PRIV:
        if keys is None or len(salt) != 8:
            raise ValueError("encrypted without authentication or salt")
        cipher, _, _ = _bytes(data, i, end)
        scoped = _aes(keys.priv_key, boots, time, salt, cipher, False)
    _, s, s_end = _tlv(scoped, 0, len(scoped), 0x30)
    _, _, s = _tlv(scoped, s, s_end, 0x04)
    _, _, s = _tlv(scoped, s, s_end, 0x04)
    tag, _, pdu_end = _tlv(scoped, s, s_end)
    if tag not in (pdu.RESPONSE, REPORT):
        raise ValueError(f"PDU tag 0x{tag:02x} is neither a Response nor a Report")
    if not authenticated and tag != REPORT:
        raise ValueError("an unauthenticated Response")
    body = bytes((pdu.RESPONSE,)) + scoped[s + 1:pdu_end]
    wrapped = mib.ber_tlv(0x30, _int(pdu.V2C) + _octets(b"") + body)
    response = pdu.decode_response(wrapped)
    report = response.rows[0][0] if tag == REPORT and response.rows else None
    if tag == REPORT and report is None:
        report = ()
    return UsmResponse(msg_id, Engine(engine_id, boots, time), authenticated, response, report)


USM_STATS: Final[Oid] = (1, 3, 6, 1, 6, 3, 15, 1, 1)
UNKNOWN_ENGINE_ID: Final[Oid] = (*USM_STATS, 4, 0)
NOT_IN_TIME_WINDOW: Final[Oid] = (*USM_STATS, 2, 0)

__all__ = [
    "AUTH", "NOT_IN_TIME_WINDOW", "PRIV", "UNKNOWN_ENGINE_ID", "AuthProtocol", "Engine",
    "UsmError", "UsmKeys", "UsmResponse", "decode_message", "encode_pdu", "encode_request",
    "localized_keys", "message_id", "new_salt",
]
