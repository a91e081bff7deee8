"""The physical-entity and sensor tables of a switch: OIDs, enumerations, units.

Shared by the simulated agent (which serves them) and the SNMP poller (which
locates optics and chassis sensors through them). Numeric OIDs only.

ENTITY-MIB (RFC 6933), index ``entPhysicalIndex`` (any numbering; vendors differ):

- entPhysicalTable 1.3.6.1.2.1.47.1.1.1.1: entPhysicalDescr .2, entPhysicalContainedIn
  .4 (the parent entity, 0 for the root), entPhysicalClass .5 (:class:`PhysicalClass`),
  entPhysicalName .7
- entAliasMappingTable 1.3.6.1.2.1.47.1.3.2.1, index (entPhysicalIndex,
  entAliasLogicalIndexOrZero): entAliasMappingIdentifier .2, an OBJECT IDENTIFIER;
  ``ifIndex.N`` (1.3.6.1.2.1.2.2.1.1.N) names the interface N of a port entity

Sensors indexed by entPhysicalIndex, each as (type, scale, precision, value, status):

- ENTITY-SENSOR-MIB entPhySensorTable 1.3.6.1.2.1.99.1.1.1 (RFC 3433; the columns
  are in :mod:`fabricops.core.snmp_mib`)
- CISCO-ENTITY-SENSOR-MIB entSensorValueTable 1.3.6.1.4.1.9.9.91.1.1.1.1: entSensorType
  .1, entSensorScale .2, entSensorPrecision .3, entSensorValue .4, entSensorStatus .5;
  same enumerations, plus dBm(14)

Digital optical monitoring in fixed units (:data:`DOM_COLUMNS`):

- JUNIPER-DOM-MIB jnxDomCurrentTable 1.3.6.1.4.1.2636.3.60.1.1.1.1, index ifIndex:
  RxLaserPower .5 and TxLaserOutputPower .7 (0.01 dBm), TxLaserBiasCurrent .6
  (0.001 mA), ModuleTemperature .8 (degrees C), ModuleVoltage .25 (0.001 V)
- JUNIPER-DOM-MIB jnxDomCurrentLaneTable 1.3.6.1.4.1.2636.3.60.1.2.1.1, index (ifIndex,
  lane): LaneRxLaserPower .6, LaneTxLaserBiasCurrent .7, LaneTxLaserOutputPower .8,
  LaneLaserTemperature .9, same units
- HUAWEI-ENTITY-EXTENT-MIB hwOpticalModuleInfoTable 1.3.6.1.4.1.2011.5.25.31.1.1.3.1,
  index entPhysicalIndex of the port: hwEntityOpticalTemperature .5 (degrees C),
  Voltage .6 (mV), BiasCurrent .7 (uA), RxPower .8 and TxPower .9 (uW); -1 and
  2147483647 mean "no reading"

Chassis temperatures in vendor tables (0 means the component has no sensor):

- JUNIPER-MIB jnxOperatingTemp 1.3.6.1.4.1.2636.3.1.13.1.7, index (jnxOperatingContentsIndex,
  L1, L2, L3), degrees C
- HUAWEI-ENTITY-EXTENT-MIB hwEntityTemperature 1.3.6.1.4.1.2011.5.25.31.1.1.1.1.11, index
  entPhysicalIndex of a board, degrees C
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Final

from fabricops.core.snmp_mib import Column, Index, Oid, Syntax, ber_oid

_PHY, _ALIAS = "1.3.6.1.2.1.47.1.1.1.1", "1.3.6.1.2.1.47.1.3.2.1"
_CSENSOR = "1.3.6.1.4.1.9.9.91.1.1.1.1"
_JDOM, _JLANE = "1.3.6.1.4.1.2636.3.60.1.1.1.1", "1.3.6.1.4.1.2636.3.60.1.2.1.1"
_HWOPT = "1.3.6.1.4.1.2011.5.25.31.1.1.3.1"
IF_INDEX_OID: Final[Oid] = (1, 3, 6, 1, 2, 1, 2, 2, 1, 1)


def _col(name: str, dotted: str, syntax: Syntax, index: Index) -> Column:
    return Column(name, tuple(int(x) for x in dotted.split(".")), syntax, index)


INT, OCT = Syntax.INTEGER, Syntax.OCTETS
ENT, IF, LANE = Index.ENTITY, Index.IF, Index.IF_LANE
PHY_DESCR = _col("entPhysicalDescr", f"{_PHY}.2", OCT, ENT)
PHY_CONTAINED_IN = _col("entPhysicalContainedIn", f"{_PHY}.4", INT, ENT)
PHY_CLASS = _col("entPhysicalClass", f"{_PHY}.5", INT, ENT)
PHY_NAME = _col("entPhysicalName", f"{_PHY}.7", OCT, ENT)
ALIAS_MAPPING = _col("entAliasMappingIdentifier", f"{_ALIAS}.2", Syntax.OID,
                     Index.ENTITY_ALIAS)
CSENSOR_TYPE = _col("entSensorType", f"{_CSENSOR}.1", INT, ENT)
CSENSOR_SCALE = _col("entSensorScale", f"{_CSENSOR}.2", INT, ENT)
CSENSOR_PRECISION = _col("entSensorPrecision", f"{_CSENSOR}.3", INT, ENT)
CSENSOR_VALUE = _col("entSensorValue", f"{_CSENSOR}.4", INT, ENT)
CSENSOR_STATUS = _col("entSensorStatus", f"{_CSENSOR}.5", INT, ENT)


class PhysicalClass(IntEnum):
    """ENTITY-MIB PhysicalClass."""

    OTHER = 1
    UNKNOWN = 2
    CHASSIS = 3
    BACKPLANE = 4
    CONTAINER = 5
    POWER_SUPPLY = 6
    FAN = 7
    SENSOR = 8
    MODULE = 9
    PORT = 10
    STACK = 11
    CPU = 12


class SensorDataType(IntEnum):
    """ENTITY-SENSOR-MIB SensorDataType (dBm(14) from CISCO-ENTITY-SENSOR-MIB)."""

    OTHER = 1
    UNKNOWN = 2
    VOLTS_AC = 3
    VOLTS_DC = 4
    AMPERES = 5
    WATTS = 6
    HERTZ = 7
    CELSIUS = 8
    PERCENT_RH = 9
    RPM = 10
    CMM = 11
    TRUTH_VALUE = 12
    SPECIAL_ENUM = 13
    DBM = 14


SENSOR_STATUS_OK: Final = 1  # ok(1); unavailable(2), nonoperational(3)
DOM_NO_READING: Final = frozenset((-1, 2147483647, -2147483648))


class DomUnit(StrEnum):
    """How a fixed-unit DOM reading becomes a catalogue value."""

    LINEAR = "linear"  # raw x factor, in the metric's unit
    MICROWATT = "microwatt"  # raw x factor microwatts, shown as dBm


@dataclass(frozen=True)
class DomColumn:
    """A vendor DOM column: the metric it gives and how its raw integer converts."""

    column: Column
    metric: str
    factor: float
    unit: DomUnit = DomUnit.LINEAR
    vendor: str = ""
    chassis: bool = False  # a chassis sensor: its readings belong to the switch
    no_reading: frozenset[int] = frozenset()  # values that mean "not measured"


def _dom(name: str, dotted: str, index: Index, metric: str, factor: float,
         unit: DomUnit, vendor: str) -> DomColumn:
    return DomColumn(_col(name, dotted, INT, index), metric, factor, unit, vendor)


_L, _UW = DomUnit.LINEAR, DomUnit.MICROWATT
_ZERO = frozenset((0,))
DOM_COLUMNS: Final[tuple[DomColumn, ...]] = (
    _dom("jnxDomCurrentRxLaserPower", f"{_JDOM}.5", IF, "rx_power_dbm", 0.01, _L, "juniper"),
    _dom("jnxDomCurrentTxLaserBiasCurrent", f"{_JDOM}.6", IF, "tx_bias_ma", 0.001, _L,
         "juniper"),
    _dom("jnxDomCurrentTxLaserOutputPower", f"{_JDOM}.7", IF, "tx_power_dbm", 0.01, _L,
         "juniper"),
    _dom("jnxDomCurrentModuleTemperature", f"{_JDOM}.8", IF, "temperature_c", 1.0, _L,
         "juniper"),
    _dom("jnxDomCurrentModuleVoltage", f"{_JDOM}.25", IF, "supply_voltage_v", 0.001, _L,
         "juniper"),
    _dom("jnxDomCurrentLaneRxLaserPower", f"{_JLANE}.6", LANE, "rx_power_dbm", 0.01, _L,
         "juniper"),
    _dom("jnxDomCurrentLaneTxLaserBiasCurrent", f"{_JLANE}.7", LANE, "tx_bias_ma", 0.001,
         _L, "juniper"),
    _dom("jnxDomCurrentLaneTxLaserOutputPower", f"{_JLANE}.8", LANE, "tx_power_dbm", 0.01,
         _L, "juniper"),
    _dom("jnxDomCurrentLaneLaserTemperature", f"{_JLANE}.9", LANE, "temperature_c", 1.0, _L,
         "juniper"),
    _dom("hwEntityOpticalTemperature", f"{_HWOPT}.5", ENT, "temperature_c", 1.0, _L,
         "huawei"),
    _dom("hwEntityOpticalVoltage", f"{_HWOPT}.6", ENT, "supply_voltage_v", 0.001, _L,
         "huawei"),
    _dom("hwEntityOpticalBiasCurrent", f"{_HWOPT}.7", ENT, "tx_bias_ma", 0.001, _L, "huawei"),
    _dom("hwEntityOpticalRxPower", f"{_HWOPT}.8", ENT, "rx_power_dbm", 1.0, _UW, "huawei"),
    _dom("hwEntityOpticalTxPower", f"{_HWOPT}.9", ENT, "tx_power_dbm", 1.0, _UW, "huawei"),
    DomColumn(_col("jnxOperatingTemp", "1.3.6.1.4.1.2636.3.1.13.1.7", INT, Index.COMPONENT),
              "chassis_temperature_c", 1.0, _L, "juniper", True, _ZERO),
    DomColumn(_col("hwEntityTemperature", "1.3.6.1.4.1.2011.5.25.31.1.1.1.1.11", INT, ENT),
              "chassis_temperature_c", 1.0, _L, "huawei", True, _ZERO),
)


def alias_to_if_index(if_index: int) -> bytes:
    """entAliasMappingIdentifier naming interface ``if_index`` (BER contents octets)."""
    encoded = ber_oid((*IF_INDEX_OID, if_index))
    return encoded[2:] if encoded[1] < 0x80 else encoded[2 + (encoded[1] & 0x7F):]


def oid_from_contents(contents: bytes) -> Oid | None:
    """The OID whose BER contents octets are ``contents``; None if they are not one."""
    subids, acc = [], 0
    for b in contents:
        acc = (acc << 7) | (b & 0x7F)
        if not b & 0x80:
            subids.append(acc)
            acc = 0
    if not subids or contents[-1] & 0x80:
        return None
    first = subids[0]
    head = (first // 40, first % 40) if first < 80 else (2, first - 80)
    return (*head, *subids[1:])


__all__ = [
    "ALIAS_MAPPING", "CSENSOR_PRECISION", "CSENSOR_SCALE", "CSENSOR_STATUS", "CSENSOR_TYPE",
    "CSENSOR_VALUE", "DOM_COLUMNS", "DOM_NO_READING", "IF_INDEX_OID", "PHY_CLASS",
    "PHY_CONTAINED_IN", "PHY_DESCR", "PHY_NAME", "SENSOR_STATUS_OK", "DomColumn", "DomUnit",
    "PhysicalClass", "SensorDataType", "alias_to_if_index", "oid_from_contents",
]
