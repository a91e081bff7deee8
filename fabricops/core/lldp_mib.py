"""LLDP as devices serve it: LLDP-MIB columns over SNMP, openconfig-lldp leaves over gNMI.

Shared by the simulated agents (which serve it) and discovery (which reads it).
Numeric OIDs of IEEE 802.1AB LLDP-MIB (``lldpMIB`` 1.0.8802.1.1.2):

- local system (1.0.8802.1.1.2.1.3): ``lldpLocChassisIdSubtype.0`` .1,
  ``lldpLocChassisId.0`` .2, ``lldpLocSysName.0`` .3, ``lldpLocSysDesc.0`` .4,
  ``lldpLocSysCapEnabled.0`` .6
- lldpLocPortTable (.3.7.1, index ``lldpLocPortNum``, which equals ifIndex here):
  ``lldpLocPortIdSubtype`` .2, ``lldpLocPortId`` .3, ``lldpLocPortDesc`` .4
- lldpRemTable (1.0.8802.1.1.2.1.4.1.1, index ``lldpRemTimeMark``,
  ``lldpRemLocalPortNum``, ``lldpRemIndex``): ``lldpRemChassisIdSubtype`` .4,
  ``lldpRemChassisId`` .5, ``lldpRemPortIdSubtype`` .6, ``lldpRemPortId`` .7,
  ``lldpRemPortDesc`` .8, ``lldpRemSysName`` .9, ``lldpRemSysDesc`` .10,
  ``lldpRemSysCapEnabled`` .12 (BITS: bridge(2), router(4), stationOnly(7))
- IF-MIB ``ifName`` 1.3.6.1.2.1.31.1.1.1.1 and ``ifHighSpeed`` .15 (Gauge32, Mb/s)
  name a local port number and give its speed.

openconfig-lldp: ``/lldp/state/{system-name,chassis-id,chassis-id-type}`` and, per
``/lldp/interfaces/interface[name]/neighbors/neighbor[id]``, ``state/{system-name,
port-id, port-id-type, chassis-id, chassis-id-type, port-description}`` and
``capabilities/capability[name]/state/enabled``. Port speed:
``/interfaces/interface[name]/ethernet/state/port-speed`` (``SPEED_400GB``).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from fabricops.core.snmp_mib import Oid


def _oid(dotted: str) -> Oid:
    return tuple(int(x) for x in dotted.split("."))


_LOC, _REM = "1.0.8802.1.1.2.1.3", "1.0.8802.1.1.2.1.4.1.1"
LLDP_ROOT: Final = _oid("1.0.8802.1.1.2")
SYS_NAME: Final = _oid("1.3.6.1.2.1.1.5")
LOC_CHASSIS_SUBTYPE: Final = _oid(f"{_LOC}.1")
LOC_CHASSIS_ID: Final = _oid(f"{_LOC}.2")
LOC_SYS_NAME: Final = _oid(f"{_LOC}.3")
LOC_SYS_DESC: Final = _oid(f"{_LOC}.4")
LOC_CAP_ENABLED: Final = _oid(f"{_LOC}.6")
LOC_PORT_SUBTYPE: Final = _oid(f"{_LOC}.7.1.2")
LOC_PORT_ID: Final = _oid(f"{_LOC}.7.1.3")
LOC_PORT_DESC: Final = _oid(f"{_LOC}.7.1.4")
REM_CHASSIS_SUBTYPE: Final = _oid(f"{_REM}.4")
REM_CHASSIS_ID: Final = _oid(f"{_REM}.5")
REM_PORT_SUBTYPE: Final = _oid(f"{_REM}.6")
REM_PORT_ID: Final = _oid(f"{_REM}.7")
REM_PORT_DESC: Final = _oid(f"{_REM}.8")
REM_SYS_NAME: Final = _oid(f"{_REM}.9")
REM_SYS_DESC: Final = _oid(f"{_REM}.10")
REM_CAP_ENABLED: Final = _oid(f"{_REM}.12")
IF_NAME: Final = _oid("1.3.6.1.2.1.31.1.1.1.1")
IF_HIGH_SPEED: Final = _oid("1.3.6.1.2.1.31.1.1.1.15")

SCALARS: Final = (SYS_NAME, LOC_CHASSIS_SUBTYPE, LOC_CHASSIS_ID, LOC_SYS_NAME)
LOC_PORT_COLUMNS: Final = (LOC_PORT_SUBTYPE, LOC_PORT_ID, LOC_PORT_DESC)
REM_COLUMNS: Final = (REM_CHASSIS_SUBTYPE, REM_CHASSIS_ID, REM_PORT_SUBTYPE, REM_PORT_ID,
                      REM_PORT_DESC, REM_SYS_NAME, REM_CAP_ENABLED)
IF_COLUMNS: Final = (IF_NAME, IF_HIGH_SPEED)


class ChassisIdSubtype(IntEnum):
    """LldpChassisIdSubtype; the member name is openconfig-lldp's ``chassis-id-type``."""

    CHASSIS_COMPONENT = 1
    INTERFACE_ALIAS = 2
    PORT_COMPONENT = 3
    MAC_ADDRESS = 4
    NETWORK_ADDRESS = 5
    INTERFACE_NAME = 6
    LOCAL = 7


class PortIdSubtype(IntEnum):
    """LldpPortIdSubtype; the member name is openconfig-lldp's ``port-id-type``."""

    INTERFACE_ALIAS = 1
    PORT_COMPONENT = 2
    MAC_ADDRESS = 3
    NETWORK_ADDRESS = 4
    INTERFACE_NAME = 5
    AGENT_CIRCUIT_ID = 6
    LOCAL = 7


class Capability(IntEnum):
    """LldpSystemCapabilitiesMap bit numbers (bit 0 is the first octet's high bit)."""

    OTHER = 0
    REPEATER = 1
    MAC_BRIDGE = 2
    WLAN_ACCESS_POINT = 3
    ROUTER = 4
    TELEPHONE = 5
    DOCSIS_CABLE_DEVICE = 6
    STATION_ONLY = 7


def capability_bits(caps: set[Capability]) -> bytes:
    """The BITS octets of a capability set (two octets, as LLDP-MIB serves them)."""
    value = sum(1 << (15 - int(c)) for c in caps)
    return value.to_bytes(2, "big")


def capabilities_of(bits: bytes) -> set[Capability]:
    """The capabilities set in BITS octets (bits past the known ones are ignored)."""
    value = int.from_bytes(bits[:2].ljust(2, b"\0"), "big") if bits else 0
    return {c for c in Capability if value & (1 << (15 - int(c)))}


def format_mac(raw: bytes) -> str:
    """Six octets as ``aa:bb:cc:dd:ee:ff``; ValueError for any other length."""
    if len(raw) != 6:
        raise ValueError(f"a MAC address has 6 octets, not {len(raw)}")
    return ":".join(f"{b:02x}" for b in raw)


def parse_mac(text: str) -> bytes:
    """``aa:bb:cc:dd:ee:ff`` (or with '-') as six octets; ValueError if it is not one."""
    parts = text.replace("-", ":").split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise ValueError(f"{text!r} is not a MAC address")
    return bytes(int(p, 16) for p in parts)


SPEED_NAMES: Final = {
    1_000_000_000: "SPEED_1GB", 10_000_000_000: "SPEED_10GB", 25_000_000_000: "SPEED_25GB",
    40_000_000_000: "SPEED_40GB", 50_000_000_000: "SPEED_50GB",
    100_000_000_000: "SPEED_100GB", 200_000_000_000: "SPEED_200GB",
    400_000_000_000: "SPEED_400GB", 800_000_000_000: "SPEED_800GB",
}
SPEED_BPS: Final = {name: bps for bps, name in SPEED_NAMES.items()}
