"""Sensors located through ENTITY-MIB: containment, naming, lanes, and bad rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.collectors import snmp_decode as dec
from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, SnmpTarget
from fabricops.collectors.snmp_entity import SWITCH, learn_sensors, read_sensors
from fabricops.core import snmp_entity_mib as ent
from fabricops.core import snmp_mib as mib
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.inventory import SnmpCredentials
from fabricops.core.sinks import ListSink
from fabricops.core.snmp_entity_mib import PhysicalClass as C
from fabricops.core.snmp_entity_mib import SensorDataType as T
from tests.collectors.snmprec import (
    WALKS,
    Record,
    read_snmprec,
    snmpsim_agent,
    tables_of,
    write_snmprec,
)

Tables = dict[mib.Oid, dict[mib.Oid, int | bytes]]


class Tree:
    """Builds the rows of an ENTITY-MIB tree and its sensors, as a walk returns them."""

    def __init__(self) -> None:
        self.t: Tables = {}

    def put(self, col: mib.Column, idx: mib.Oid, value: int | bytes) -> Tree:
        self.t.setdefault(col.oid, {})[idx] = value
        return self

    def entity(self, idx: int, parent: int, klass: int, name: str = "", descr: str = "",
               alias: int | None = None) -> Tree:
        self.put(ent.PHY_CONTAINED_IN, (idx,), parent).put(ent.PHY_CLASS, (idx,), klass)
        self.put(ent.PHY_NAME, (idx,), name.encode()).put(ent.PHY_DESCR, (idx,), descr.encode())
        if alias is not None:
            self.put(ent.ALIAS_MAPPING, (idx, 0), ent.alias_to_if_index(alias))
        return self

    def sensor(self, idx: int, parent: int, name: str, kind: int, raw: int, scale: int = 9,
               precision: int = 2, status: int = 1) -> Tree:
        self.entity(idx, parent, C.SENSOR, name, name)
        for col, v in ((mib.SENSOR_TYPE, kind), (mib.SENSOR_SCALE, scale),
                       (mib.SENSOR_PRECISION, precision), (mib.SENSOR_STATUS, status),
                       (mib.SENSOR_VALUE, raw)):
            self.put(col, (idx,), v)
        return self

    def ifname(self, ifx: int, name: str) -> Tree:
        return self.put(mib.IF_NAME, (ifx,), name.encode())


def readings(t: Tables) -> dict[tuple[int, str], float]:
    return read_sensors(t, learn_sensors(t)).values


def test_a_sensor_lands_on_the_port_its_transceiver_holds_never_by_index_arithmetic() -> None:
    t = (Tree().entity(1, 0, C.CHASSIS, "Chassis")
         .entity(7001, 1, C.CONTAINER, "Xcvr Slot 1", "cage")
         .entity(7002, 7001, C.MODULE, "Xcvr 1", "QSFP-DD transceiver")
         .entity(7003, 7002, C.PORT, "Ethernet1/1", alias=17)
         .sensor(7010, 7002, "DOM Rx Power Lane 1", T.DBM, -150)
         .sensor(7011, 7002, "DOM Rx Power Lane 2", T.DBM, -310)
         .sensor(7012, 7002, "DOM Tx Power Lane 1", T.DBM, 45)
         .sensor(7013, 7002, "DOM Tx Bias Lane 1", T.AMPERES, 650, scale=8)
         .sensor(7014, 7002, "DOM Tx Bias Lane 2", T.AMPERES, 700, scale=8)
         .sensor(7015, 7002, "DOM Voltage", T.VOLTS_DC, 329)
         .sensor(7016, 7002, "DOM Temperature", T.CELSIUS, 3550)
         .sensor(101, 1, "Board temperature", T.CELSIUS, 4120)).t
    assert readings(t) == pytest.approx({
        (17, "rx_power_dbm"): -3.10, (17, "tx_power_dbm"): 0.45, (17, "tx_bias_ma"): 7.0,
        (17, "supply_voltage_v"): 3.29, (17, "temperature_c"): 35.5,
        (SWITCH, "chassis_temperature_c"): 41.2})


def test_ports_are_found_by_name_when_there_is_no_alias_table() -> None:
    t = (Tree().ifname(9, "Ethernet8").entity(1, 0, C.CHASSIS)
         .entity(1000000900, 1, C.PORT, "Ethernet8", "QSFP-DD transceiver")
         .sensor(1000000931, 1000000900, "DOM RX Power Sensor for Ethernet8/1", T.DBM, -120)).t
    assert readings(t) == pytest.approx({(9, "rx_power_dbm"): -1.2})


def test_a_breakout_transceiver_reports_on_its_first_port_and_a_linecard_never() -> None:
    t = (Tree().entity(1, 0, C.CHASSIS)
         .entity(50, 1, C.MODULE, "Linecard 1", "32x400G QSFP-DD linecard")
         .entity(60, 50, C.MODULE, "Xcvr 3", "QSFP-DD 2x200G breakout")
         .entity(61, 60, C.PORT, "Ethernet3/1", alias=31)
         .entity(62, 60, C.PORT, "Ethernet3/2", alias=32)
         .sensor(63, 60, "Xcvr 3 Rx power", T.DBM, -200)
         .sensor(51, 50, "Linecard 1 inlet temperature", T.CELSIUS, 3300)).t
    assert readings(t) == pytest.approx({(31, "rx_power_dbm"): -2.0,
                                         (SWITCH, "chassis_temperature_c"): 33.0})


def test_fans_and_power_supplies_belong_to_the_switch() -> None:
    t = (Tree().entity(1, 0, C.CHASSIS)
         .entity(20, 1, C.FAN, "Fan 1").sensor(21, 20, "Fan 1 speed", T.RPM, 9000, precision=0)
         .entity(30, 1, C.FAN, "Fan 2").sensor(31, 30, "Fan 2 speed", T.RPM, 8700, precision=0)
         .entity(40, 1, C.POWER_SUPPLY, "PSU1").sensor(41, 40, "PSU1 power", T.WATTS, 30000)
         .entity(50, 1, C.POWER_SUPPLY, "PSU2").sensor(51, 50, "PSU2 power", T.WATTS, 31000)
         .sensor(60, 1, "Board watts", T.WATTS, 5)).t
    smap = learn_sensors(t)
    assert read_sensors(t, smap).values == pytest.approx({
        (SWITCH, "fan_speed_rpm"): 8700.0, (SWITCH, "psu_power_w"): 610.0})
    assert smap.unmapped == {"chassis_sensor_without_metric": 1}  # watts outside a PSU


def test_watts_are_shown_as_dbm_and_a_dark_receiver_as_the_floor() -> None:
    t = (Tree().entity(1, 0, C.PORT, "p1", alias=1)
         .sensor(2, 1, "Rx power lane 1", T.WATTS, 5000, scale=7, precision=1)  # 500 uW
         .sensor(3, 1, "Tx power lane 1", T.WATTS, 0, scale=7, precision=1)).t
    assert readings(t) == pytest.approx({(1, "rx_power_dbm"): -3.0103, (1, "tx_power_dbm"):
                                         mib.DARK_DBM}, abs=1e-3)


def test_sensors_that_cannot_be_placed_or_measured_are_counted() -> None:
    t = (Tree().entity(1, 0, C.CHASSIS).entity(2, 1, C.PORT, "p1", alias=1)
         .sensor(3, 2, "optical power", T.DBM, -100)  # neither rx nor tx
         .sensor(4, 2, "Rx/Tx power", T.DBM, -100)  # both
         .sensor(5, 2, "relative humidity", T.PERCENT_RH, 40)
         .sensor(6, 2, "Rx power", T.DBM, -100, status=2)  # unavailable
         .sensor(7, 1, "frequency", T.HERTZ, 50)).t
    smap = learn_sensors(t)
    assert smap.sensors == {}
    assert smap.unmapped == {"power_sensor_direction_unknown": 2, "port_sensor_without_metric": 1,
                             "sensor_not_ok": 1, "chassis_sensor_without_metric": 1}


@pytest.mark.parametrize(("col", "idx", "value", "reason"), [
    (ent.PHY_CONTAINED_IN, (2,), b"junk", "malformed_entity_row"),
    (ent.PHY_CLASS, (2, 9), 10, "malformed_entity_row"),  # truncated or extra index
    (ent.ALIAS_MAPPING, (9, 0), b"\x2b\x06\x01\x02\x01\x02\x02\x01", "malformed_alias_row"),
    (ent.ALIAS_MAPPING, (9, 0), b"\xff", "malformed_alias_row"),  # truncated OID
    (ent.ALIAS_MAPPING, (9,), ent.alias_to_if_index(1), "malformed_alias_row"),
    (mib.SENSOR_TYPE, (8, 1), T.DBM, "malformed_sensor_row"),
    (mib.SENSOR_SCALE, (3,), 0, "sensor_scale_out_of_range"),
    (mib.SENSOR_SCALE, (3,), 18, "sensor_scale_out_of_range"),
    (mib.SENSOR_PRECISION, (3,), 10, "sensor_scale_out_of_range"),
    (mib.SENSOR_PRECISION, (3,), b"2", "malformed_sensor_row"),
])
def test_garbage_describe_rows_are_counted_by_reason(col: mib.Column, idx: mib.Oid,
                                                     value: int | bytes, reason: str) -> None:
    t = (Tree().entity(1, 0, C.CHASSIS).entity(2, 1, C.PORT, "p1", alias=1)
         .sensor(3, 2, "Rx power", T.DBM, -100).put(col, idx, value)).t
    assert learn_sensors(t).unmapped.get(reason, 0) >= 1


@pytest.mark.parametrize(("raw", "problem"), [
    (b"-1.5", "no number"),  # an OCTET STRING where an Integer32 belongs
    (9000, "outside [-100, 30]"),  # +90 dBm: no transceiver sends that
    (-12000, "outside [-100, 30]"),
    (1 << 70, "no number"),  # wider than any SNMP integer
])
def test_garbage_and_out_of_range_values_are_malformed_and_skipped(raw: int | bytes,
                                                                   problem: str) -> None:
    t = (Tree().entity(1, 0, C.PORT, "p1", alias=1)
         .sensor(2, 1, "Rx power lane 1", T.DBM, -150)
         .sensor(3, 1, "Rx power lane 2", T.DBM, -170)).t
    smap = learn_sensors(t)
    t[mib.SENSOR_VALUE.oid][(3,)] = raw
    out = read_sensors(t, smap)
    assert out.values == pytest.approx({(1, "rx_power_dbm"): -1.5})  # the good lane stays
    assert out.malformed == 1
    assert out.problem is not None
    assert problem in out.problem
    assert "entity 3" in out.problem


def test_rows_of_sensors_not_described_are_skipped_and_counted() -> None:
    t = Tree().entity(1, 0, C.PORT, "p1", alias=1).sensor(2, 1, "Rx power", T.DBM, -150).t
    smap = learn_sensors(t)
    t[mib.SENSOR_VALUE.oid][(99,)] = -100
    out = read_sensors(t, smap)
    assert out.skipped == {"not_described": 1}
    assert out.malformed == 0


def test_a_containment_loop_ends() -> None:
    t = (Tree().entity(1, 2, C.MODULE, "a", "transceiver").entity(2, 1, C.MODULE, "b")
         .sensor(3, 1, "Rx power", T.DBM, -150)).t
    smap = learn_sensors(t)
    assert smap.sensors == {}
    assert smap.unmapped == {"chassis_sensor_without_metric": 1}


def test_vendor_dom_rows_with_bad_indexes_or_no_reading_are_counted() -> None:
    jdom, jlane = ent.DOM_COLUMNS[0].column, ent.DOM_COLUMNS[5].column
    t: Tables = {mib.IF_NAME.oid: {(516,): b"et-0/0/0"},
                 jdom.oid: {(516,): -250, (517, 1): -100},  # the second: one sub-id too many
                 jlane.oid: {(516, 0): -300, (516,): -100}}  # the second: lane missing
    smap = learn_sensors(t)
    assert smap.unmapped == {"malformed_dom_row": 2}
    t[jlane.oid][(516, 0)] = -2147483648  # "no reading"
    out = read_sensors(t, smap)
    assert out.values == pytest.approx({(516, "rx_power_dbm"): -2.5})
    assert out.skipped == {"no_reading": 1, "not_described": 2}  # the bad rows


def test_describe_learns_the_map_and_later_polls_ask_only_for_sensor_values() -> None:
    records = read_snmprec(WALKS / "cisco_nxos.snmprec")
    tables = tables_of(records, dec.STATIC_COLUMNS + dec.DYNAMIC_COLUMNS)
    desc = dec.describe(tables)
    walk = desc.columns_to_walk(tables)
    assert ent.CSENSOR_VALUE in walk
    assert mib.SENSOR_VALUE not in walk  # NX-OS serves the Cisco table only
    assert not {ent.CSENSOR_TYPE, ent.PHY_CONTAINED_IN, ent.ALIAS_MAPPING} & set(walk)
    assert len(desc.sensors.sensors) == 4 * 14 + 3 + 2


def _garbled(records: list[Record]) -> list[Record]:
    """The Arista walk with bad sensor rows: a string value, an impossible reading, a
    value row of an index no sensor has, and a sensor type row with a truncated index."""
    bad = {(*mib.SENSOR_VALUE.oid, 100003141): Record((*mib.SENSOR_VALUE.oid, 100003141), 4,
                                                      b"n/a"),
           (*mib.SENSOR_VALUE.oid, 100003142): Record((*mib.SENSOR_VALUE.oid, 100003142), 2,
                                                      90000)}
    out = [bad.get(r.oid, r) for r in records]
    out.append(Record((*mib.SENSOR_VALUE.oid, 123), 2, 5))
    out.append(Record((*mib.SENSOR_TYPE.oid, 100003199, 1), 2, 14))
    return out


def test_garbage_sensor_rows_over_udp_are_counted_and_the_poll_goes_on(tmp_path: Path) -> None:
    """snmpsim serves the garbled Arista walk: both polls succeed, the ports keep their
    other optics and counters, and the bad rows are counted as malformed."""
    write_snmprec(tmp_path / "garbled.snmprec",
                  _garbled(read_snmprec(WALKS / "arista_eos.snmprec")))
    with snmpsim_agent(tmp_path) as agent:
        target = SnmpTarget(device="sw", port=agent.port, timeout_s=3.0,
                            credentials=SnmpCredentials(community="garbled"))
        sink, registry = ListSink(), CollectorRegistry()
        poller = SnmpPoller(SnmpPollerConfig(targets=(target,)), sink, registry)
        poller.start(schedule=False)
        try:
            statuses = [poller.collect_once()["sw"] for _ in range(2)]
        finally:
            poller.stop()
    assert all(s.up for s in statuses), statuses
    assert len(sink.frames) == 2
    frame = sink.frames[-1]
    names = {(frame.entities[e], m) for e, m in zip(frame.entity_idx.tolist(),
                                                    frame.metric.tolist(), strict=True)}
    rx = CATALOGUE.id_of("rx_power_dbm")
    assert ("sw:Ethernet1/1", rx) in names  # lanes 3 and 4 of Ethernet1/1 still count
    value = registry.get_sample_value
    assert value("fabricops_snmp_errors_total", {"reason": "malformed_row"}) == 2 * 2
    assert value("fabricops_snmp_rows_skipped_total", {"reason": "sensor_not_described"}
                 ) == 2  # the value row of no sensor, each poll
    assert value("fabricops_snmp_rows_skipped_total", {"reason": "sensor_malformed_sensor_row"}
                 ) == 1  # the type row with a truncated index, at the describe
