"""The SNMP tables of a switch: OIDs, index layout and value encodings.

Shared by the simulated agent (which serves them) and the SNMP poller (which
reads them back into catalogue metrics). Numeric OIDs only; no MIB files.

Interfaces (index ``ifIndex`` = a port's position among its switch's ports + 1):

- SNMPv2-MIB ``sysDescr.0`` 1.3.6.1.2.1.1.1.0, ``sysName.0`` 1.3.6.1.2.1.1.5.0
- IF-MIB ``ifNumber.0`` 1.3.6.1.2.1.2.1.0
- IF-MIB ifTable 1.3.6.1.2.1.2.2.1: ifIndex .1, ifDescr .2, ifOperStatus .8
  (``oper_status``), ifInDiscards .13, ifInErrors .14, ifOutDiscards .19 (Counter32)
- EtherLike-MIB ``dot3StatsFCSErrors`` 1.3.6.1.2.1.10.7.2.1.3 (Counter32, ``in_fcs_errors``)
- IF-MIB ifXTable 1.3.6.1.2.1.31.1.1.1: ifName .1, ifHCInOctets .6, ifHCInUcastPkts .7,
  ifHCOutOctets .10, ifHCOutUcastPkts .11 (Counter64)

Priority flow control:

- IEEE8021-PFC-MIB ieee8021PfcIfTable 1.3.111.2.802.1.1.21.1.1.1, index ifIndex:
  ieee8021PfcRequests .2 (PFC frames sent) and ieee8021PfcIndications .3 (received),
  Counter32 totals over all priorities. The standard MIB has no per-priority counters.
- CISCO-PFC-EXT-MIB cpfcIfPriorityTable 1.3.6.1.4.1.9.9.813.1.2.1, index
  (ifIndex, priority 0..7): cpfcIfPriorityRequests .2 (``pfc_tx_pause{prio}``) and
  cpfcIfPriorityIndications .3 (``pfc_rx_pause{prio}``), Counter64. SONiC serves the
  same table for per-priority pause counters.

Optics, ENTITY-SENSOR-MIB entPhySensorTable 1.3.6.1.2.1.99.1.1.1, index
entPhysicalIndex: entPhySensorType .1, entPhySensorScale .2, entPhySensorPrecision .3,
entPhySensorValue .4, entPhySensorOperStatus .5. Sensors are placed through ENTITY-MIB
containment and alias mapping (:mod:`fabricops.core.snmp_entity_mib`), never by their
index; ``sensor_index``/``sensor_port`` (``ifIndex * 100 + k``, k = 1 temperature,
2 transmit power, 3 receive power) only number sensors for tests. RFC 3433 has no dBm type, so power
is served as watts(6), scale micro(7), precision 4 (units of 0.1 nW) and converted
back to dBm by the reader; temperature is celsius(8), units(9), precision 3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from functools import lru_cache
from typing import Final

Oid = tuple[int, ...]


class Syntax(StrEnum):
    """The SMI type of a column's values."""

    INTEGER = "integer"
    OCTETS = "octets"
    COUNTER32 = "counter32"
    COUNTER64 = "counter64"
    GAUGE32 = "gauge32"  # Gauge32 / Unsigned32
    TIMETICKS = "timeticks"  # hundredths of a second
    OID = "oid"  # OBJECT IDENTIFIER, served and read as its BER contents octets


class Index(StrEnum):
    """How a column's instances are indexed."""

    SCALAR = "scalar"  # one instance, .0
    IF = "if"  # ifIndex
    IF_PRIO = "if_prio"  # ifIndex, priority
    SENSOR = "sensor"  # entPhysicalIndex = ifIndex * 100 + SensorKind
    ENTITY = "entity"  # entPhysicalIndex, any layout (see fabricops.core.snmp_entity_mib)
    ENTITY_ALIAS = "entity_alias"  # entPhysicalIndex, entAliasLogicalIndexOrZero
    IF_LANE = "if_lane"  # ifIndex, lane
    COMPONENT = "component"  # a vendor's chassis component index (any number of sub-ids)


@dataclass(frozen=True)
class Column:
    """One MIB column (or scalar); ``metric`` is its catalogue family, if any."""

    name: str
    oid: Oid
    syntax: Syntax
    index: Index
    metric: str | None = None

    @property
    def width_bits(self) -> int:
        """Counter width (32 or 64); 0 for columns that are not counters."""
        return {Syntax.COUNTER32: 32, Syntax.COUNTER64: 64}.get(self.syntax, 0)


def _oid(dotted: str) -> Oid:
    return tuple(int(x) for x in dotted.split("."))


_IF, _IFX = "1.3.6.1.2.1.2.2.1", "1.3.6.1.2.1.31.1.1.1"
_PFC, _CPFC = "1.3.111.2.802.1.1.21.1.1.1", "1.3.6.1.4.1.9.9.813.1.2.1"
_SENSOR = "1.3.6.1.2.1.99.1.1.1"
INT, OCT, C32, C64 = Syntax.INTEGER, Syntax.OCTETS, Syntax.COUNTER32, Syntax.COUNTER64


def _col(name: str, dotted: str, syntax: Syntax, index: Index, metric: str | None = None
         ) -> Column:
    return Column(name, _oid(dotted), syntax, index, metric)


SYS_DESCR = _col("sysDescr", "1.3.6.1.2.1.1.1", OCT, Index.SCALAR)
SYS_NAME = _col("sysName", "1.3.6.1.2.1.1.5", OCT, Index.SCALAR)
IF_NUMBER = _col("ifNumber", "1.3.6.1.2.1.2.1", INT, Index.SCALAR)
IF_INDEX = _col("ifIndex", f"{_IF}.1", INT, Index.IF)
IF_DESCR = _col("ifDescr", f"{_IF}.2", OCT, Index.IF)
IF_OPER_STATUS = _col("ifOperStatus", f"{_IF}.8", INT, Index.IF, "oper_status")
IF_IN_DISCARDS = _col("ifInDiscards", f"{_IF}.13", C32, Index.IF, "in_discards")
IF_IN_ERRORS = _col("ifInErrors", f"{_IF}.14", C32, Index.IF, "in_errors")
IF_OUT_DISCARDS = _col("ifOutDiscards", f"{_IF}.19", C32, Index.IF, "out_discards")
DOT3_FCS_ERRORS = _col("dot3StatsFCSErrors", "1.3.6.1.2.1.10.7.2.1.3", C32, Index.IF,
                       "in_fcs_errors")
IF_NAME = _col("ifName", f"{_IFX}.1", OCT, Index.IF)
IF_HC_IN_OCTETS = _col("ifHCInOctets", f"{_IFX}.6", C64, Index.IF, "in_octets")
IF_HC_IN_UCAST = _col("ifHCInUcastPkts", f"{_IFX}.7", C64, Index.IF, "in_pkts")
IF_HC_OUT_OCTETS = _col("ifHCOutOctets", f"{_IFX}.10", C64, Index.IF, "out_octets")
IF_HC_OUT_UCAST = _col("ifHCOutUcastPkts", f"{_IFX}.11", C64, Index.IF, "out_pkts")
SENSOR_TYPE = _col("entPhySensorType", f"{_SENSOR}.1", INT, Index.SENSOR)
SENSOR_SCALE = _col("entPhySensorScale", f"{_SENSOR}.2", INT, Index.SENSOR)
SENSOR_PRECISION = _col("entPhySensorPrecision", f"{_SENSOR}.3", INT, Index.SENSOR)
SENSOR_VALUE = _col("entPhySensorValue", f"{_SENSOR}.4", INT, Index.SENSOR)
SENSOR_STATUS = _col("entPhySensorOperStatus", f"{_SENSOR}.5", INT, Index.SENSOR)
PFC_REQUESTS = _col("ieee8021PfcRequests", f"{_PFC}.2", C32, Index.IF, "pfc_tx_pause")
PFC_INDICATIONS = _col("ieee8021PfcIndications", f"{_PFC}.3", C32, Index.IF, "pfc_rx_pause")
PRIO_REQUESTS = _col("cpfcIfPriorityRequests", f"{_CPFC}.2", C64, Index.IF_PRIO,
                     "pfc_tx_pause")
PRIO_INDICATIONS = _col("cpfcIfPriorityIndications", f"{_CPFC}.3", C64, Index.IF_PRIO,
                        "pfc_rx_pause")

# Columns read from agents that lack some of the above (IF-MIB, RFC 2863): names,
# 32-bit counters, speeds and the clocks that tell a counter discontinuity.
G32, TT = Syntax.GAUGE32, Syntax.TIMETICKS
SYS_OBJECT_ID = _col("sysObjectID", "1.3.6.1.2.1.1.2", OCT, Index.SCALAR)
SYS_UPTIME = _col("sysUpTime", "1.3.6.1.2.1.1.3", TT, Index.SCALAR)
IF_TABLE_LAST_CHANGE = _col("ifTableLastChange", "1.3.6.1.2.1.31.1.5", TT, Index.SCALAR)
IF_SPEED = _col("ifSpeed", f"{_IF}.5", G32, Index.IF)  # bits/s, 4294967295 when larger
IF_IN_OCTETS = _col("ifInOctets", f"{_IF}.10", C32, Index.IF, "in_octets")
IF_IN_UCAST = _col("ifInUcastPkts", f"{_IF}.11", C32, Index.IF, "in_pkts")
IF_OUT_OCTETS = _col("ifOutOctets", f"{_IF}.16", C32, Index.IF, "out_octets")
IF_OUT_UCAST = _col("ifOutUcastPkts", f"{_IF}.17", C32, Index.IF, "out_pkts")
IF_HIGH_SPEED = _col("ifHighSpeed", f"{_IFX}.15", G32, Index.IF)  # Mb/s
IF_ALIAS = _col("ifAlias", f"{_IFX}.18", OCT, Index.IF)
IF_COUNTER_DISCONTINUITY = _col("ifCounterDiscontinuityTime", f"{_IFX}.19", TT, Index.IF)

COLUMNS: Final[tuple[Column, ...]] = (
    SYS_DESCR, SYS_NAME, IF_NUMBER, IF_INDEX, IF_DESCR, IF_OPER_STATUS, IF_IN_DISCARDS,
    IF_IN_ERRORS, IF_OUT_DISCARDS, DOT3_FCS_ERRORS, IF_NAME, IF_HC_IN_OCTETS,
    IF_HC_IN_UCAST, IF_HC_OUT_OCTETS, IF_HC_OUT_UCAST, SENSOR_TYPE, SENSOR_SCALE,
    SENSOR_PRECISION, SENSOR_VALUE, SENSOR_STATUS, PFC_REQUESTS, PFC_INDICATIONS,
    PRIO_REQUESTS, PRIO_INDICATIONS,
)


class SensorType(IntEnum):
    """SensorDataType values read here (dBm(14) is CISCO-ENTITY-SENSOR-MIB's addition)."""

    WATTS = 6
    CELSIUS = 8
    DBM = 14


class SensorKind(IntEnum):
    """The optics sensors of a port; the value is the last digits of the sensor index."""

    TEMPERATURE = 1
    TX_POWER = 2
    RX_POWER = 3

    @property
    def metric(self) -> str:
        return {1: "temperature_c", 2: "tx_power_dbm", 3: "rx_power_dbm"}[self.value]


SENSOR_INDEX_STRIDE: Final = 100
SENSOR_OK: Final = 1
UNITS_SCALE: Final = 9  # SensorDataScale units(9); each step is a factor of 1000
DARK_DBM: Final = -60.0  # what a power sensor reading zero watts is reported as


@dataclass(frozen=True)
class SensorEncoding:
    """How a sensor kind is served: type, scale and precision of entPhySensorValue."""

    type: SensorType
    scale: int
    precision: int


SENSOR_ENCODING: Final = {
    SensorKind.TEMPERATURE: SensorEncoding(SensorType.CELSIUS, UNITS_SCALE, 3),
    SensorKind.TX_POWER: SensorEncoding(SensorType.WATTS, 7, 4),
    SensorKind.RX_POWER: SensorEncoding(SensorType.WATTS, 7, 4),
}
SENSOR_VALUE_LIMIT: Final = 1_000_000_000  # entPhySensorValue is -1e9..1e9


def sensor_index(if_index: int, kind: SensorKind) -> int:
    """entPhysicalIndex of a port's sensor."""
    return if_index * SENSOR_INDEX_STRIDE + int(kind)


def sensor_port(index: int) -> tuple[int, SensorKind] | None:
    """(ifIndex, kind) of a sensor index, or None if it is not a port optics sensor."""
    if_index, k = divmod(index, SENSOR_INDEX_STRIDE)
    if if_index < 1 or k not in SensorKind._value2member_map_:
        return None
    return if_index, SensorKind(k)


def encode_sensor(kind: SensorKind, value: float) -> int:
    """entPhySensorValue for a catalogue value (dBm or degrees C), clamped to its range.

    NaN is served as 0 (for power: no light).
    """
    if math.isnan(value):
        return 0
    enc = SENSOR_ENCODING[kind]
    value = max(-1000.0, min(1000.0, value))
    si = 10.0 ** (value / 10.0) / 1000.0 if enc.type is SensorType.WATTS else value
    raw = round(si / _unit(enc.scale, enc.precision))
    return max(-SENSOR_VALUE_LIMIT, min(SENSOR_VALUE_LIMIT, raw))


def decode_sensor(raw: int, sensor_type: int, scale: int, precision: int) -> float | None:
    """The catalogue value (dBm or degrees C) of a reading; None for an unusable type."""
    si = raw * _unit(scale, precision)
    if sensor_type == SensorType.CELSIUS or sensor_type == SensorType.DBM:
        return si
    if sensor_type == SensorType.WATTS:
        return 10.0 * math.log10(si * 1000.0) if si > 0 else DARK_DBM
    return None


def _unit(scale: int, precision: int) -> float:
    """Value of one unit of entPhySensorValue in SI units (W or degrees C)."""
    return 10.0 ** (3 * (scale - UNITS_SCALE) - precision)


def instance(column: Column, *index: int) -> Oid:
    """The OID of one instance of ``column``."""
    return column.oid + (index or (0,))


# --- BER encoding and one switch's served instances ------------------------------------

_TAG: Final = {Syntax.INTEGER: 0x02, Syntax.OCTETS: 0x04, Syntax.COUNTER32: 0x41,
               Syntax.COUNTER64: 0x46, Syntax.OID: 0x06}
END_OF_MIB_VIEW, NO_SUCH_OBJECT, NO_SUCH_INSTANCE = b"\x82\x00", b"\x80\x00", b"\x81\x00"
_TAG.update({Syntax.GAUGE32: 0x42, Syntax.TIMETICKS: 0x43})
_IF_COUNTERS: Final = (IF_OPER_STATUS, IF_IN_DISCARDS, IF_IN_ERRORS, IF_OUT_DISCARDS,
                       DOT3_FCS_ERRORS, IF_HC_IN_OCTETS, IF_HC_IN_UCAST, IF_HC_OUT_OCTETS,
                       IF_HC_OUT_UCAST)
_PFC_PAIRS: Final = ((PFC_REQUESTS, PRIO_REQUESTS), (PFC_INDICATIONS, PRIO_INDICATIONS))


def ber_tlv(tag: int, content: bytes) -> bytes:
    """One BER tag-length-value (definite length)."""
    n = len(content)
    if n < 0x80:
        return bytes((tag, n)) + content
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes((tag, 0x80 | len(size))) + size + content


@lru_cache(maxsize=1 << 16)
def ber_oid(oid: Oid) -> bytes:
    """BER encoding of an OBJECT IDENTIFIER (a tuple). Remembered: every switch of a
    fabric has the same instances, and a poller asks for the same columns each time."""
    out = bytearray()
    for s in (oid[0] * 40 + oid[1], *oid[2:]):
        chunk = [s & 0x7F]
        while s > 0x7F:
            s >>= 7
            chunk.append(0x80 | (s & 0x7F))
        out += bytes(reversed(chunk))
    return ber_tlv(0x06, bytes(out))


def ber_value(syntax: Syntax, value: int | bytes) -> bytes:
    """BER encoding of a value of ``syntax`` (Counter32/64 unsigned, INTEGER signed)."""
    if isinstance(value, bytes):
        return ber_tlv(_TAG[syntax], value)
    if syntax is Syntax.INTEGER:
        size = ((value if value >= 0 else ~value).bit_length() + 8) // 8
        return ber_tlv(0x02, value.to_bytes(size, "big", signed=True))
    return ber_tlv(_TAG[syntax], value.to_bytes((value.bit_length() + 8) // 8, "big"))


def ber_varbind(oid: Oid, encoded_value: bytes) -> bytes:
    """A VarBind: ``oid`` and an already encoded value (or exception)."""
    return ber_tlv(0x30, ber_oid(oid) + encoded_value)


@dataclass(frozen=True)
class Cell:
    """One served instance: a static value, or frame samples (summed if several)."""

    oid: Oid
    syntax: Syntax
    static: int | bytes | None = None
    samples: tuple[int, ...] = ()
    wrap32: bool = False  # served modulo 2**32 (a Counter32 of a 64-bit counter)
    sensor: SensorKind | None = None  # a gauge served as entPhySensorValue

    def value(self, ints: list[int], floats: list[float]) -> int | bytes:
        """The value, given the frame's raw samples as ints and as float64s."""
        if self.static is not None:
            return self.static
        if self.sensor is not None:
            return encode_sensor(self.sensor, floats[self.samples[0]])
        v = ints[self.samples[0]] if len(self.samples) == 1 else \
            sum(ints[i] for i in self.samples)
        return v & 0xFFFFFFFF if self.wrap32 else v


def _port_cells(ifx: int, ifname: str, sample: dict[tuple[int, str], int]) -> list[Cell]:
    """Every cell of port ``ifx``; ``sample`` maps (ifIndex, metric name) to a sample."""
    name = ifname.encode()
    cells = [Cell(instance(IF_INDEX, ifx), INT, ifx), Cell(instance(IF_DESCR, ifx), OCT, name),
             Cell(instance(IF_NAME, ifx), OCT, name)]
    for col in _IF_COUNTERS:
        i = sample.get((ifx, col.metric or ""))
        if i is not None:
            cells.append(Cell(instance(col, ifx), col.syntax, samples=(i,),
                              wrap32=col.syntax is Syntax.COUNTER32))
    for total, per_prio in _PFC_PAIRS:
        found = {p: sample.get((ifx, f"{total.metric}{{prio={p}}}")) for p in range(8)}
        prios = {p: i for p, i in found.items() if i is not None}
        cells += [Cell(instance(per_prio, ifx, p), C64, samples=(i,)) for p, i in prios.items()]
        if prios:
            cells.append(Cell(instance(total, ifx), C32, samples=tuple(prios.values()),
                              wrap32=True))
    for kind in SensorKind:
        i = sample.get((ifx, kind.metric))
        if i is not None:
            enc, at = SENSOR_ENCODING[kind], sensor_index(ifx, kind)
            cells += [Cell(instance(SENSOR_TYPE, at), INT, int(enc.type)),
                      Cell(instance(SENSOR_SCALE, at), INT, enc.scale),
                      Cell(instance(SENSOR_PRECISION, at), INT, enc.precision),
                      Cell(instance(SENSOR_VALUE, at), INT, samples=(i,), sensor=kind),
                      Cell(instance(SENSOR_STATUS, at), INT, SENSOR_OK)]
    return cells


class DeviceMib:
    """The instances one switch serves, in OID order, for one frame layout.

    ``sample`` maps (ifIndex, catalogue metric name) to the position of that sample in
    the device's frames; ``varbind`` encodes an instance with the frame of the moment.
    ``extra`` cells (e.g. an ENTITY-MIB tree) are served beside the port cells.
    """

    def __init__(self, device: str, ifnames: list[str],
                 sample: dict[tuple[int, str], int], extra: list[Cell] | None = None
                 ) -> None:
        cells = [Cell(instance(SYS_DESCR), OCT, b"fabricops simulated switch"),
                 Cell(instance(SYS_NAME), OCT, device.encode()),
                 Cell(instance(IF_NUMBER), INT, len(ifnames))]
        for p, ifname in enumerate(ifnames):
            cells += _port_cells(p + 1, ifname, sample)
        cells += extra or []
        cells.sort(key=lambda c: c.oid)
        self.device = device
        self.cells = cells
        self.oids = [c.oid for c in cells]
        self.position = {c.oid: i for i, c in enumerate(cells)}
        self._names = [ber_oid(c.oid) for c in cells]
        self._static = [None if c.static is None else
                        ber_tlv(0x30, n + ber_value(c.syntax, c.static))
                        for c, n in zip(cells, self._names, strict=True)]
        self._columns = {c.oid for c in COLUMNS}

    def __len__(self) -> int:
        return len(self.cells)

    def varbind(self, i: int, ints: list[int], floats: list[float]) -> bytes:
        """The encoded VarBind of instance ``i`` with the current values."""
        static = self._static[i]
        if static is not None:
            return static
        cell = self.cells[i]
        return ber_tlv(0x30, self._names[i] + ber_value(cell.syntax, cell.value(ints, floats)))

    def knows_object(self, oid: Oid) -> bool:
        """True if ``oid`` names an instance of a column (or scalar) of this MIB."""
        return any(oid[:n] in self._columns for n in range(8, len(oid)))
