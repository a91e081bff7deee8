"""The ENTITY-MIB tree a simulated switch serves, laid out as real switches do.

Numbering (entPhysicalIndex; nothing in it is derived from the collector's side,
and the poller must find everything through containment and alias mapping):

- 1 the chassis; board temperature sensors 1001..1002 contained in it;
- power supplies 200000000 + 1000 n, each with an output power (watts) and a
  temperature sensor; fan trays 300000000 + 1000 n, each with a speed sensor
  (rpm). These are served with fixed, plausible readings;
- per port with optics (ifIndex p), base 400000000 + 1000 p: a transceiver cage
  (container) at base, the transceiver (module) at base + 100, contained in it,
  and the port (class port) at base + 200 inside the transceiver, which
  entAliasMappingTable maps to ``ifIndex.p``; the transceiver's sensors hang off
  the transceiver: module temperature at base + 101, transmit power lanes
  base + 111..114 and receive power lanes base + 121..124, each lane served with
  the port's value of the moment (the twin models one value per port).

Sensors are served in ENTITY-SENSOR-MIB entPhySensorTable with the encodings of
:data:`fabricops.core.snmp_mib.SENSOR_ENCODING`.
"""

from __future__ import annotations

from typing import Final

from fabricops.core import snmp_entity_mib as ent
from fabricops.core import snmp_mib as mib
from fabricops.core.snmp_entity_mib import PhysicalClass, SensorDataType
from fabricops.core.snmp_mib import Cell, SensorKind, instance

CHASSIS: Final = 1
LANES: Final = 4
_PORT_BASE, _PORT_STRIDE = 400_000_000, 1000
_PSU_BASE, _FAN_BASE = 200_000_000, 300_000_000
_INT, _OCT = mib.Syntax.INTEGER, mib.Syntax.OCTETS
OPTIC_METRICS: Final = frozenset(k.metric for k in SensorKind)
# (name, type, scale, precision, raw value) of the fixed chassis sensors
_BOARD = (("Board temperature sensor front", SensorDataType.CELSIUS, 9, 1, 412),
          ("Board temperature sensor rear", SensorDataType.CELSIUS, 9, 1, 455))
_PSUS, _FANS = 2, 4


def transceiver_index(if_index: int) -> int:
    """entPhysicalIndex of the transceiver serving port ``if_index``."""
    return _PORT_BASE + _PORT_STRIDE * if_index + 100


def _entity(index: int, parent: int, klass: PhysicalClass, name: str, descr: str
            ) -> list[Cell]:
    return [Cell(instance(ent.PHY_DESCR, index), _OCT, descr.encode()),
            Cell(instance(ent.PHY_CONTAINED_IN, index), _INT, parent),
            Cell(instance(ent.PHY_CLASS, index), _INT, int(klass)),
            Cell(instance(ent.PHY_NAME, index), _OCT, name.encode())]


def _sensor(index: int, parent: int, name: str, kind: int, scale: int, precision: int,
            value: int | None = None, sample: int | None = None,
            sensor: SensorKind | None = None) -> list[Cell]:
    cells = _entity(index, parent, PhysicalClass.SENSOR, name, name)
    cells += [Cell(instance(mib.SENSOR_TYPE, index), _INT, kind),
              Cell(instance(mib.SENSOR_SCALE, index), _INT, scale),
              Cell(instance(mib.SENSOR_PRECISION, index), _INT, precision),
              Cell(instance(mib.SENSOR_STATUS, index), _INT, mib.SENSOR_OK)]
    if sample is None:
        cells.append(Cell(instance(mib.SENSOR_VALUE, index), _INT, value))
    else:
        cells.append(Cell(instance(mib.SENSOR_VALUE, index), _INT, samples=(sample,),
                          sensor=sensor))
    return cells


def chassis_cells(device: str) -> list[Cell]:
    """The chassis, its power supplies and fans, and their sensors."""
    cells = _entity(CHASSIS, 0, PhysicalClass.CHASSIS, "Chassis",
                    f"fabricops simulated switch {device}")
    for k, (name, kind, scale, precision, raw) in enumerate(_BOARD):
        cells += _sensor(1001 + k, CHASSIS, name, kind, scale, precision, raw)
    for n in range(1, _PSUS + 1):
        psu = _PSU_BASE + 1000 * n
        cells += _entity(psu, CHASSIS, PhysicalClass.POWER_SUPPLY, f"PowerSupply{n}",
                         "1600W AC power supply")
        cells += _sensor(psu + 1, psu, f"PowerSupply{n} output power sensor",
                         SensorDataType.WATTS, 9, 1, 4125 + 10 * n)
        cells += _sensor(psu + 2, psu, f"PowerSupply{n} temperature sensor",
                         SensorDataType.CELSIUS, 9, 1, 380 + n)
    for n in range(1, _FANS + 1):
        fan = _FAN_BASE + 1000 * n
        cells += _entity(fan, CHASSIS, PhysicalClass.FAN, f"Fan{n}", "Fan tray")
        cells += _sensor(fan + 1, fan, f"Fan{n} speed sensor", SensorDataType.RPM, 9, 0,
                         9000 + 40 * n)
    return cells


def port_cells(if_index: int, ifname: str, samples: dict[SensorKind, int]) -> list[Cell]:
    """Cage, transceiver, port and optics sensors of one port.

    ``samples`` maps each optics kind the port has to its position in the frame.
    """
    base = _PORT_BASE + _PORT_STRIDE * if_index
    xcvr, port = base + 100, base + 200
    cells = _entity(base, CHASSIS, PhysicalClass.CONTAINER, f"Xcvr Slot {if_index}",
                    "Transceiver cage")
    cells += _entity(xcvr, base, PhysicalClass.MODULE, f"Xcvr {ifname}",
                     "400GBASE-DR4 QSFP-DD transceiver")
    cells += _entity(port, xcvr, PhysicalClass.PORT, ifname, "400G Ethernet port")
    cells.append(Cell(instance(ent.ALIAS_MAPPING, port, 0), mib.Syntax.OID,
                      ent.alias_to_if_index(if_index)))
    for kind, sample in samples.items():
        enc = mib.SENSOR_ENCODING[kind]
        if kind is SensorKind.TEMPERATURE:
            cells += _sensor(xcvr + 1, xcvr, f"DOM Temperature Sensor for {ifname}",
                             enc.type, enc.scale, enc.precision, sample=sample, sensor=kind)
            continue
        first, what = (111, "Tx") if kind is SensorKind.TX_POWER else (121, "Rx")
        for lane in range(LANES):
            cells += _sensor(xcvr + first + lane, xcvr,
                             f"DOM {what} Power Sensor Lane {lane + 1} for {ifname}",
                             enc.type, enc.scale, enc.precision, sample=sample, sensor=kind)
    return cells


def entity_cells(device: str, ifnames: list[str], sample: dict[tuple[int, str], int]
                 ) -> list[Cell]:
    """The whole tree of one switch; ``sample`` maps (ifIndex, metric) to a position."""
    cells = chassis_cells(device)
    for p, ifname in enumerate(ifnames, 1):
        optics = {k: i for k in SensorKind if (i := sample.get((p, k.metric))) is not None}
        if optics:
            cells += port_cells(p, ifname, optics)
    return cells


__all__ = ["CHASSIS", "LANES", "OPTIC_METRICS", "chassis_cells", "entity_cells", "port_cells",
           "transceiver_index"]
