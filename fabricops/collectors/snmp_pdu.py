"""SNMPv1 and SNMPv2c messages: the requests the poller sends, the responses it reads.

Pure functions over bytes (BER, RFC 1157 and RFC 3416). ``encode_request`` builds
a GetBulkRequest (v2c) or a GetNextRequest (v1 or v2c); ``decode_response``
parses a Response-PDU of either version into :class:`Response`, whose rows are
``(oid, value)`` with values ``int`` (INTEGER, Counter32/64, Gauge32, TimeTicks),
``bytes`` (OCTET STRING, OBJECT IDENTIFIER contents, IpAddress, Opaque) or None
(noSuchObject, noSuchInstance, endOfMibView, NULL). Anything else raises
:class:`SnmpDecodeError` naming the defect: that is the only error decoding a
datagram can give.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from fabricops.core import snmp_mib as mib
from fabricops.core.snmp_mib import Oid

Row = tuple[Oid, int | bytes | None]  # None: noSuchObject, noSuchInstance, endOfMibView, NULL
GETNEXT, GETBULK, RESPONSE = 0xA1, 0xA5, 0xA2
V1, V2C = 0, 1  # the msgVersion field
NO_SUCH_NAME: Final = 2  # SNMPv1 error-status at the end of a GETNEXT walk
TOO_BIG: Final = 1
_UNSIGNED = frozenset((0x41, 0x42, 0x43, 0x46))  # Counter32, Gauge32, TimeTicks, Counter64
_NO_VALUE = frozenset((0x05, 0x80, 0x81, 0x82))


class SnmpDecodeError(ValueError):
    """A datagram that is not a well-formed SNMP response; the message says why."""


@dataclass(frozen=True)
class Response:
    """A decoded Response-PDU (``version`` 0 for SNMPv1, 1 for SNMPv2c)."""

    request_id: int
    error_status: int
    error_index: int
    rows: list[Row]
    version: int = V2C


def encode_request(version: int, community: bytes, request_id: int, oids: Sequence[Oid],
                   non_repeaters: int = 0, max_repetitions: int = 0,
                   pdu: int = GETBULK) -> bytes:
    """A GetBulkRequest or GetNextRequest (``pdu``) for ``oids`` (values NULL)."""
    varbinds = b"".join(mib.ber_tlv(0x30, mib.ber_oid(o) + b"\x05\x00") for o in oids)
    fields = (request_id, non_repeaters, max_repetitions) if pdu == GETBULK else \
        (request_id, 0, 0)
    head = b"".join(mib.ber_value(mib.Syntax.INTEGER, v) for v in fields)
    body = mib.ber_value(mib.Syntax.INTEGER, version) + mib.ber_tlv(0x04, community) + \
        mib.ber_tlv(pdu, head + mib.ber_tlv(0x30, varbinds))
    return mib.ber_tlv(0x30, body)


def encode_getbulk(community: bytes, request_id: int, oids: Sequence[Oid],
                   non_repeaters: int, max_repetitions: int) -> bytes:
    """An SNMPv2c GetBulkRequest for ``oids`` (values NULL)."""
    return encode_request(V2C, community, request_id, oids, non_repeaters, max_repetitions)


def decode_response(data: bytes) -> Response:
    """Parse an SNMPv1 or SNMPv2c Response-PDU; SnmpDecodeError names the defect."""
    try:
        return _decode_response(data)
    except (IndexError, ValueError) as exc:
        raise SnmpDecodeError(f"malformed SNMP response ({len(data)} bytes): {exc}"
                              ) from None


def _decode_response(data: bytes) -> Response:
    i, end = _enter(data, 0, 0x30, len(data))
    version, i = _integer(data, i, end)
    i = _skip(data, i, end, 0x04)
    i, end = _enter(data, i, RESPONSE, end)
    if version not in (V1, V2C):
        raise ValueError(f"version {version} is neither SNMPv1 nor SNMPv2c")
    request_id, i = _integer(data, i, end)
    status, i = _integer(data, i, end)
    index, i = _integer(data, i, end)
    i, end = _enter(data, i, 0x30, end)
    rows: list[Row] = []
    while i < end:
        j, i = _enter(data, i, 0x30, end)
        k, j = _enter(data, j, 0x06, i)
        oid = decode_oid(data[k:j])
        tag = data[j]
        k, j = _enter(data, j, tag, i)
        rows.append((oid, _value(tag, data[k:j])))
    return Response(request_id, status, index, rows, version)


def _enter(data: bytes, i: int, tag: int, limit: int) -> tuple[int, int]:
    """(start, end) of the contents of the TLV at ``i``, which must have ``tag``."""
    if data[i] != tag:
        raise ValueError(f"tag 0x{data[i]:02x} at offset {i}, expected 0x{tag:02x}")
    n, i = data[i + 1], i + 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4:
            raise ValueError(f"unsupported length form at offset {i - 1}")
        n, i = int.from_bytes(data[i:i + k], "big"), i + k
    if i + n > limit:
        raise ValueError(f"length {n} at offset {i} runs past its container")
    return i, i + n


def _skip(data: bytes, i: int, limit: int, tag: int) -> int:
    return _enter(data, i, tag, limit)[1]


def _integer(data: bytes, i: int, limit: int) -> tuple[int, int]:
    start, end = _enter(data, i, 0x02, limit)
    return int.from_bytes(data[start:end], "big", signed=True), end


def _value(tag: int, content: bytes) -> int | bytes | None:
    if tag == 0x02:
        return int.from_bytes(content, "big", signed=True)
    if tag in _UNSIGNED:
        return int.from_bytes(content, "big")
    return None if tag in _NO_VALUE else bytes(content)


_oid_cache: dict[bytes, Oid] = {}
_OID_CACHE_MAX = 1 << 18


def decode_oid(content: bytes) -> Oid:
    """An OID from the contents octets of its BER encoding (recent ones are cached)."""
    oid = _oid_cache.get(content)
    if oid is None:
        if len(_oid_cache) >= _OID_CACHE_MAX:
            _oid_cache.clear()
        oid = _oid_cache[content] = _parse_oid(content)
    return oid


def _parse_oid(content: bytes) -> Oid:
    subids, acc = [], 0
    for b in content:
        acc = (acc << 7) | (b & 0x7F)
        if not b & 0x80:
            subids.append(acc)
            acc = 0
    if not subids or content[-1] & 0x80:
        raise ValueError("truncated OBJECT IDENTIFIER")
    first = subids[0]
    head = (first // 40, first % 40) if first < 80 else (2, first - 80)
    return (*head, *subids[1:])


__all__ = ["GETBULK", "GETNEXT", "NO_SUCH_NAME", "TOO_BIG", "V1", "V2C", "Response", "Row",
           "SnmpDecodeError", "decode_oid", "decode_response", "encode_getbulk",
           "encode_request"]
