"""SNMPv2c messages as an agent sees them, for fake agents in tests."""

from __future__ import annotations

from fabricops.collectors import snmp_decode as dec
from fabricops.core import snmp_mib as mib
from fabricops.core.snmp_mib import Oid


def read_getbulk(data: bytes) -> tuple[bytes, int, list[Oid]]:
    """(community, request-id, OIDs) of an SNMPv2c GetBulkRequest."""

    def tlv(i: int) -> tuple[int, int]:
        n, i = data[i + 1], i + 2
        if n & 0x80:
            k = n & 0x7F
            n, i = int.from_bytes(data[i:i + k], "big"), i + k
        return i, i + n

    i = tlv(0)[0]
    i = tlv(i)[1]  # version
    start, i = tlv(i)
    community = data[start:i]
    i = tlv(i)[0]  # PDU
    start, i = tlv(i)
    request_id = int.from_bytes(data[start:i], "big", signed=True)
    i = tlv(tlv(i)[1])[1]  # non-repeaters, max-repetitions
    i, end = tlv(i)
    oids = []
    while i < end:
        j, i = tlv(i)
        start, stop = tlv(j)
        oids.append(dec.decode_oid(data[start:stop]))
    return community, request_id, oids


def response(community: bytes, request_id: int, varbinds: list[tuple[Oid, bytes]]) -> bytes:
    """An SNMPv2c Response-PDU carrying ``varbinds`` (OID, BER-encoded value)."""
    integer = mib.Syntax.INTEGER
    body = b"".join(mib.ber_varbind(oid, value) for oid, value in varbinds)
    pdu = mib.ber_value(integer, request_id) + mib.ber_value(integer, 0) * 2 + \
        mib.ber_tlv(0x30, body)
    return mib.ber_tlv(0x30, mib.ber_value(integer, 1) + mib.ber_tlv(0x04, community) +
                       mib.ber_tlv(0xA2, pdu))


def end_of_mib(community: bytes, request_id: int, oids: list[Oid]) -> bytes:
    """The answer of an agent with nothing past ``oids``."""
    return response(community, request_id, [(o, mib.END_OF_MIB_VIEW) for o in oids])
