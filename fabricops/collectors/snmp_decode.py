"""SNMP bytes and table rows to frames: pure functions, no transport.

``encode_getbulk`` and ``decode_response`` are the SNMPv2c messages the poller
sends and reads (BER, RFC 3416). The poller walks the columns of
:mod:`fabricops.core.snmp_mib` and hands the rows here as ``Tables``:
column OID -> {index suffix -> value}, values already plain ``int`` or ``bytes``.
Port names, speeds, which columns the device has and the type, scale and
precision of sensors change rarely; ``describe`` learns them from a full walk
(port ids by the rule of :mod:`fabricops.collectors.snmp_ports`) and later walks
ask only for ``DeviceDescription.columns_to_walk`` and the ``SCALARS``.
``decode_samples`` maps rows to catalogue metrics; entity ids are
``{device}:{port id}``. Counters come from the 64-bit HC columns where a port has
them, else from the 32-bit IF-MIB ones (``FALLBACK_COLUMNS``). A row the decoder
does not use (an index that is not a plain ifIndex, a priority outside 0..7, a
port not in the description, a 32-bit row where the HC one exists) is skipped and
counted in ``Samples.skipped`` by reason; it is no error. A row whose value its
metric cannot take (a counter past its 32 or 64 bits, a state outside its
enumeration, a sensor reading outside ``Metric.valid`` or that cannot be
converted) is counted as malformed, described in ``Samples.problem`` and skipped.
Counter continuity (wraps, resets, discontinuities) is
:mod:`fabricops.collectors.snmp_counters`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import numpy.typing as npt

from fabricops.collectors import snmp_entity, snmp_ports
from fabricops.collectors.snmp_counters import CounterTracker, CounterUpdate
from fabricops.collectors.snmp_pdu import (
    Response,
    Row,
    SnmpDecodeError,
    decode_oid,
    decode_response,
    encode_getbulk,
)
from fabricops.core import snmp_mib as mib
from fabricops.core.catalogue import CATALOGUE, PRIORITIES, MetricKind, ValueRange
from fabricops.core.frame import Frame, Source
from fabricops.core.snmp_mib import Column, Oid

Tables = Mapping[Oid, Mapping[Oid, int | bytes]]
U64 = npt.NDArray[np.uint64]

STATIC_COLUMNS: tuple[Column, ...] = (
    mib.IF_NAME, mib.IF_DESCR, *snmp_entity.DESCRIBE_COLUMNS, mib.IF_ALIAS, mib.IF_SPEED,
    mib.IF_HIGH_SPEED)
PORT_COLUMNS: tuple[Column, ...] = (
    mib.IF_OPER_STATUS, mib.IF_IN_DISCARDS, mib.IF_IN_ERRORS, mib.IF_OUT_DISCARDS,
    mib.DOT3_FCS_ERRORS, mib.IF_HC_IN_OCTETS, mib.IF_HC_IN_UCAST, mib.IF_HC_OUT_OCTETS,
    mib.IF_HC_OUT_UCAST)
PFC_COLUMNS: tuple[tuple[Column, Column], ...] = (
    (mib.PRIO_REQUESTS, mib.PFC_REQUESTS), (mib.PRIO_INDICATIONS, mib.PFC_INDICATIONS))
FALLBACK_COLUMNS: tuple[tuple[Column, Column], ...] = (  # HC column, its 32-bit stand-in
    (mib.IF_HC_IN_OCTETS, mib.IF_IN_OCTETS), (mib.IF_HC_IN_UCAST, mib.IF_IN_UCAST),
    (mib.IF_HC_OUT_OCTETS, mib.IF_OUT_OCTETS), (mib.IF_HC_OUT_UCAST, mib.IF_OUT_UCAST))
DYNAMIC_COLUMNS: tuple[Column, ...] = (
    *PORT_COLUMNS, *(c for pair in PFC_COLUMNS for c in pair), *snmp_entity.VALUE_COLUMNS,
    *(c32 for _, c32 in FALLBACK_COLUMNS), mib.IF_COUNTER_DISCONTINUITY)
SCALARS: tuple[Column, ...] = (mib.SYS_UPTIME, mib.IF_TABLE_LAST_CHANGE)  # every poll
DESCRIBE_SCALARS: tuple[Column, ...] = (*SCALARS, mib.SYS_OBJECT_ID)
_IF_INDEXED: tuple[Column, ...] = (
    *PORT_COLUMNS, *(c32 for _, c32 in FALLBACK_COLUMNS), *snmp_ports.NAME_SOURCES,
    mib.IF_SPEED, mib.IF_HIGH_SPEED, mib.PFC_REQUESTS, mib.PFC_INDICATIONS,
    mib.PRIO_REQUESTS, mib.PRIO_INDICATIONS)
_MAX_IF_SPEED = 0xFFFFFFFF  # ifSpeed saturates here; ifHighSpeed says more


@dataclass(frozen=True)
class DeviceDescription:
    """What rarely changes on a device: port ids, speeds, sensors, clocks.

    ``uptime_ticks`` and ``table_last_change`` are ``sysUpTime`` and
    ``ifTableLastChange`` when it was described (None: the agent has none).
    """

    names: dict[int, str] = field(default_factory=dict)  # ifIndex -> port id
    sensors: snmp_entity.SensorMap = field(default_factory=snmp_entity.SensorMap)
    speeds_bps: dict[int, int] = field(default_factory=dict)  # ifHighSpeed, else ifSpeed
    uptime_ticks: int | None = None
    table_last_change: int | None = None

    def columns_to_walk(self, tables: Tables) -> tuple[Column, ...]:
        """The dynamic columns worth walking on this device, given a full walk's rows.

        Columns without rows are skipped, the IEEE per-interface PFC totals when
        per-priority counters exist, and a 32-bit counter column when its HC column
        has a row for every port it lists.
        """
        have = {c for c in DYNAMIC_COLUMNS if tables.get(c.oid)
                and c not in snmp_entity.VALUE_COLUMNS} | set(self.sensors.columns)
        for per_prio, total in PFC_COLUMNS:
            if per_prio in have:
                have.discard(total)
        for hc, c32 in FALLBACK_COLUMNS:
            if c32 in have and set(tables[c32.oid]) <= set(tables.get(hc.oid, {})):
                have.discard(c32)
        return tuple(c for c in DYNAMIC_COLUMNS if c in have)


def describe(tables: Tables, template: str | None = None,
             vendor_templates: Mapping[str, str] | None = None) -> DeviceDescription:
    """The description of a device from a full walk (``STATIC_COLUMNS``, ``DYNAMIC_COLUMNS``
    and ``DESCRIBE_SCALARS``); ``template`` (else a matching one of ``vendor_templates``,
    keyed by dotted ``sysObjectID`` prefix) names the ports."""
    if template is None and vendor_templates:
        template = snmp_ports.vendor_template(_scalar_oid(tables, mib.SYS_OBJECT_ID),
                                              vendor_templates)
    if_indexes = {idx[0] for c in _IF_INDEXED for idx in tables.get(c.oid, {}) if idx}
    sources = {c.name: {idx[0]: v for idx, v in tables.get(c.oid, {}).items() if len(idx) == 1}
               for c in snmp_ports.NAME_SOURCES}
    names = snmp_ports.port_names(if_indexes, sources, template)
    return DeviceDescription(names, snmp_entity.learn_sensors(tables), _speeds(tables),
                             scalar(tables, mib.SYS_UPTIME),
                             scalar(tables, mib.IF_TABLE_LAST_CHANGE))


def scalar(tables: Tables, column: Column) -> int | None:
    """The integer value of scalar ``column`` (instance .0) in ``tables``, if any."""
    value = tables.get(column.oid, {}).get((0,))
    return value if isinstance(value, int) else None


def _scalar_oid(tables: Tables, column: Column) -> Oid | None:
    value = tables.get(column.oid, {}).get((0,))
    try:
        return decode_oid(value) if isinstance(value, bytes) and value else None
    except ValueError:
        return None


def _speeds(tables: Tables) -> dict[int, int]:
    """Port speeds in bits/s: ifHighSpeed (Mb/s) where non-zero, else ifSpeed."""
    speeds = {idx[0]: v for idx, v in tables.get(mib.IF_SPEED.oid, {}).items()
              if len(idx) == 1 and isinstance(v, int) and 0 <= v <= _MAX_IF_SPEED}
    for idx, v in tables.get(mib.IF_HIGH_SPEED.oid, {}).items():
        if len(idx) == 1 and isinstance(v, int) and 0 < v <= _MAX_IF_SPEED:
            speeds[idx[0]] = v * 1_000_000
    return speeds


@dataclass
class Samples:
    """One device's decoded samples, column by column (``width`` 32/64 for counters)."""

    entities: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    values: list[int | float] = field(default_factory=list)
    widths: list[int] = field(default_factory=list)
    unknown_ports: int = 0  # rows of an ifIndex without a known name
    malformed: int = 0  # rows of the wrong type or index shape, or out of their metric's range
    problem: str | None = None  # the first malformed row, described
    skipped: dict[str, int] = field(default_factory=dict)  # port rows not used, by reason

    def skip(self, reason: str, rows: int = 1) -> None:
        """Count ``rows`` port rows set aside for ``reason`` (no error)."""
        self.skipped[reason] = self.skipped.get(reason, 0) + rows

    def skip_reasons(self) -> list[tuple[str, int]]:
        """Every row set aside, by reason (sensor rows' reasons prefixed ``sensor_``)."""
        return [*self.skipped.items(),
                *((f"sensor_{why}", n) for why, n in self.sensor_skipped.items())]
    sensor_skipped: dict[str, int] = field(default_factory=dict)  # reason -> sensor rows


def decode_samples(device: str, tables: Tables, desc: DeviceDescription,
                   pfc_fallback_priority: int | None = 3) -> Samples:
    """Rows to catalogue samples, ports in ifIndex order.

    IEEE8021-PFC-MIB totals count as priority ``pfc_fallback_priority`` on ports that
    have no per-priority counter in that direction (ignored if it is None).
    """
    rows: dict[int, list[tuple[str, int | float, int]]] = {}
    out = Samples()
    for col in PORT_COLUMNS:
        for idx, v in tables.get(col.oid, {}).items():
            _add(rows, out, idx, col.metric or "", v, col.width_bits)
    for hc, c32 in FALLBACK_COLUMNS:
        has_hc = tables.get(hc.oid, {})
        for idx, v in tables.get(c32.oid, {}).items():
            if idx in has_hc:
                out.skip("superseded_by_hc_counter")
            else:
                _add(rows, out, idx, c32.metric or "", v, 32)
    for per_prio, total in PFC_COLUMNS:
        seen = set()
        for idx, v in tables.get(per_prio.oid, {}).items():
            if len(idx) == 2 and idx[1] in PRIORITIES:
                seen.add(idx[0])
                _add(rows, out, idx[:1], f"{per_prio.metric}{{prio={idx[1]}}}", v, 64)
            else:
                out.skip("index_not_ifindex_priority")
        if pfc_fallback_priority is not None:
            metric = f"{total.metric}{{prio={pfc_fallback_priority}}}"
            for idx, v in tables.get(total.oid, {}).items():
                if idx[:1] and idx[0] not in seen:
                    _add(rows, out, idx, metric, v, 32)
    chassis = _add_sensors(rows, out, tables, desc)
    for ifx in sorted(rows):
        ifname = desc.names.get(ifx)
        if ifname is None:
            out.unknown_ports += len(rows[ifx])
            out.skip("port_not_described", len(rows[ifx]))
            continue
        for name, value, width in rows[ifx]:
            out.entities.append(f"{device}:{ifname}")
            out.metrics.append(name)
            out.values.append(value)
            out.widths.append(width)
    for name, value in chassis:
        out.entities.append(device)
        out.metrics.append(name)
        out.values.append(value)
        out.widths.append(0)
    return out


def _add(rows: dict[int, list[tuple[str, int | float, int]]], out: Samples, idx: Oid,
         metric: str, value: int | bytes, width: int) -> None:
    if len(idx) != 1:
        out.skip("index_not_ifindex")
        return
    if not isinstance(value, int):
        _malformed(out, f"{metric} row {idx}: {value!r:.40} is not a number")
        return
    valid = _valid(metric, width)
    if value not in valid:
        _malformed(out, f"{metric} of ifIndex {idx[0]}: value {value} is outside {valid}")
        return
    rows.setdefault(idx[0], []).append((metric, value, width))


def _malformed(out: Samples, problem: str) -> None:
    out.malformed += 1
    out.problem = out.problem or problem


@cache
def _valid(metric: str, width: int) -> ValueRange:
    """The values a row of ``metric`` may take; a counter's are its ``width`` bits."""
    found = CATALOGUE.by_name(metric)
    if found.kind is MetricKind.COUNTER and width:
        return ValueRange(0, (1 << width) - 1)
    return found.valid


def _add_sensors(rows: dict[int, list[tuple[str, int | float, int]]], out: Samples,
                 tables: Tables, desc: DeviceDescription) -> list[tuple[str, float]]:
    """Port optics into ``rows``; the chassis sensors of the switch are returned."""
    readings = snmp_entity.read_sensors(tables, desc.sensors)
    if readings.malformed:
        out.malformed += readings.malformed
        out.problem = out.problem or readings.problem
    out.sensor_skipped = readings.skipped
    chassis = []
    for (port, metric), value in sorted(readings.values.items()):
        if port == snmp_entity.SWITCH:
            chassis.append((metric, value))
        else:
            rows.setdefault(port, []).append((metric, value, 0))
    return chassis


def build_frame(device: str, ts_ns: int, seq: int, samples: Samples,
                values: Sequence[int | float]) -> Frame:
    """The SNMP frame of one poll."""
    return Frame.build(device, ts_ns, Source.SNMP, seq, samples.entities, samples.metrics,
                       values)


__all__ = [
    "DESCRIBE_SCALARS", "DYNAMIC_COLUMNS", "FALLBACK_COLUMNS", "SCALARS", "STATIC_COLUMNS",
    "CounterTracker", "CounterUpdate",
    "DeviceDescription", "Response", "Row", "Samples", "SnmpDecodeError", "Tables",
    "build_frame", "decode_oid", "decode_response", "decode_samples", "describe",
    "encode_getbulk",
]
