"""Recorded walks of five vendor families: every optic, counter and sensor lands right.

Each ``walks/<vendor>.snmprec`` is a switch written from that vendor's published
MIBs and layout: four 400G ports with QSFP-DD optics (four lanes each) and a
management port without optics, interface tables, PFC counters where the vendor
serves them, an ENTITY-MIB tree and chassis sensors.

- ``arista_eos``: ENTITY-SENSOR-MIB sensors in each transceiver (dBm(14), bias in
  milliamps), the port entity inside the transceiver mapped by entAliasMappingTable;
  IEEE8021-PFC-MIB per-port totals; board, fan and power-supply sensors.
- ``cisco_nxos``: CISCO-ENTITY-SENSOR-MIB lane sensors in a transceiver of class
  port mapped to its ifIndex (NX-OS 0x1a000000-based ifIndexes); CISCO-PFC-EXT-MIB
  per-priority counters; module temperatures and power-supply output power.
- ``juniper_junos``: JUNIPER-DOM-MIB module and lane tables per ifIndex;
  jnxOperatingTemp for chassis components (0 for a fan tray without a sensor);
  Junos serves no PFC counter over SNMP.
- ``huawei_vrp``: HUAWEI-ENTITY-EXTENT-MIB hwOpticalModuleInfoTable per port entity
  (microwatts, millivolts, microamps), port entities mapped by entAliasMappingTable;
  hwEntityTemperature per board (0: none); no PFC table.
- ``sonic``: sonic-snmpagent's numbering (transceiver 1000000000 + ifIndex x 100,
  sensors below it, chassis thermals 2009901x0, fans 50x020120, PSUs 60x24xxx0),
  transceivers named after the interface and no alias table; CISCO-PFC-EXT-MIB.

Optic values are the same design in every walk (port k = 0..3): receive lanes
around -1 dBm with one weak lane of -7.85 dBm on port 2, so the documented lane
rule (weakest receive and transmit lane, highest bias) is visible.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.collectors import snmp_decode as dec
from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, SnmpTarget
from fabricops.collectors.snmp_entity import DESCRIBE_COLUMNS, VALUE_COLUMNS
from fabricops.core import snmp_mib as mib
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.inventory import SnmpCredentials
from fabricops.core.sinks import ListSink
from tests.collectors.snmprec import (
    WALKS,
    Record,
    SimAgent,
    read_snmprec,
    snmpsim_agent,
    tables_of,
    write_snmprec,
)

OPTICS = ("rx_power_dbm", "tx_power_dbm", "tx_bias_ma", "temperature_c", "supply_voltage_v")
DESIGN = [(-1.40, 0.41, 7.14, 34.0, 3.28), (-1.60, 0.51, 8.14, 35.5, 3.29),
          (-7.85, 0.61, 9.14, 37.0, 3.30), (-2.00, 0.71, 10.14, 38.5, 3.31)]
WHOLE_DEGREES = [(34.0,), (36.0,), (37.0,), (38.0,)]  # Junos and VRP report whole degrees
HUAWEI_POWER = [(-1.169, 0.519), (-1.373, 0.622), (-2.565, 0.722), (-1.772, 0.821)]


def _optics(ports: list[str], vendor: str) -> dict[tuple[str, str], float]:
    out = {}
    for k, port in enumerate(ports):
        values = list(DESIGN[k])
        if vendor in ("juniper_junos", "huawei_vrp"):
            values[3] = WHOLE_DEGREES[k][0]
        if vendor == "huawei_vrp":  # module-level power, the lanes' mean in microwatts
            values[0], values[1] = HUAWEI_POWER[k]
        out.update({(f"{vendor}:{port}", m): v for m, v in zip(OPTICS, values, strict=True)})
    return out


PORTS = {
    "arista_eos": ["Ethernet1/1", "Ethernet2/1", "Ethernet3/1", "Ethernet4/1"],
    "cisco_nxos": ["Ethernet1/1", "Ethernet1/2", "Ethernet1/3", "Ethernet1/4"],
    "juniper_junos": ["et-0/0/0", "et-0/0/1", "et-0/0/2", "et-0/0/3"],
    "huawei_vrp": ["400GE1/0/1", "400GE1/0/2", "400GE1/0/3", "400GE1/0/4"],
    "sonic": ["Ethernet0", "Ethernet8", "Ethernet16", "Ethernet24"],
}
CHASSIS = {
    "arista_eos": {"chassis_temperature_c": 41.2, "fan_speed_rpm": 9180.0,
                   "psu_power_w": 605.0},
    "cisco_nxos": {"chassis_temperature_c": 61.0, "psu_power_w": 1084.0},
    "juniper_junos": {"chassis_temperature_c": 41.0},
    "huawei_vrp": {"chassis_temperature_c": 47.0},
    "sonic": {"chassis_temperature_c": 52.25, "fan_speed_rpm": 10750.0, "psu_power_w": 511.0},
}
NO_READING = {"juniper_junos": 1, "huawei_vrp": 1}  # a fan tray or fan module: no sensor
VENDORS = sorted(PORTS)
COUNTERS = (mib.IF_OPER_STATUS, mib.IF_IN_DISCARDS, mib.IF_IN_ERRORS, mib.IF_OUT_DISCARDS,
            mib.DOT3_FCS_ERRORS, mib.IF_HC_IN_OCTETS, mib.IF_HC_IN_UCAST, mib.IF_HC_OUT_OCTETS,
            mib.IF_HC_OUT_UCAST)


def expected(vendor: str, records: list[Record]) -> dict[tuple[str, str], float]:
    """What the walk must give: counters and PFC from its rows, optics by design."""
    rows = tables_of(records, [mib.IF_NAME, *COUNTERS, mib.PRIO_REQUESTS,
                               mib.PRIO_INDICATIONS, mib.PFC_REQUESTS, mib.PFC_INDICATIONS])
    names = {i[0]: v.decode() for i, v in rows[mib.IF_NAME.oid].items()
             if isinstance(v, bytes)}
    out: dict[tuple[str, str], float] = {}
    for col in COUNTERS:
        for (ifx,), v in rows[col.oid].items():
            out[(f"{vendor}:{names[ifx]}", col.metric or "")] = float(v)  # type: ignore[arg-type]
    for col in (mib.PRIO_REQUESTS, mib.PRIO_INDICATIONS):
        for (ifx, prio), v in rows[col.oid].items():
            out[(f"{vendor}:{names[ifx]}", f"{col.metric}{{prio={prio}}}")] = float(v)  # type: ignore[arg-type]
    for col in (mib.PFC_REQUESTS, mib.PFC_INDICATIONS):  # totals: the fallback priority 3
        for (ifx,), v in rows[col.oid].items():
            out[(f"{vendor}:{names[ifx]}", f"{col.metric}{{prio=3}}")] = float(v)  # type: ignore[arg-type]
    out.update(_optics(PORTS[vendor], vendor))
    out.update({(vendor, m): v for m, v in CHASSIS[vendor].items()})
    return out


def assert_lands(got: dict[tuple[str, str], float], want: dict[tuple[str, str], float]
                 ) -> None:
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=0.01), key


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_replayed_walk_lands_every_sample_on_its_entity(vendor: str) -> None:
    records = read_snmprec(WALKS / f"{vendor}.snmprec")
    tables = tables_of(records, dec.STATIC_COLUMNS + dec.DYNAMIC_COLUMNS)
    desc = dec.describe(tables)
    out = dec.decode_samples(vendor, tables, desc)
    got = dict(zip(zip(out.entities, out.metrics, strict=True),
                   map(float, out.values), strict=True))
    assert_lands(got, expected(vendor, records))
    assert (out.malformed, out.unknown_ports, out.problem) == (0, 0, None)
    assert desc.sensors.unmapped == {}
    assert out.sensor_skipped == ({"no_reading": NO_READING[vendor]} if vendor in NO_READING
                                  else {})
    chassis = {m for e, m in got if e == vendor}
    assert chassis == set(CHASSIS[vendor])  # never on a port
    assert not chassis & {m for e, m in got if e != vendor}


@pytest.fixture(scope="module")
def vendor_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimAgent]:
    """snmpsim serving the five vendor walks, one community each (the file stem)."""
    data = tmp_path_factory.mktemp("vendors")
    for vendor in VENDORS:
        write_snmprec(data / f"{vendor}.snmprec", read_snmprec(WALKS / f"{vendor}.snmprec"))
    with snmpsim_agent(data) as agent:
        yield agent


def _samples(frame: Frame) -> dict[tuple[str, str], float]:
    names = [CATALOGUE.by_id(m).name for m in frame.metric.tolist()]
    entities = [frame.entities[i] for i in frame.entity_idx.tolist()]
    return dict(zip(zip(entities, names, strict=True), frame.values().tolist(), strict=True))


def test_vendor_walks_over_udp_land_on_their_entities_poll_after_poll(
        vendor_agent: SimAgent) -> None:
    """The real poller against snmpsim over UDP: the describe poll and the next one
    (sensor value columns only) give every expected sample, with no errors."""
    targets = tuple(SnmpTarget(device=v, port=vendor_agent.port, timeout_s=3.0,
                               credentials=SnmpCredentials(community=v)) for v in VENDORS)
    sink, registry = ListSink(), CollectorRegistry()
    poller = SnmpPoller(SnmpPollerConfig(targets=targets), sink, registry)
    poller.start(schedule=False)
    try:
        first = poller.collect_once()
        second = poller.collect_once()
    finally:
        poller.stop()
    assert all(s.up for s in [*first.values(), *second.values()]), second
    frames: dict[str, list[Frame]] = {}
    for f in sink.frames:
        frames.setdefault(f.device, []).append(f)
    for vendor in VENDORS:
        records = read_snmprec(WALKS / f"{vendor}.snmprec")
        assert len(frames[vendor]) == 2
        for frame in frames[vendor]:
            assert_lands(_samples(frame), expected(vendor, records))
        walk = second[vendor].last_walk
        assert walk is not None
        assert not walk.described
        assert set(walk.columns) & {c.name for c in VALUE_COLUMNS}, vendor  # values polled
        assert not set(walk.columns) & {c.name for c in DESCRIBE_COLUMNS}  # metadata not
    errors = sum(s.value for m in registry.collect() for s in m.samples
                 if s.name == "fabricops_snmp_errors_total")
    assert errors == 0


def test_the_weakest_lane_is_the_port_s_receive_power() -> None:
    """Port Ethernet3/1 has three lanes near -1.3 dBm and one at -7.85 dBm."""
    records = read_snmprec(WALKS / "arista_eos.snmprec")
    tables = tables_of(records, dec.STATIC_COLUMNS + dec.DYNAMIC_COLUMNS)
    out = dec.decode_samples("a", tables, dec.describe(tables))
    got = dict(zip(zip(out.entities, out.metrics, strict=True), out.values, strict=True))
    assert got[("a:Ethernet3/1", "rx_power_dbm")] == pytest.approx(-7.85)
    assert got[("a:Ethernet3/1", "tx_bias_ma")] == pytest.approx(9.14)  # highest lane


def test_walk_files_are_where_the_tests_expect_them() -> None:
    assert {p.stem for p in Path(WALKS).glob("*.snmprec")} >= set(VENDORS)
