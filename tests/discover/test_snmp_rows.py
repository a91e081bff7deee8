"""LLDP-MIB rows into a report: every subtype read, every bad row counted, none dropped
silently. Rows are written here from IEEE 802.1AB LLDP-MIB's column layout."""

from __future__ import annotations

from fabricops.core import lldp_mib as lm
from fabricops.discover.model import FindingKind
from fabricops.discover.snmp_rows import Tables, id_text, report_from_snmp

MAC = bytes.fromhex("0200001a0003")


def _rem(tables: Tables, idx: tuple[int, ...], chassis: tuple[int, bytes],
         port: tuple[int, bytes], name: bytes = b"", desc: bytes = b"",
         caps: bytes = b"\x28\x00") -> None:
    for col, value in ((lm.REM_CHASSIS_SUBTYPE, chassis[0]), (lm.REM_CHASSIS_ID, chassis[1]),
                       (lm.REM_PORT_SUBTYPE, port[0]), (lm.REM_PORT_ID, port[1]),
                       (lm.REM_SYS_NAME, name), (lm.REM_PORT_DESC, desc),
                       (lm.REM_CAP_ENABLED, caps)):
        tables.setdefault(col, {})[idx] = value


def _switch() -> Tables:
    tables: Tables = {
        lm.SYS_NAME: {(0,): b"leaf-7"}, lm.LOC_CHASSIS_SUBTYPE: {(0,): 4},
        lm.LOC_CHASSIS_ID: {(0,): MAC}, lm.LOC_CAP_ENABLED: {(0,): b"\x28\x00"},
        lm.IF_NAME: {(1,): b"Ethernet1", (2,): b"Ethernet2", (3,): b"Ethernet3",
                     (4,): b"Ethernet4", (5,): b"Ethernet5"},
        lm.IF_HIGH_SPEED: {(1,): 400_000, (2,): 0},
        lm.LOC_PORT_SUBTYPE: {(1,): 3, (2,): 7}, lm.LOC_PORT_ID: {(1,): MAC, (2,): b"2"},
    }
    _rem(tables, (0, 1, 1), (4, MAC), (5, b"Ethernet9"), b"spine-1")
    _rem(tables, (0, 2, 3), (7, b"SN123"), (1, b"uplink-a"), b"spine-2")
    _rem(tables, (0, 3, 1), (4, MAC), (3, MAC), b"spine-3")
    _rem(tables, (0, 4, 1), (6, b"mgmt0"), (7, b"17"), b"spine-4")
    _rem(tables, (0, 5, 2), (5, b"\x01\xc0\x00\x02\x01"), (4, b"\x01\xc0\x00\x02\x02"),
         b"host-3", caps=b"\x01\x00")
    return tables


def test_every_port_and_chassis_subtype_is_read() -> None:
    report = report_from_snmp("10.0.0.7:161", _switch())
    assert report.sys_name == "leaf-7"
    assert report.chassis_id == "02:00:00:1a:00:03"
    assert report.ports["Ethernet1"].port_id == "02:00:00:1a:00:03"
    assert report.ports["Ethernet1"].speed_bps == 400_000_000_000
    assert report.ports["Ethernet2"].speed_bps is None, "0 Mb/s is no speed"
    seen = {n.local_port: (n.port_subtype, n.port_id, n.chassis_id) for n in report.neighbors}
    assert seen == {
        "Ethernet1": (5, "Ethernet9", "02:00:00:1a:00:03"),
        "Ethernet2": (1, "uplink-a", "SN123"),
        "Ethernet3": (3, "02:00:00:1a:00:03", "02:00:00:1a:00:03"),
        "Ethernet4": (7, "17", "mgmt0"),
        "Ethernet5": (4, "192.0.2.2", "192.0.2.1"),
    }
    assert [n.station for n in report.neighbors] == [False] * 4 + [True]
    assert report.findings == []


def test_garbage_truncated_and_out_of_range_rows_are_counted() -> None:
    tables = _switch()
    _rem(tables, (0, 1, 9), (4, MAC), (42, b"x"))  # unknown port subtype
    _rem(tables, (0, 2, 9), (0, MAC), (5, b"x"))  # chassis subtype 0 is reserved
    _rem(tables, (0, 3, 9), (4, MAC), (5, b""))  # empty port id
    _rem(tables, (0, 99, 1), (4, MAC), (5, b"Ethernet1"))  # no local port 99
    _rem(tables, (0, 4), (4, MAC), (5, b"Ethernet1"))  # index cut short
    tables[lm.REM_SYS_NAME][(0, 4, 7)] = b"half-a-row"  # only one column of a row
    tables[lm.LOC_PORT_ID][(1, 2)] = b"bad-index"
    report = report_from_snmp("10.0.0.7:161", tables)
    kinds = sorted(f.kind.name for f in report.findings)
    assert kinds == sorted(["UNKNOWN_SUBTYPE", "UNKNOWN_SUBTYPE", "EMPTY_ID", "NO_LOCAL_PORT",
                            "BAD_INDEX", "TRUNCATED", "BAD_INDEX"])
    assert len(report.neighbors) == 5, "the good rows are all kept"
    assert any("local port number 99" in f.detail for f in report.findings
               if f.kind is FindingKind.NO_LOCAL_PORT)


def test_ids_that_are_not_text_are_shown_in_hex() -> None:
    assert id_text(b"\xff\xfe\x00", False, False) == "0xfffe00"
    assert id_text(b"\x00\x01", True, False) == "0x0001", "a MAC of the wrong length"
    assert id_text(b"eth1\n", False, False) == "0x657468310a"


def test_a_device_without_ifname_names_ports_by_port_id_or_description() -> None:
    tables: Tables = {lm.LOC_SYS_NAME: {(0,): b"sw1"},
                      lm.LOC_PORT_SUBTYPE: {(1,): 5, (2,): 7},
                      lm.LOC_PORT_ID: {(1,): b"xe-0/0/1", (2,): b"501"},
                      lm.LOC_PORT_DESC: {(2,): b"xe-0/0/2"}}
    report = report_from_snmp("sw1", tables)
    assert sorted(report.ports) == ["xe-0/0/1", "xe-0/0/2"]
    assert report.ports["xe-0/0/2"].port_id == "501"
