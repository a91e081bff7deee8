"""LLDP of the simulated fabric, served from its true cabling (miswires included).

``Cabling`` holds what is really plugged into what: the topology's links with
``miswire`` faults applied. Each port advertises what a real device would:

- switches: chassis id a MAC (``02:``, 3 octets of node index, ``00:00``) on even
  node indices, a ``LOCAL`` serial (``SIM<index>``) on odd ones; port id by the
  node index modulo 4: ``INTERFACE_NAME`` (``eth12``), ``LOCAL`` (the port's
  position + 1, as Junos sends its SNMP index), ``MAC_ADDRESS`` (the port's MAC),
  ``INTERFACE_ALIAS`` (the name); capabilities bridge and router.
- hosts, as lldpd on the NIC side: chassis id the host's MAC, port id
  ``INTERFACE_NAME`` (``nic2``), capability station only.

``LldpMib`` adds LLDP-MIB (local system, lldpLocPortTable, lldpRemTable) and
ifHighSpeed to a switch's SNMP instances; ``lldp_notification`` answers a gNMI
Get of ``/lldp`` (openconfig-lldp) or of ``.../ethernet/state/port-speed``.
Neighbours follow the cabling, not the link state.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core import lldp_mib as lm
from fabricops.core.entities import split_port
from fabricops.core.openconfig import OcPath, PathElem, bare_name, matches
from fabricops.core.snmp_mib import (
    IF_NAME,
    DeviceMib,
    Oid,
    Syntax,
    ber_oid,
    ber_tlv,
    ber_value,
)
from fabricops.core.topology import Topology
from fabricops.simulator.faults import MiswireSpec, miswired_peers

_STATION = {lm.Capability.STATION_ONLY}
_SWITCH = {lm.Capability.MAC_BRIDGE, lm.Capability.ROUTER}
_PORT_STYLES = (lm.PortIdSubtype.INTERFACE_NAME, lm.PortIdSubtype.LOCAL,
                lm.PortIdSubtype.MAC_ADDRESS, lm.PortIdSubtype.INTERFACE_ALIAS)


@dataclass(frozen=True)
class Advert:
    """What one port sends in its LLDPDUs."""

    chassis_subtype: lm.ChassisIdSubtype
    chassis_id: bytes
    port_subtype: lm.PortIdSubtype
    port_id: bytes
    port_desc: str
    sys_name: str
    sys_desc: str
    caps: frozenset[lm.Capability]
    port_mac: bytes
    if_index: int

    def text(self, raw: bytes, mac: bool) -> str:
        """An id as openconfig-lldp shows it (a MAC as ``aa:bb:..``)."""
        return lm.format_mac(raw) if mac else raw.decode()

    @property
    def chassis_text(self) -> str:
        return self.text(self.chassis_id, self.chassis_subtype is lm.ChassisIdSubtype.MAC_ADDRESS)

    @property
    def port_text(self) -> str:
        return self.text(self.port_id, self.port_subtype is lm.PortIdSubtype.MAC_ADDRESS)


class Cabling:
    """The true wiring of a fabric: its links, with miswires applied. Thread-safe.

    ``version`` grows with every change, so servers can cache what they derive.
    """

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self._miswires: list[MiswireSpec] = []
        self._peers = dict(topology.peer_of)
        self._lock = threading.Lock()
        self.version = 0
        self._node_index = {n.id: i for i, n in enumerate(topology.nodes)}
        self._position = {f"{n.id}:{p.name}": k for n in topology.nodes
                          for k, p in enumerate(n.ports)}

    def miswire(self, spec: MiswireSpec) -> None:
        """Swap the far ends of the spec's two links; FaultError names a bad spec."""
        with self._lock:
            peers = miswired_peers(self.topology, [*self._miswires, spec])
            self._miswires.append(spec)
            self._peers = peers
            self.version += 1

    @property
    def miswires(self) -> tuple[MiswireSpec, ...]:
        return tuple(self._miswires)

    def peer(self, port: str) -> str | None:
        """The port really cabled to ``port`` (None if nothing is)."""
        return self._peers.get(port)

    def advert(self, port: str) -> Advert:
        """What ``port`` advertises over LLDP."""
        node_id, ifname = split_port(port)
        index, position = self._node_index[node_id], self._position[port]
        return _advert(node_id, ifname, index, position,
                       self.topology.node_by_id[node_id].is_host)

    def ports_of(self, device: str) -> list[str]:
        node = self.topology.node_by_id[device]
        return [f"{device}:{p.name}" for p in node.ports]

    def speed_bps(self, port: str) -> int:
        return self.topology.port_by_id[port][1].speed_bps

    def serves(self, device: str) -> bool:
        return device in self.topology.node_by_id


@cache
def _advert(node_id: str, ifname: str, index: int, position: int, host: bool) -> Advert:
    mac = bytes((0x02,)) + index.to_bytes(3, "big")
    chassis_mac = mac + b"\0\0"
    port_mac = mac + (position + 1).to_bytes(2, "big")
    if host:
        return Advert(lm.ChassisIdSubtype.MAC_ADDRESS, chassis_mac,
                      lm.PortIdSubtype.INTERFACE_NAME, ifname.encode(), ifname, node_id,
                      "fabricops simulated GPU server (lldpd)", frozenset(_STATION), port_mac,
                      position + 1)
    style = _PORT_STYLES[index % len(_PORT_STYLES)]
    port_id = {lm.PortIdSubtype.LOCAL: str(position + 1).encode(),
               lm.PortIdSubtype.MAC_ADDRESS: port_mac}.get(style, ifname.encode())
    chassis = (lm.ChassisIdSubtype.MAC_ADDRESS, chassis_mac) if index % 2 == 0 else \
        (lm.ChassisIdSubtype.LOCAL, f"SIM{index:06d}".encode())
    return Advert(chassis[0], chassis[1], style, port_id, ifname, node_id,
                  "fabricops simulated switch", frozenset(_SWITCH), port_mac, position + 1)


# --- SNMP: LLDP-MIB and ifHighSpeed beside a switch's other instances ---------------

_Encode = Callable[[], bytes]


def _octets(oid: Oid, value: bytes) -> bytes:
    return ber_tlv(0x30, ber_oid(oid) + ber_value(Syntax.OCTETS, value))


def _integer(oid: Oid, value: int) -> bytes:
    return ber_tlv(0x30, ber_oid(oid) + ber_value(Syntax.INTEGER, value))


def _gauge(oid: Oid, value: int) -> bytes:
    return ber_tlv(0x30, ber_oid(oid) + ber_tlv(0x42, value.to_bytes(
        (value.bit_length() + 8) // 8, "big")))


class LldpMib(DeviceMib):
    """A switch's instances (``base``) merged with its LLDP-MIB and ifHighSpeed ones.

    Remote-table values follow ``cabling`` (re-read when its version changes);
    instances ``base`` already serves are kept as ``base`` serves them.
    """

    def __init__(self, base: DeviceMib, cabling: Cabling) -> None:
        self.base, self.cabling, self.device = base, cabling, base.device
        ifindex = {bytes(c.static).decode(): c.oid[-1] for c in base.cells
                   if c.oid[:-1] == IF_NAME.oid and isinstance(c.static, bytes)}
        ports = cabling.ports_of(base.device)
        self._ifindex = {p: ifindex.get(split_port(p)[1], k + 1) for k, p in enumerate(ports)}
        extra = sorted(o for o in self._extra_oids(ports) if o not in base.position)
        merged = sorted([(o, -1 - i) for i, o in enumerate(extra)] +
                        [(o, i) for i, o in enumerate(base.oids)])
        self.oids = [o for o, _ in merged]
        self._source = [s for _, s in merged]
        self.position = {o: i for i, o in enumerate(self.oids)}
        self._extra = extra
        self._version = -1
        self._encoded: list[bytes] = []
        self._objects = (lm.LLDP_ROOT, lm.IF_HIGH_SPEED)

    def __len__(self) -> int:
        return len(self.oids)

    def varbind(self, i: int, ints: list[int], floats: list[float]) -> bytes:
        s = self._source[i]
        if s >= 0:
            return self.base.varbind(s, ints, floats)
        if self._version != self.cabling.version:
            self._encode()
        return self._encoded[-1 - s]

    def knows_object(self, oid: Oid) -> bool:
        return self.base.knows_object(oid) or any(oid[:len(r)] == r for r in self._objects)

    def _extra_oids(self, ports: list[str]) -> list[Oid]:
        return list(self._values(ports, dry=True))

    def _encode(self) -> None:
        self._version = self.cabling.version
        values = self._values(self.cabling.ports_of(self.device), dry=False)
        self._encoded = [values[o] for o in self._extra]

    def _values(self, ports: list[str], dry: bool) -> dict[Oid, bytes]:
        """Every LLDP instance of the switch and its encoded varbind (empty when ``dry``)."""
        out: dict[Oid, bytes] = {}
        me = self.cabling.advert(ports[0]) if ports else None
        if me is not None:
            out[(*lm.LOC_CHASSIS_SUBTYPE, 0)] = _integer((*lm.LOC_CHASSIS_SUBTYPE, 0),
                                                          int(me.chassis_subtype))
            out[(*lm.LOC_CHASSIS_ID, 0)] = _octets((*lm.LOC_CHASSIS_ID, 0), me.chassis_id)
            out[(*lm.LOC_SYS_NAME, 0)] = _octets((*lm.LOC_SYS_NAME, 0), me.sys_name.encode())
            out[(*lm.LOC_SYS_DESC, 0)] = _octets((*lm.LOC_SYS_DESC, 0), me.sys_desc.encode())
            out[(*lm.LOC_CAP_ENABLED, 0)] = _octets((*lm.LOC_CAP_ENABLED, 0),
                                                     lm.capability_bits(set(me.caps)))
        for port in ports:
            n = self._ifindex[port]
            own = self.cabling.advert(port)
            out[(*lm.LOC_PORT_SUBTYPE, n)] = _integer((*lm.LOC_PORT_SUBTYPE, n),
                                                       int(own.port_subtype))
            out[(*lm.LOC_PORT_ID, n)] = _octets((*lm.LOC_PORT_ID, n), own.port_id)
            out[(*lm.LOC_PORT_DESC, n)] = _octets((*lm.LOC_PORT_DESC, n),
                                                   own.port_desc.encode())
            out[(*lm.IF_HIGH_SPEED, n)] = _gauge((*lm.IF_HIGH_SPEED, n),
                                                  self.cabling.speed_bps(port) // 1_000_000)
            peer = self.cabling.topology.peer_of.get(port) if dry else self.cabling.peer(port)
            if peer is not None:
                out.update(_remote_row(n, self.cabling.advert(peer)))
        return out


def _remote_row(local_port: int, far: Advert) -> dict[Oid, bytes]:
    """The lldpRemTable row (time mark 0, ``local_port``, index 1) of neighbour ``far``."""
    idx = (0, local_port, 1)
    cells: list[tuple[Oid, int | bytes]] = [
        (lm.REM_CHASSIS_SUBTYPE, int(far.chassis_subtype)), (lm.REM_CHASSIS_ID, far.chassis_id),
        (lm.REM_PORT_SUBTYPE, int(far.port_subtype)), (lm.REM_PORT_ID, far.port_id),
        (lm.REM_PORT_DESC, far.port_desc.encode()), (lm.REM_SYS_NAME, far.sys_name.encode()),
        (lm.REM_SYS_DESC, far.sys_desc.encode()),
        (lm.REM_CAP_ENABLED, lm.capability_bits(set(far.caps)))]
    return {col + idx: (_integer(col + idx, v) if isinstance(v, int) else _octets(col + idx, v))
            for col, v in cells}


# --- gNMI: openconfig-lldp ----------------------------------------------------------


def asks_for_lldp(pattern: OcPath) -> bool:
    """True if a Get ``pattern`` is answered by ``lldp_notification``."""
    if not pattern:
        return False
    if bare_name(pattern[0].name) == "lldp":
        return True
    names = [bare_name(e.name) for e in pattern]
    return names[:1] == ["interfaces"] and (names[2:3] == ["ethernet"]
                                            or names[2:] == ["state", "ifindex"])


def lldp_notification(cabling: Cabling, pattern: OcPath, device: str, ts_ns: int,
                      json_ietf: bool) -> bytes | None:
    """The serialized ``gnmi.Notification`` of ``device``'s leaves under ``pattern``, or
    None if it has none there."""
    if not cabling.serves(device):
        return None
    leaves = [(p, v) for p, v in _leaves(cabling, device) if matches(pattern, p)]
    if not leaves:
        return None
    updates = [gnmi_pb2.Update(path=gnmi_pb2.Path(elem=[
        gnmi_pb2.PathElem(name=e.name, key=dict(e.keys)) for e in path]), val=_typed(v, json_ietf))
        for path, v in leaves]
    note = gnmi_pb2.Notification(timestamp=max(ts_ns, 1), prefix=gnmi_pb2.Path(target=device),
                                 update=updates)
    data: bytes = note.SerializeToString()
    return data


def _typed(value: Any, json_ietf: bool) -> Any:
    if json_ietf:
        return gnmi_pb2.TypedValue(json_ietf_val=json.dumps(value).encode())
    if isinstance(value, bool):
        return gnmi_pb2.TypedValue(bool_val=value)
    if isinstance(value, int):
        return gnmi_pb2.TypedValue(uint_val=value)
    return gnmi_pb2.TypedValue(string_val=str(value))


def _e(elem: str, /, **keys: str) -> PathElem:
    return PathElem(elem, tuple(sorted(keys.items())))


def _leaves(cabling: Cabling, device: str) -> list[tuple[OcPath, Any]]:
    ports = cabling.ports_of(device)
    out: list[tuple[OcPath, Any]] = []
    if ports:
        me = cabling.advert(ports[0])
        top = (_e("lldp"), _e("state"))
        out += [((*top, _e("system-name")), me.sys_name),
                ((*top, _e("chassis-id")), me.chassis_text),
                ((*top, _e("chassis-id-type")), me.chassis_subtype.name)]
    for port in ports:
        ifname = split_port(port)[1]
        own, speed = cabling.advert(port), lm.SPEED_NAMES.get(cabling.speed_bps(port))
        eth = (_e("interfaces"), _e("interface", name=ifname), _e("ethernet"), _e("state"))
        if speed is not None:
            out.append(((*eth, _e("port-speed")), f"openconfig-if-ethernet:{speed}"))
        out += [((*eth, _e("mac-address")), lm.format_mac(own.port_mac)),
                ((_e("interfaces"), _e("interface", name=ifname), _e("state"), _e("ifindex")),
                 own.if_index)]
        intf = (_e("lldp"), _e("interfaces"), _e("interface", name=ifname))
        out.append(((*intf, _e("state"), _e("name")), ifname))
        peer = cabling.peer(port)
        if peer is None:
            continue
        far = cabling.advert(peer)
        nb = (*intf, _e("neighbors"), _e("neighbor", id="1"))
        state = (*nb, _e("state"))
        out += [((*state, _e("id")), "1"), ((*state, _e("system-name")), far.sys_name),
                ((*state, _e("system-description")), far.sys_desc),
                ((*state, _e("chassis-id")), far.chassis_text),
                ((*state, _e("chassis-id-type")), far.chassis_subtype.name),
                ((*state, _e("port-id")), far.port_text),
                ((*state, _e("port-id-type")), far.port_subtype.name),
                ((*state, _e("port-description")), far.port_desc)]
        for cap in sorted(far.caps):
            c = (*nb, _e("capabilities"), _e("capability", name=cap.name), _e("state"))
            out += [((*c, _e("name")), cap.name), ((*c, _e("enabled")), True)]
    return out
