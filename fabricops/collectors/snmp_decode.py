"""SNMP bytes and table rows to frames: pure functions, no transport.

``encode_getbulk`` and ``decode_response`` are the SNMPv2c messages the poller
sends and reads (BER, RFC 3416). The poller walks the columns of
:mod:`fabricops.core.snmp_mib` and hands the rows here as ``Tables``:
column OID -> {index suffix -> value}, values already plain ``int`` or ``bytes``.
Port names (ifName) and the type, scale and precision of sensors change rarely;
``describe`` learns them from a full walk and later walks can skip those columns.
``decode_samples`` maps rows to catalogue metrics; entity ids are
``{device}:{ifName}``. A row whose value its metric cannot take (a counter past
its 32 or 64 bits, a state outside its enumeration, a sensor reading outside
``Metric.valid`` or that cannot be converted) is counted as malformed, described
in ``Samples.problem`` and skipped. ``CounterTracker`` turns each counter into
one 64-bit series: a Counter32 that wraps is carried past 2**32, and a counter
that goes back further than a wrap explains (or any Counter64 that goes back) is
a reset, after which the series restarts from the device's value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import numpy.typing as npt

from fabricops.core import snmp_mib as mib
from fabricops.core.catalogue import CATALOGUE, PRIORITIES, MetricKind, ValueRange
from fabricops.core.frame import Frame, Source
from fabricops.core.snmp_mib import Column, Oid

Tables = Mapping[Oid, Mapping[Oid, int | bytes]]
U64 = npt.NDArray[np.uint64]

STATIC_COLUMNS: tuple[Column, ...] = (
    mib.IF_NAME, mib.SENSOR_TYPE, mib.SENSOR_SCALE, mib.SENSOR_PRECISION)
PORT_COLUMNS: tuple[Column, ...] = (
    mib.IF_OPER_STATUS, mib.IF_IN_DISCARDS, mib.IF_IN_ERRORS, mib.IF_OUT_DISCARDS,
    mib.DOT3_FCS_ERRORS, mib.IF_HC_IN_OCTETS, mib.IF_HC_IN_UCAST, mib.IF_HC_OUT_OCTETS,
    mib.IF_HC_OUT_UCAST)
PFC_COLUMNS: tuple[tuple[Column, Column], ...] = (
    (mib.PRIO_REQUESTS, mib.PFC_REQUESTS), (mib.PRIO_INDICATIONS, mib.PFC_INDICATIONS))
DYNAMIC_COLUMNS: tuple[Column, ...] = (
    *PORT_COLUMNS, *(c for pair in PFC_COLUMNS for c in pair), mib.SENSOR_VALUE)
_HALF_32 = 1 << 31


@dataclass(frozen=True)
class DeviceDescription:
    """What rarely changes on a device: port names and sensor encodings."""

    names: dict[int, str] = field(default_factory=dict)  # ifIndex -> ifName
    sensors: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # type, scale, prec

    def columns_to_walk(self, tables: Tables) -> tuple[Column, ...]:
        """The dynamic columns worth walking on this device, given a full walk's rows.

        Columns without rows are skipped, and the IEEE per-interface PFC totals too
        when per-priority counters exist.
        """
        have = {c for c in DYNAMIC_COLUMNS if tables.get(c.oid)}
        for per_prio, total in PFC_COLUMNS:
            if per_prio in have:
                have.discard(total)
        return tuple(c for c in DYNAMIC_COLUMNS if c in have)


def describe(tables: Tables) -> DeviceDescription:
    """Port names and sensor encodings from a walk of ``STATIC_COLUMNS``."""
    names = {idx[0]: _text(v) or f"ifindex{idx[0]}"
             for idx, v in tables.get(mib.IF_NAME.oid, {}).items() if len(idx) == 1}
    meta = [tables.get(c.oid, {}) for c in STATIC_COLUMNS[1:]]
    sensors = {}
    for idx, kind in meta[0].items():
        scale, precision = meta[1].get(idx), meta[2].get(idx)
        if len(idx) == 1 and all(isinstance(v, int) for v in (kind, scale, precision)):
            sensors[idx[0]] = (int(kind), int(scale), int(precision))  # type: ignore[arg-type]
    return DeviceDescription(names, sensors)


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
    for per_prio, total in PFC_COLUMNS:
        seen = set()
        for idx, v in tables.get(per_prio.oid, {}).items():
            if len(idx) == 2 and idx[1] in PRIORITIES:
                seen.add(idx[0])
                _add(rows, out, idx[:1], f"{per_prio.metric}{{prio={idx[1]}}}", v, 64)
            else:
                out.malformed += 1
        if pfc_fallback_priority is not None:
            metric = f"{total.metric}{{prio={pfc_fallback_priority}}}"
            for idx, v in tables.get(total.oid, {}).items():
                if idx[:1] and idx[0] not in seen:
                    _add(rows, out, idx, metric, v, 32)
    _add_sensors(rows, out, tables.get(mib.SENSOR_VALUE.oid, {}), desc)
    for ifx in sorted(rows):
        ifname = desc.names.get(ifx)
        if ifname is None:
            out.unknown_ports += len(rows[ifx])
            continue
        for name, value, width in rows[ifx]:
            out.entities.append(f"{device}:{ifname}")
            out.metrics.append(name)
            out.values.append(value)
            out.widths.append(width)
    return out


def _add(rows: dict[int, list[tuple[str, int | float, int]]], out: Samples, idx: Oid,
         metric: str, value: int | bytes, width: int) -> None:
    if len(idx) != 1 or not isinstance(value, int):
        what = "index is not one ifIndex" if len(idx) != 1 else f"{value!r:.40} is not a number"
        _malformed(out, f"{metric} row {idx}: {what}")
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
                 values: Mapping[Oid, int | bytes], desc: DeviceDescription) -> None:
    for idx, raw in values.items():
        port = mib.sensor_port(idx[0]) if len(idx) == 1 else None
        meta = desc.sensors.get(idx[0]) if port else None
        if port is None or meta is None:
            continue  # not a port optics sensor, or one not described yet
        reading = _sensor_reading(raw, meta)
        valid = CATALOGUE.by_name(port[1].metric).valid
        if reading is None or reading not in valid:
            got = "no value" if reading is None else f"{reading:g}, outside {valid}"
            _malformed(out, f"{port[1].metric} of sensor {idx[0]}: reading {raw!r:.40} with "
                       f"(type, scale, precision) {meta} gives {got}")
            continue
        rows.setdefault(port[0], []).append((port[1].metric, reading, 0))


def _sensor_reading(raw: int | bytes, meta: tuple[int, int, int]) -> float | None:
    """The catalogue value of a sensor row, or None if it has none (bad type or scale)."""
    if not isinstance(raw, int):
        return None
    try:
        return mib.decode_sensor(raw, *meta)
    except (OverflowError, ValueError):  # a scale or precision no sensor has
        return None


def _text(value: int | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class CounterUpdate:
    """Counters carried to 64 bits, and how many wrapped or reset since the last poll."""

    values: list[int | float]
    wraps: int
    resets: int


class CounterTracker:
    """Keeps one device's counters continuous across polls (see the module docstring)."""

    def __init__(self) -> None:
        self._keys: list[tuple[str, str]] = []
        self._last = np.zeros(0, np.uint64)
        self._total = np.zeros(0, np.uint64)

    def update(self, samples: Samples) -> CounterUpdate:
        """Carry ``samples``' counters on from the previous poll; other values pass."""
        width = np.array(samples.widths, np.uint8)
        counter = np.flatnonzero(width > 0)
        keys = [(samples.entities[i], samples.metrics[i]) for i in counter.tolist()]
        raw = np.array([samples.values[i] for i in counter.tolist()], np.uint64)
        last, total, known = self._previous(keys)
        back = known & (raw < last)
        wrap = back & (width[counter] == 32) & (last - raw >= _HALF_32)
        reset = back & ~wrap
        step = np.where(wrap, raw + np.uint64(1 << 32) - last, raw - last)
        total = np.where(known & ~reset, total + step, raw)
        self._keys, self._last, self._total = keys, raw, total
        values = list(samples.values)
        for i, v in zip(counter.tolist(), total.tolist(), strict=True):
            values[i] = v
        return CounterUpdate(values, int(wrap.sum()), int(reset.sum()))

    def _previous(self, keys: list[tuple[str, str]]) -> tuple[U64, U64, npt.NDArray[np.bool_]]:
        """Last raw value and 64-bit total per key, and which keys were seen before."""
        if keys == self._keys:
            return self._last, self._total, np.ones(len(keys), bool)
        where = {k: i for i, k in enumerate(self._keys)}
        pos = np.array([where.get(k, -1) for k in keys], np.int64)
        known = pos >= 0
        take = np.where(known, pos, 0)
        empty = np.zeros(len(keys), np.uint64)
        if not len(self._keys):
            return empty, empty, known
        return (np.where(known, self._last[take], 0).astype(np.uint64),
                np.where(known, self._total[take], 0).astype(np.uint64), known)


# --- SNMPv2c messages -----------------------------------------------------------------

Row = tuple[Oid, int | bytes | None]  # None: noSuchObject, noSuchInstance, endOfMibView, NULL
_GETBULK, _RESPONSE = 0xA5, 0xA2
_UNSIGNED = frozenset((0x41, 0x42, 0x43, 0x46))  # Counter32, Gauge32, TimeTicks, Counter64
_NO_VALUE = frozenset((0x05, 0x80, 0x81, 0x82))


class SnmpDecodeError(ValueError):
    """A datagram that is not a well-formed SNMPv2c response; the message says why."""


@dataclass(frozen=True)
class Response:
    """A decoded SNMPv2c Response-PDU."""

    request_id: int
    error_status: int
    error_index: int
    rows: list[Row]


def encode_getbulk(community: bytes, request_id: int, oids: Sequence[Oid],
                   non_repeaters: int, max_repetitions: int) -> bytes:
    """An SNMPv2c GetBulkRequest for ``oids`` (values NULL)."""
    varbinds = b"".join(mib.ber_tlv(0x30, mib.ber_oid(o) + b"\x05\x00") for o in oids)
    pdu = b"".join(mib.ber_value(mib.Syntax.INTEGER, v)
                   for v in (request_id, non_repeaters, max_repetitions))
    body = mib.ber_value(mib.Syntax.INTEGER, 1) + mib.ber_tlv(0x04, community) + \
        mib.ber_tlv(_GETBULK, pdu + mib.ber_tlv(0x30, varbinds))
    return mib.ber_tlv(0x30, body)


def decode_response(data: bytes) -> Response:
    """Parse an SNMPv2c Response-PDU; SnmpDecodeError names the defect."""
    try:
        return _decode_response(data)
    except (IndexError, ValueError) as exc:
        raise SnmpDecodeError(f"malformed SNMPv2c response ({len(data)} bytes): {exc}"
                              ) from None


def _decode_response(data: bytes) -> Response:
    i, end = _enter(data, 0, 0x30, len(data))
    version, i = _integer(data, i, end)
    i = _skip(data, i, end, 0x04)
    i, end = _enter(data, i, _RESPONSE, end)
    if version != 1:
        raise ValueError(f"version {version} is not SNMPv2c")
    request_id, i = _integer(data, i, end)
    status, i = _integer(data, i, end)
    index, i = _integer(data, i, end)
    i, end = _enter(data, i, 0x30, end)
    rows: list[Row] = []
    while i < end:
        j, i = _enter(data, i, 0x30, end)
        k, j = _enter(data, j, 0x06, i)
        oid = decode_oid(data[k:j])
        tag = data[j]
        k, j = _enter(data, j, tag, i)
        rows.append((oid, _value(tag, data[k:j])))
    return Response(request_id, status, index, rows)


def _enter(data: bytes, i: int, tag: int, limit: int) -> tuple[int, int]:
    """(start, end) of the contents of the TLV at ``i``, which must have ``tag``."""
    if data[i] != tag:
        raise ValueError(f"tag 0x{data[i]:02x} at offset {i}, expected 0x{tag:02x}")
    n, i = data[i + 1], i + 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4:
            raise ValueError(f"unsupported length form at offset {i - 1}")
        n, i = int.from_bytes(data[i:i + k], "big"), i + k
    if i + n > limit:
        raise ValueError(f"length {n} at offset {i} runs past its container")
    return i, i + n


def _skip(data: bytes, i: int, limit: int, tag: int) -> int:
    return _enter(data, i, tag, limit)[1]


def _integer(data: bytes, i: int, limit: int) -> tuple[int, int]:
    start, end = _enter(data, i, 0x02, limit)
    return int.from_bytes(data[start:end], "big", signed=True), end


def _value(tag: int, content: bytes) -> int | bytes | None:
    if tag == 0x02:
        return int.from_bytes(content, "big", signed=True)
    if tag in _UNSIGNED:
        return int.from_bytes(content, "big")
    return None if tag in _NO_VALUE else bytes(content)


_oid_cache: dict[bytes, Oid] = {}
_OID_CACHE_MAX = 1 << 18


def decode_oid(content: bytes) -> Oid:
    """An OID from the contents octets of its BER encoding (recent ones are cached)."""
    oid = _oid_cache.get(content)
    if oid is None:
        if len(_oid_cache) >= _OID_CACHE_MAX:
            _oid_cache.clear()
        oid = _oid_cache[content] = _parse_oid(content)
    return oid


def _parse_oid(content: bytes) -> Oid:
    subids, acc = [], 0
    for b in content:
        acc = (acc << 7) | (b & 0x7F)
        if not b & 0x80:
            subids.append(acc)
            acc = 0
    if not subids or content[-1] & 0x80:
        raise ValueError("truncated OBJECT IDENTIFIER")
    first = subids[0]
    head = (first // 40, first % 40) if first < 80 else (2, first - 80)
    return (*head, *subids[1:])


def build_frame(device: str, ts_ns: int, seq: int, samples: Samples,
                values: Sequence[int | float]) -> Frame:
    """The SNMP frame of one poll."""
    return Frame.build(device, ts_ns, Source.SNMP, seq, samples.entities, samples.metrics,
                       values)


__all__ = [
    "DYNAMIC_COLUMNS", "STATIC_COLUMNS", "CounterTracker", "CounterUpdate",
    "DeviceDescription", "Response", "Row", "Samples", "SnmpDecodeError", "Tables",
    "build_frame", "decode_oid", "decode_response", "decode_samples", "describe",
    "encode_getbulk",
]
