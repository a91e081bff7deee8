"""openconfig-lldp leaves, as a gNMI Get returns them, into a ``DeviceReport``. Pure.

``leaves_of`` flattens notifications (PROTO scalars, or JSON / JSON_IETF values
that may hold whole containers, module prefixes and all) into ``(path, value)``
leaves; ``report_from_gnmi`` reads ``/lldp/state``, every
``/lldp/interfaces/interface[name]/neighbors/neighbor[id]``, and the port's
``ethernet/state/{port-speed,mac-address}`` and ``state/ifindex``. A neighbour
with an unknown id type, an empty id or missing leaves becomes a finding.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from fabricops.core import lldp_mib as lm
from fabricops.core.openconfig import OcPath, PathElem, bare_name
from fabricops.discover.model import DeviceReport, Finding, FindingKind, LocalPort, Neighbor

Leaf = tuple[OcPath, Any]
_LIST_KEYS = ("name", "id", "index")
_CHASSIS = {m.name: int(m) for m in lm.ChassisIdSubtype}
_PORT = {m.name: int(m) for m in lm.PortIdSubtype}


def _elems(path: Any) -> list[PathElem]:
    return [PathElem(bare_name(e.name), tuple(sorted(e.key.items()))) for e in path.elem]


def _value(typed: Any) -> Any:
    which = typed.WhichOneof("value")
    if which in ("json_val", "json_ietf_val"):
        try:
            return json.loads(getattr(typed, which))
        except (ValueError, UnicodeDecodeError):
            return None
    return getattr(typed, which) if which else None


def _flatten(base: tuple[PathElem, ...], value: Any) -> Iterator[Leaf]:
    """Leaves of a JSON value at ``base`` (containers and keyed lists walked)."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _flatten((*base, PathElem(bare_name(str(key)))), child)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for item in value:
            keys = tuple(sorted((k, str(item[k])) for k in _LIST_KEYS if k in item
                                and not isinstance(item[k], dict | list)))[:1]
            head = (*base[:-1], PathElem(base[-1].name, keys)) if base else base
            yield from _flatten(head, item)
    else:
        yield base, value


def leaves_of(notifications: Iterable[Any]) -> list[Leaf]:
    """Every leaf of ``gnmi.Notification`` messages, module prefixes removed."""
    out: list[Leaf] = []
    for note in notifications:
        prefix = _elems(note.prefix)
        for update in note.update:
            out.extend(_flatten((*prefix, *_elems(update.path)), _value(update.val)))
    return out


def _interface(path: OcPath) -> str | None:
    for e in path:
        if e.name == "interface":
            return e.key("name")
    return None


def report_from_gnmi(label: str, leaves: Iterable[Leaf], device: str | None = None
                     ) -> DeviceReport:
    """The report of one device from its openconfig-lldp and interface leaves."""
    report = DeviceReport(label=label, device=device)
    neighbors: dict[tuple[str, str], dict[str, Any]] = {}
    ports: dict[str, dict[str, Any]] = {}
    for path, value in leaves:
        names = [e.name for e in path]
        leaf = names[-1] if names else ""
        if names[:2] == ["lldp", "state"] and len(names) == 3:
            _system(report, leaf, value)
            continue
        intf = _interface(path)
        if intf is None:
            continue
        if names[:1] == ["lldp"] and "neighbor" in names:
            nid = path[names.index("neighbor")].key("id") or ""
            entry = neighbors.setdefault((intf, nid), {})
            if "capability" in names and leaf == "enabled" and value is True:
                entry.setdefault("caps", set()).add(path[names.index("capability")].key("name"))
            elif names[-2:-1] == ["state"]:
                entry[leaf] = value
        elif names[:1] == ["lldp"] or names[:1] == ["interfaces"]:
            ports.setdefault(intf, {})[leaf] = value
    report.ports = {n: _local_port(n, v) for n, v in ports.items()}
    for (intf, nid), entry in sorted(neighbors.items()):
        found = _neighbor(intf, entry, f"{report.label} {intf} neighbor {nid!r}", report)
        if found is not None:
            report.neighbors.append(found)
    return report


def _system(report: DeviceReport, leaf: str, value: Any) -> None:
    if leaf == "system-name" and isinstance(value, str):
        report.sys_name = value
    elif leaf == "chassis-id" and isinstance(value, str):
        report.chassis_id = _normal(value)
    elif leaf == "chassis-id-type" and isinstance(value, str):
        report.chassis_subtype = _CHASSIS.get(bare_name(value))


def _normal(text: str) -> str:
    """A MAC address in one spelling (``aa:bb:..``); other ids unchanged."""
    try:
        return lm.format_mac(lm.parse_mac(text))
    except ValueError:
        return text


def _local_port(name: str, leaves: dict[str, Any]) -> LocalPort:
    speed = lm.SPEED_BPS.get(bare_name(str(leaves.get("port-speed", ""))))
    aliases = [(int(lm.PortIdSubtype.INTERFACE_NAME), name),
               (int(lm.PortIdSubtype.INTERFACE_ALIAS), name)]
    mac = leaves.get("mac-address")
    if isinstance(mac, str):
        aliases.append((int(lm.PortIdSubtype.MAC_ADDRESS), _normal(mac)))
    ifindex = leaves.get("ifindex")
    if isinstance(ifindex, int | str) and str(ifindex).isdigit():
        aliases.append((int(lm.PortIdSubtype.LOCAL), str(int(ifindex))))
    return LocalPort(name=name, aliases=tuple(aliases), speed_bps=speed)


def _neighbor(intf: str, entry: dict[str, Any], where: str, report: DeviceReport
              ) -> Neighbor | None:
    needed = ("chassis-id", "chassis-id-type", "port-id", "port-id-type")
    if any(not isinstance(entry.get(k), str) for k in needed):
        report.findings.append(Finding(FindingKind.TRUNCATED, where,
                                       "chassis or port id leaves missing"))
        return None
    c_sub = _CHASSIS.get(bare_name(entry["chassis-id-type"]))
    p_sub = _PORT.get(bare_name(entry["port-id-type"]))
    if c_sub is None or p_sub is None:
        report.findings.append(Finding(FindingKind.UNKNOWN_SUBTYPE, where,
                                       f"{entry['chassis-id-type']}, {entry['port-id-type']}"))
        return None
    if not entry["port-id"] or not entry["chassis-id"]:
        report.findings.append(Finding(FindingKind.EMPTY_ID, where))
        return None
    caps = {bare_name(str(c)) for c in entry.get("caps", set())}
    return Neighbor(
        local_port=intf, chassis_subtype=c_sub, chassis_id=_normal(entry["chassis-id"]),
        port_subtype=p_sub, port_id=_normal(entry["port-id"]),
        port_desc=str(entry.get("port-description") or ""),
        sys_name=str(entry.get("system-name") or ""),
        station="STATION_ONLY" in caps and not caps & {"MAC_BRIDGE", "ROUTER"},
        bridge=bool(caps & {"MAC_BRIDGE", "ROUTER"}))
