"""Optics and chassis sensors located through ENTITY-MIB: rows in, a sensor map out.

``learn_sensors`` runs on a describe walk and returns a :class:`SensorMap`: for each
sensor value instance (value column OID, index), the entity it belongs to (an
ifIndex, or 0 for the switch itself), the catalogue metric and how its raw integer
converts. Later polls walk only :attr:`SensorMap.columns` and ``read_sensors``
turns their rows into catalogue values. Both are pure. Tables and OIDs are those of
:mod:`fabricops.core.snmp_entity_mib` and :mod:`fabricops.core.snmp_mib`.

Where a sensor belongs. An entity names port N when entAliasMappingTable maps it
to ``ifIndex.N``, or else when its entPhysicalName equals the ifName (or ifDescr)
of N. From the sensor up through entPhysicalContainedIn (the sensor itself
first), the first entity that names a port, or that is a transceiver (class
port(10), or a module, container or other entity whose name or description says
transceiver, xcvr, SFP, QSFP or OSFP) directly containing one to eight port
entities that name ports, decides: the sensor is one of that port's optics (the
lowest ifIndex for a breakout transceiver that holds several). So a sensor on a
port, on a transceiver that contains its port, or on a lane of either, lands on
the port. A sensor with no such entity above it is a chassis sensor and belongs
to the switch, never to a port. Vendor DOM tables are indexed by ifIndex
(Juniper) or by the port's entPhysicalIndex (Huawei) and are placed the same
way; vendor chassis temperature tables (jnxOperatingTemp, hwEntityTemperature)
belong to the switch. A sensor whose entPhySensorOperStatus is not ok(1) at the
describe is left out (counted) until the next describe.

What a sensor measures. On a port: dBm(14) and watts(6) are receive or transmit
power, told apart by "rx"/"receive"/"input" or "tx"/"transmit"/"output" in the
sensor's entPhysicalName or entPhysicalDescr; amperes(5) is laser bias
(``tx_bias_ma``), celsius(8) module temperature, voltsDC(4) supply voltage. On the
chassis: celsius is ``chassis_temperature_c``, rpm(10) ``fan_speed_rpm``, watts
under a powerSupply(6) entity ``psu_power_w``. Values are
``raw x 10^(3 x (scale - 9) - precision)`` in SI units (ENTITY-SENSOR-MIB); watts
are shown as dBm.

Several sensors for one (entity, metric), e.g. the lanes of a 400G transceiver or
the fans of a chassis, give one sample: the weakest lane for receive and transmit
power (the lane that fails first), the highest bias current, the highest
temperature, the lowest supply voltage, the slowest fan, and the sum of power
drawn over power supplies.

Nothing is dropped silently: a sensor that cannot be placed or has no metric is
counted per reason in ``SensorMap.unmapped``; a value row that is not a number,
or whose reading falls outside its metric's ``valid`` range, is counted as
malformed (the first one described); a row of a sensor not described, or a
vendor "no reading" value, is counted per reason in ``SensorReadings.skipped``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Final

from fabricops.core import snmp_entity_mib as ent
from fabricops.core import snmp_mib as mib
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.snmp_entity_mib import PhysicalClass, SensorDataType
from fabricops.core.snmp_mib import Column, Oid

Rows = Mapping[Oid, int | bytes]
Tables = Mapping[Oid, Rows]
SWITCH: Final = 0  # the "port" of a chassis sensor: the switch itself


class Aggregate(StrEnum):
    """How several sensors of one (entity, metric) become one sample."""

    MIN = "min"
    MAX = "max"
    SUM = "sum"


AGGREGATE: Final[dict[str, Aggregate]] = {
    "rx_power_dbm": Aggregate.MIN, "tx_power_dbm": Aggregate.MIN,
    "tx_bias_ma": Aggregate.MAX, "temperature_c": Aggregate.MAX,
    "supply_voltage_v": Aggregate.MIN, "chassis_temperature_c": Aggregate.MAX,
    "fan_speed_rpm": Aggregate.MIN, "psu_power_w": Aggregate.SUM,
}
ENTITY_SENSOR_META: Final = (mib.SENSOR_TYPE, mib.SENSOR_SCALE, mib.SENSOR_PRECISION,
                             mib.SENSOR_STATUS)
CISCO_SENSOR_META: Final = (ent.CSENSOR_TYPE, ent.CSENSOR_SCALE, ent.CSENSOR_PRECISION,
                            ent.CSENSOR_STATUS)
DESCRIBE_COLUMNS: Final[tuple[Column, ...]] = (
    ent.PHY_DESCR, ent.PHY_CONTAINED_IN, ent.PHY_CLASS, ent.PHY_NAME, ent.ALIAS_MAPPING,
    *ENTITY_SENSOR_META, *CISCO_SENSOR_META)
"""Columns read on a describe walk only (with ifName and ifDescr)."""
VALUE_COLUMNS: Final[tuple[Column, ...]] = (
    mib.SENSOR_VALUE, ent.CSENSOR_VALUE, *(d.column for d in ent.DOM_COLUMNS))
"""Every sensor value column; a device's map says which of them it has."""
_XCVR = re.compile(r"transceiver|xcvr|sfp|qsfp|osfp")
_RX = re.compile(r"\b(rx|receive|input)")
_TX = re.compile(r"\b(tx|transmit|output)")
_MAX_DEPTH = 64
_BREAKOUT_MAX = 8  # ports one transceiver may serve (8 x 50G out of a 400G module)
_SCALES, _PRECISIONS = range(1, 18), range(-8, 10)
_RAW_LIMIT = 1 << 63  # larger than any Integer32 or Unsigned32 an agent may send


@dataclass(frozen=True)
class SensorSpec:
    """One sensor instance: where it belongs and how its raw value converts.

    The reading is ``raw x factor`` in the metric's unit, or, with ``milliwatts``,
    that many mW shown as dBm.
    """

    port: int  # ifIndex; SWITCH (0) for a chassis sensor
    metric: str
    factor: float
    milliwatts: bool = False
    source: str = ""  # entity index or vendor table row, for problem reports


@dataclass(frozen=True)
class SensorMap:
    """The sensors of one device, by (value column OID, index), learnt on a describe."""

    sensors: dict[tuple[Oid, Oid], SensorSpec] = field(default_factory=dict)
    unmapped: dict[str, int] = field(default_factory=dict)  # reason -> sensors

    @cached_property
    def columns(self) -> tuple[Column, ...]:
        """The value columns that hold at least one mapped sensor, in walk order."""
        have = {c for c, _ in self.sensors}
        return tuple(c for c in VALUE_COLUMNS if c.oid in have)

    def ports(self) -> set[int]:
        return {s.port for s in self.sensors.values()}


@dataclass
class SensorReadings:
    """One poll's sensor samples, aggregated per (ifIndex or SWITCH, metric)."""

    values: dict[tuple[int, str], float] = field(default_factory=dict)
    malformed: int = 0
    problem: str | None = None
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows


@dataclass
class _Tree:
    """entPhysicalTable and entAliasMappingTable of one device, and interface names."""

    parent: dict[int, int]
    klass: dict[int, int]
    text: dict[int, str]  # entPhysicalName and entPhysicalDescr, lower case
    name: dict[int, str]
    alias: dict[int, int]
    if_by_name: dict[str, int]
    unmapped: dict[str, int]
    children: dict[int, list[int]] | None = None

    def names_port(self, index: int) -> int | None:
        """The ifIndex entity ``index`` names (alias mapping, else an equal ifName)."""
        found = self.alias.get(index)
        return found if found is not None else self.if_by_name.get(self.name.get(index, ""))

    def port_of(self, index: int) -> int | None:
        """The ifIndex the entity belongs to (see the module docstring), if any."""
        seen: set[int] = set()
        while index and index not in seen and len(seen) < _MAX_DEPTH:
            seen.add(index)
            found = self.names_port(index)
            if found is None and self._transceiver(index):
                held = [p for c in self._children(index) if self.klass.get(c) ==
                        PhysicalClass.PORT and (p := self.names_port(c)) is not None]
                found = min(held) if 0 < len(held) <= _BREAKOUT_MAX else None
            if found is not None:
                return found
            index = self.parent.get(index, 0)
        return None

    def _transceiver(self, index: int) -> bool:
        klass = self.klass.get(index)
        return klass == PhysicalClass.PORT or (
            klass in (PhysicalClass.MODULE, PhysicalClass.CONTAINER, PhysicalClass.OTHER)
            and _XCVR.search(self.text.get(index, "")) is not None)

    def _children(self, index: int) -> list[int]:
        """Entities directly contained in ``index``."""
        if self.children is None:
            self.children = {}
            for child, parent in self.parent.items():
                self.children.setdefault(parent, []).append(child)
        return self.children.get(index, [])

    def under(self, index: int, klass: PhysicalClass) -> bool:
        """True if the entity or one above it is of class ``klass``."""
        seen: set[int] = set()
        while index and index not in seen and len(seen) < _MAX_DEPTH:
            seen.add(index)
            if self.klass.get(index) == klass:
                return True
            index = self.parent.get(index, 0)
        return False


def learn_sensors(tables: Tables) -> SensorMap:
    """The device's sensor map from a describe walk (see the module docstring)."""
    tree = _tree(tables)
    out: dict[tuple[Oid, Oid], SensorSpec] = {}
    for meta, value in ((ENTITY_SENSOR_META, mib.SENSOR_VALUE),
                        (CISCO_SENSOR_META, ent.CSENSOR_VALUE)):
        _learn_entity_sensors(tables, tree, meta, value, out)
    for dom in ent.DOM_COLUMNS:
        _learn_dom(tables, tree, dom, out)
    return SensorMap(out, tree.unmapped)


def _count(counts: dict[str, int], reason: str, n: int = 1) -> None:
    counts[reason] = counts.get(reason, 0) + n


def _tree(tables: Tables) -> _Tree:
    unmapped: dict[str, int] = {}

    def column(col: Column, kind: type) -> dict[int, int | bytes]:
        out: dict[int, int | bytes] = {}
        for idx, v in tables.get(col.oid, {}).items():
            if len(idx) == 1 and isinstance(v, kind):
                out[idx[0]] = v
            else:
                _count(unmapped, "malformed_entity_row")
        return out

    parent = {k: int(v) for k, v in column(ent.PHY_CONTAINED_IN, int).items()}
    klass = {k: int(v) for k, v in column(ent.PHY_CLASS, int).items()}
    names = {k: _text(v) for k, v in column(ent.PHY_NAME, bytes).items()}
    descrs = {k: _text(v) for k, v in column(ent.PHY_DESCR, bytes).items()}
    text = {k: f"{names.get(k, '')} {descrs.get(k, '')}".lower()
            for k in names.keys() | descrs.keys()}
    alias: dict[int, int] = {}
    for idx, v in tables.get(ent.ALIAS_MAPPING.oid, {}).items():
        target = ent.oid_from_contents(v) if isinstance(v, bytes) and v else None
        if len(idx) == 2 and target and len(target) == len(ent.IF_INDEX_OID) + 1 \
                and target[:-1] == ent.IF_INDEX_OID:
            alias[idx[0]] = target[-1]
        else:
            _count(unmapped, "malformed_alias_row")
    if_by_name: dict[str, int] = {}
    for col in (mib.IF_DESCR, mib.IF_NAME):  # ifName wins over an equal ifDescr
        for idx, v in tables.get(col.oid, {}).items():
            if len(idx) == 1 and isinstance(v, bytes) and v:
                if_by_name[_text(v)] = idx[0]
    return _Tree(parent, klass, text, names, alias, if_by_name, unmapped)


def _learn_entity_sensors(tables: Tables, tree: _Tree, meta: tuple[Column, ...],
                          value: Column, out: dict[tuple[Oid, Oid], SensorSpec]) -> None:
    types, scales, precisions, statuses = (tables.get(c.oid, {}) for c in meta)
    for idx, kind in types.items():
        scale, precision = scales.get(idx), precisions.get(idx)
        status = statuses.get(idx, ent.SENSOR_STATUS_OK)
        if len(idx) != 1 or not all(isinstance(v, int) for v in (kind, scale, precision,
                                                                  status)):
            _count(tree.unmapped, "malformed_sensor_row")
            continue
        assert isinstance(scale, int)
        assert isinstance(precision, int)
        if scale not in _SCALES or precision not in _PRECISIONS:
            _count(tree.unmapped, "sensor_scale_out_of_range")
            continue
        if status != ent.SENSOR_STATUS_OK:
            _count(tree.unmapped, "sensor_not_ok")
            continue
        spec = _entity_spec(tree, idx[0], int(kind), 10.0 ** (3 * (scale - 9) - precision))
        if spec is not None:
            out[(value.oid, idx)] = spec


def _entity_spec(tree: _Tree, index: int, kind: int, unit: float) -> SensorSpec | None:
    """What sensor ``index`` of SensorDataType ``kind`` measures, or None (counted)."""
    port = tree.port_of(index)
    where = f"entity {index}"
    if port is None:
        metric = {SensorDataType.CELSIUS: "chassis_temperature_c",
                  SensorDataType.RPM: "fan_speed_rpm"}.get(SensorDataType(kind)) \
            if kind in SensorDataType._value2member_map_ else None
        if kind == SensorDataType.WATTS and tree.under(index, PhysicalClass.POWER_SUPPLY):
            metric = "psu_power_w"
        if metric is None:
            _count(tree.unmapped, "chassis_sensor_without_metric")
            return None
        return SensorSpec(SWITCH, metric, unit, source=where)
    if kind in (SensorDataType.WATTS, SensorDataType.DBM):
        text = tree.text.get(index, "")
        rx, tx = bool(_RX.search(text)), bool(_TX.search(text))
        if rx == tx:
            _count(tree.unmapped, "power_sensor_direction_unknown")
            return None
        metric = "rx_power_dbm" if rx else "tx_power_dbm"
        watts = kind == SensorDataType.WATTS
        return SensorSpec(port, metric, unit * 1000.0 if watts else unit, watts, where)
    optic = {SensorDataType.AMPERES: ("tx_bias_ma", 1000.0),
             SensorDataType.CELSIUS: ("temperature_c", 1.0),
             SensorDataType.VOLTS_DC: ("supply_voltage_v", 1.0)}
    found = optic.get(SensorDataType(kind)) if kind in SensorDataType._value2member_map_ \
        else None
    if found is None:
        _count(tree.unmapped, "port_sensor_without_metric")
        return None
    return SensorSpec(port, found[0], unit * found[1], source=where)


def _learn_dom(tables: Tables, tree: _Tree, dom: ent.DomColumn,
               out: dict[tuple[Oid, Oid], SensorSpec]) -> None:
    milliwatts = dom.unit is ent.DomUnit.MICROWATT
    factor = dom.factor / 1000.0 if milliwatts else dom.factor
    width = {mib.Index.IF_LANE: 2, mib.Index.COMPONENT: 0}.get(dom.column.index, 1)
    for idx in tables.get(dom.column.oid, {}):
        if not idx or (width and len(idx) != width):  # width 0: any number of sub-ids
            _count(tree.unmapped, "malformed_dom_row")
            continue
        if dom.chassis:
            port: int | None = SWITCH
        else:
            port = tree.port_of(idx[0]) if dom.column.index is mib.Index.ENTITY else idx[0]
        if port is None:
            _count(tree.unmapped, "optic_without_port")
            continue
        source = f"{dom.column.name}.{'.'.join(map(str, idx))}"
        out[(dom.column.oid, idx)] = SensorSpec(port, dom.metric, factor, milliwatts, source)


def read_sensors(tables: Tables, sensors: SensorMap) -> SensorReadings:
    """The catalogue values of a poll's sensor rows, aggregated (module docstring)."""
    out = SensorReadings()
    no_reading = {d.column.oid: ent.DOM_NO_READING | d.no_reading for d in ent.DOM_COLUMNS}
    found: dict[tuple[int, str], list[float]] = {}
    for col in sensors.columns:
        for idx, raw in tables.get(col.oid, {}).items():
            spec = sensors.sensors.get((col.oid, idx))
            if spec is None:
                _count(out.skipped, "not_described")
                continue
            if col.oid in no_reading and raw in no_reading[col.oid]:
                _count(out.skipped, "no_reading")
                continue
            reading = _reading(raw, spec)
            valid = CATALOGUE.by_name(spec.metric).valid
            if reading is None or reading not in valid:
                got = "no number" if reading is None else f"{reading:g}, outside {valid}"
                out.malformed += 1
                out.problem = out.problem or (
                    f"{spec.metric} of {spec.source}: reading {raw!r:.40} gives {got}")
                continue
            found.setdefault((spec.port, spec.metric), []).append(reading)
    for key, readings in found.items():
        how = AGGREGATE[key[1]]
        out.values[key] = min(readings) if how is Aggregate.MIN else \
            max(readings) if how is Aggregate.MAX else math.fsum(readings)
    return out


def _reading(raw: int | bytes, spec: SensorSpec) -> float | None:
    if not isinstance(raw, int) or isinstance(raw, bool) or abs(raw) > _RAW_LIMIT:
        return None
    value = raw * spec.factor
    if not spec.milliwatts:
        return value
    return 10.0 * math.log10(value) if value > 0 else mib.DARK_DBM


def _text(value: int | bytes) -> str:
    return value.decode("utf-8", "replace").strip("\x00 ") if isinstance(value, bytes) \
        else str(value)


__all__ = [
    "AGGREGATE", "DESCRIBE_COLUMNS", "SWITCH", "VALUE_COLUMNS", "Aggregate", "SensorMap",
    "SensorReadings", "SensorSpec", "learn_sensors", "read_sensors",
]
