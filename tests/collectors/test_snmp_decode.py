"""SNMP decoding: counter continuity through wraps and resets, rows to samples, v2c messages."""

from __future__ import annotations

import pytest
from pyasn1.codec.ber.decoder import decode as ber_decode
from pyasn1.codec.ber.encoder import encode as ber_encode
from pysnmp.proto import rfc1902, rfc1905
from pysnmp.proto.api import v2c

from fabricops.collectors import snmp_decode as dec
from fabricops.core import snmp_entity_mib as ent
from fabricops.core import snmp_mib as mib


def samples(values: list[int], widths: list[int], ports: int = 1) -> dec.Samples:
    n = len(values) // ports
    return dec.Samples(entities=[f"sw:eth{i // n + 1}" for i in range(len(values))],
                       metrics=["in_errors", "in_octets", "oper_status"][:n] * ports,
                       values=list(values), widths=list(widths))


def test_counter32_wraps_are_carried_past_2_32() -> None:
    tracker = dec.CounterTracker()
    top = 2**32 - 10
    first = tracker.update(samples([top, 5, 1], [32, 64, 0]))
    assert (first.values, first.wraps, first.resets) == ([top, 5, 1], 0, 0)
    second = tracker.update(samples([20, 9, 2], [32, 64, 0]))
    assert second.values == [2**32 + 20, 9, 2]
    assert (second.wraps, second.resets) == (1, 0)
    third = tracker.update(samples([2**31, 9, 2], [32, 64, 0]))
    assert third.values == [2**32 + 2**31, 9, 2]


def test_a_counter_going_back_further_than_a_wrap_explains_is_a_reset() -> None:
    tracker = dec.CounterTracker()
    tracker.update(samples([1000, 2**40, 1], [32, 64, 1]))
    after = tracker.update(samples([10, 2**40 - 1, 2], [32, 64, 1]))
    assert after.values == [10, 2**40 - 1, 2]
    assert (after.wraps, after.resets) == (0, 2)
    going_on = tracker.update(samples([15, 2**40 + 4, 2], [32, 64, 1]))
    assert going_on.values == [15, 2**40 + 4, 2]
    assert (going_on.wraps, going_on.resets) == (0, 0)


def test_series_follow_their_port_when_ports_come_and_go() -> None:
    tracker = dec.CounterTracker()
    tracker.update(samples([2**32 - 1, 7, 1, 2**32 - 2, 8, 1], [32, 64, 0] * 2, ports=2))
    one_port = samples([3, 9, 1], [32, 64, 0])
    one_port.entities = ["sw:eth2"] * 3
    moved = tracker.update(one_port)
    assert moved.values == [2**32 + 3, 9, 1]
    back = tracker.update(samples([2**32 - 1, 1, 1, 4, 10, 1], [32, 64, 0] * 2, ports=2))
    assert back.values == [2**32 - 1, 1, 1, 2**32 + 4, 10, 1]
    assert back.resets == 0  # eth1 is a new series again, not a counter that went back


def test_rows_become_catalogue_samples() -> None:
    enc = mib.SENSOR_ENCODING[mib.SensorKind.RX_POWER]
    rx1, rx2 = mib.sensor_index(1, mib.SensorKind.RX_POWER), mib.sensor_index(2,
                                                                               mib.SensorKind.RX_POWER)
    tables: dict[mib.Oid, dict[mib.Oid, int | bytes]] = {
        mib.IF_NAME.oid: {(1,): b"eth1", (2,): b"eth2"},
        mib.SENSOR_TYPE.oid: {(rx1,): enc.type, (rx2,): enc.type},
        mib.SENSOR_SCALE.oid: {(rx1,): enc.scale, (rx2,): enc.scale},
        mib.SENSOR_PRECISION.oid: {(rx1,): enc.precision, (rx2,): enc.precision},
        mib.IF_HC_IN_OCTETS.oid: {(1,): 5, (2,): 6, (3,): 7},
        mib.IF_IN_ERRORS.oid: {(1,): b"junk", (2,): 1},
        mib.PRIO_REQUESTS.oid: {(1, 3): 11, (1, 9): 1},
        mib.PFC_REQUESTS.oid: {(1,): 11, (2,): 12},
        mib.SENSOR_VALUE.oid: {(rx1,): mib.encode_sensor(mib.SensorKind.RX_POWER, -3.0),
                               (rx2,): 0},
        ent.PHY_NAME.oid: {(rx1,): b"eth1 Rx Power", (rx2,): b"eth2 Rx Power"},
        ent.PHY_CONTAINED_IN.oid: {(rx1,): 1001, (rx2,): 1002},  # port entities
        ent.ALIAS_MAPPING.oid: {(1001, 0): ent.alias_to_if_index(1),
                                (1002, 0): ent.alias_to_if_index(2)},
    }
    desc = dec.describe(tables)
    assert desc.names == {1: "eth1", 2: "eth2", 3: "ifIndex-3"}  # no ifName: named by index
    out = dec.decode_samples("sw", tables, desc)
    got = {(e, m): v for e, m, v in zip(out.entities, out.metrics, out.values, strict=True)}
    assert got == {
        ("sw:eth1", "in_octets"): 5, ("sw:eth2", "in_octets"): 6, ("sw:eth2", "in_errors"): 1,
        ("sw:ifIndex-3", "in_octets"): 7,
        ("sw:eth1", "pfc_tx_pause{prio=3}"): 11, ("sw:eth2", "pfc_tx_pause{prio=3}"): 12,
        ("sw:eth1", "rx_power_dbm"): pytest.approx(-3.0, abs=1e-6),
        ("sw:eth2", "rx_power_dbm"): mib.DARK_DBM,
    }
    assert (out.unknown_ports, out.malformed) == (0, 1)  # junk
    assert out.skipped == {"index_not_ifindex_priority": 1}  # prio 9: not used, no error
    assert dec.decode_samples("sw", tables, desc, pfc_fallback_priority=None).metrics.count(
        "pfc_tx_pause{prio=3}") == 1
    walk = desc.columns_to_walk(tables)
    assert mib.PRIO_REQUESTS in walk
    assert mib.PFC_REQUESTS not in walk  # per-priority counters make the totals redundant
    assert mib.IF_HC_OUT_OCTETS not in walk  # no rows on this device


def test_v2c_messages_agree_with_pyasn1() -> None:
    request, _ = ber_decode(dec.encode_getbulk(b"leaf-0", 77, [(1, 3, 6, 1), (1, 3, 6, 2)], 1, 9),
                            asn1Spec=v2c.Message())
    pdu = request["data"]["get-bulk-request"]
    assert (str(request["community"]), int(pdu["request-id"])) == ("leaf-0", 77)
    assert (int(pdu["non-repeaters"]), int(pdu["max-repetitions"])) == (1, 9)
    response = v2c.apiPDU.get_response(v2c.GetRequestPDU())
    v2c.apiPDU.set_request_id(response, 2**31 - 1)
    varbinds = [((1, 3, 6, 1, 2, 1, 1, 5, 0), rfc1902.OctetString(b"leaf-0")),
                ((1, 3, 6, 1, 2, 1, 2, 2, 1, 8, 1), rfc1902.Integer32(-5)),
                ((1, 3, 6, 1, 2, 1, 2, 2, 1, 14, 1), rfc1902.Counter32(2**32 - 1)),
                ((1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6, 1), rfc1902.Counter64(2**64 - 1)),
                ((1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 15, 1), rfc1902.Gauge32(400000)),
                ((1, 3, 6, 1, 9), rfc1905.endOfMibView)]
    v2c.apiPDU.set_varbinds(response, varbinds)
    message = v2c.Message()
    v2c.apiMessage.set_defaults(message)
    v2c.apiMessage.set_community(message, b"leaf-0")
    v2c.apiMessage.set_pdu(message, response)
    decoded = dec.decode_response(ber_encode(message))
    assert decoded.request_id == 2**31 - 1
    assert decoded.rows == [(varbinds[0][0], b"leaf-0"), (varbinds[1][0], -5),
                            (varbinds[2][0], 2**32 - 1), (varbinds[3][0], 2**64 - 1),
                            (varbinds[4][0], 400000), (varbinds[5][0], None)]
    whole = ber_encode(message)
    for bad, cause in ((whole[:-3], "runs past"), (b"\x31" + whole[1:], "tag 0x31"),
                       (b"", "index out of range")):
        with pytest.raises(dec.SnmpDecodeError, match=cause):
            dec.decode_response(bad)
