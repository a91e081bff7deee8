"""LLDP-MIB rows, as walked, into a ``DeviceReport``. Pure: tables in, report out.

``tables`` maps each walked column (or scalar) OID of :mod:`fabricops.core.lldp_mib`
to ``{index suffix: value}``. Local port numbers are named by ifName of the same
index, else by an ``interfaceName`` port id, else by the port description.
Rows with an unknown subtype, an empty id, a wrong index length, missing
columns or a local port number that names no port become findings.
"""

from __future__ import annotations

import ipaddress

from fabricops.core import lldp_mib as lm
from fabricops.core.snmp_mib import Oid
from fabricops.discover.model import DeviceReport, Finding, FindingKind, LocalPort, Neighbor

Tables = dict[Oid, dict[Oid, int | bytes]]
_MAC_CHASSIS, _MAC_PORT = lm.ChassisIdSubtype.MAC_ADDRESS, lm.PortIdSubtype.MAC_ADDRESS
_NET_CHASSIS, _NET_PORT = lm.ChassisIdSubtype.NETWORK_ADDRESS, lm.PortIdSubtype.NETWORK_ADDRESS


def id_text(raw: bytes, mac: bool, network: bool) -> str:
    """An LLDP id as text: a MAC as ``aa:bb:..``, an address as dotted/colon text,
    printable octets as they are, anything else as ``0x`` hex."""
    if mac and len(raw) == 6:
        return lm.format_mac(raw)
    if network and len(raw) in (5, 17) and raw[0] in (1, 2):
        return str(ipaddress.ip_address(raw[1:]))
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return "0x" + raw.hex()
    return text if text.isprintable() else "0x" + raw.hex()


def _text(value: int | bytes | None) -> str:
    return id_text(value, False, False) if isinstance(value, bytes) else ""


def _scalar(tables: Tables, column: Oid) -> int | bytes | None:
    return tables.get(column, {}).get((0,))


def report_from_snmp(label: str, tables: Tables, device: str | None = None) -> DeviceReport:
    """The report of one device from its walked LLDP-MIB and IF-MIB columns."""
    report = DeviceReport(label=label, device=device)
    report.sys_name = _text(_scalar(tables, lm.LOC_SYS_NAME)) or \
        _text(_scalar(tables, lm.SYS_NAME))
    subtype = _scalar(tables, lm.LOC_CHASSIS_SUBTYPE)
    chassis = _scalar(tables, lm.LOC_CHASSIS_ID)
    if isinstance(subtype, int) and isinstance(chassis, bytes) and chassis:
        report.chassis_subtype = subtype
        report.chassis_id = id_text(chassis, subtype == _MAC_CHASSIS, subtype == _NET_CHASSIS)
    caps = _scalar(tables, lm.LOC_CAP_ENABLED)
    report.station = isinstance(caps, bytes) and _is_station(lm.capabilities_of(caps))
    names = _port_names(tables, report)
    report.ports = _local_ports(tables, names)
    report.neighbors = _neighbors(tables, names, report)
    return report


def _is_station(caps: set[lm.Capability]) -> bool:
    return lm.Capability.STATION_ONLY in caps and not caps & {lm.Capability.MAC_BRIDGE,
                                                              lm.Capability.ROUTER}


def _port_names(tables: Tables, report: DeviceReport) -> dict[int, str]:
    """Local port number -> interface name."""
    names: dict[int, str] = {}
    for idx, value in tables.get(lm.IF_NAME, {}).items():
        if len(idx) == 1 and isinstance(value, bytes) and value:
            names[idx[0]] = _text(value)
    subtypes, ids = tables.get(lm.LOC_PORT_SUBTYPE, {}), tables.get(lm.LOC_PORT_ID, {})
    descs = tables.get(lm.LOC_PORT_DESC, {})
    for idx in sorted(set(subtypes) | set(ids)):
        if len(idx) != 1:
            report.findings.append(Finding(FindingKind.BAD_INDEX, report.label,
                                           f"lldpLocPortTable index {idx}"))
            continue
        if idx[0] in names:
            continue
        sub, pid, desc = subtypes.get(idx), ids.get(idx), descs.get(idx)
        if sub == lm.PortIdSubtype.INTERFACE_NAME and isinstance(pid, bytes) and pid:
            names[idx[0]] = _text(pid)
        elif isinstance(desc, bytes) and desc:
            names[idx[0]] = _text(desc)
    return names


def _local_ports(tables: Tables, names: dict[int, str]) -> dict[str, LocalPort]:
    subtypes, ids = tables.get(lm.LOC_PORT_SUBTYPE, {}), tables.get(lm.LOC_PORT_ID, {})
    speeds = tables.get(lm.IF_HIGH_SPEED, {})
    ports: dict[str, LocalPort] = {}
    for num, name in names.items():
        sub, pid, mbps = subtypes.get((num,)), ids.get((num,)), speeds.get((num,))
        text = None
        if isinstance(sub, int) and isinstance(pid, bytes) and pid:
            text = id_text(pid, sub == _MAC_PORT, sub == _NET_PORT)
        speed = mbps * 1_000_000 if isinstance(mbps, int) and mbps > 0 else None
        ports[name] = LocalPort(name=name, id_subtype=sub if isinstance(sub, int) else None,
                                port_id=text, speed_bps=speed)
    return ports


def _neighbors(tables: Tables, names: dict[int, str], report: DeviceReport) -> list[Neighbor]:
    cols = {c: tables.get(c, {}) for c in lm.REM_COLUMNS}
    rows = set().union(*(set(v) for v in cols.values()))
    out = []
    for idx in sorted(rows):
        where = f"{report.label} lldpRemTable row {'.'.join(map(str, idx))}"
        if len(idx) != 3:
            report.findings.append(Finding(FindingKind.BAD_INDEX, where,
                                           "index is not (time mark, local port, index)"))
            continue
        neighbor = _neighbor(idx, cols, names, where, report)
        if neighbor is not None:
            out.append(neighbor)
    return out


def _neighbor(idx: Oid, cols: dict[Oid, dict[Oid, int | bytes]], names: dict[int, str],
              where: str, report: DeviceReport) -> Neighbor | None:
    """One lldpRemTable row as a Neighbor, or None (and a finding) if it is unusable."""
    c_sub, c_id = cols[lm.REM_CHASSIS_SUBTYPE].get(idx), cols[lm.REM_CHASSIS_ID].get(idx)
    p_sub, p_id = cols[lm.REM_PORT_SUBTYPE].get(idx), cols[lm.REM_PORT_ID].get(idx)
    if not (isinstance(c_sub, int) and isinstance(p_sub, int) and isinstance(c_id, bytes)
            and isinstance(p_id, bytes)):
        report.findings.append(Finding(FindingKind.TRUNCATED, where,
                                       "chassis or port id columns missing"))
        return None
    if c_sub not in lm.ChassisIdSubtype._value2member_map_ or \
            p_sub not in lm.PortIdSubtype._value2member_map_:
        report.findings.append(Finding(FindingKind.UNKNOWN_SUBTYPE, where,
                                       f"chassis subtype {c_sub}, port subtype {p_sub}"))
        return None
    if not p_id or not c_id:
        report.findings.append(Finding(FindingKind.EMPTY_ID, where))
        return None
    local = names.get(idx[1])
    if local is None:
        report.findings.append(Finding(FindingKind.NO_LOCAL_PORT, where,
                                       f"local port number {idx[1]}"))
        return None
    caps = cols[lm.REM_CAP_ENABLED].get(idx)
    capset = lm.capabilities_of(caps) if isinstance(caps, bytes) else set()
    return Neighbor(
        local_port=local, chassis_subtype=c_sub,
        chassis_id=id_text(c_id, c_sub == _MAC_CHASSIS, c_sub == _NET_CHASSIS),
        port_subtype=p_sub, port_id=id_text(p_id, p_sub == _MAC_PORT, p_sub == _NET_PORT),
        port_desc=_text(cols[lm.REM_PORT_DESC].get(idx)),
        sys_name=_text(cols[lm.REM_SYS_NAME].get(idx)), station=_is_station(capset),
        bridge=bool(capset & {lm.Capability.MAC_BRIDGE, lm.Capability.ROUTER}))
