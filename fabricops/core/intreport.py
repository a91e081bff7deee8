"""IntReport: the path of one INT packet, columnar for batches (``IntBatch``).

A batch holds ``n_reports`` reports and ``n_hops`` hop records. Report ``i`` owns
hops ``hop_start[i] .. hop_start[i] + hop_count[i] - 1``, in path order: the
first INT hop (the source switch) first, the sink last. Hops are stored in
report order, so ``hop_start`` is always the running sum of ``hop_count``.

Hop fields follow the INT v2.1 per-hop metadata, one column per field, each
in its wire width. A field a hop did not report (its instruction bit was not
set, or the node wrote the all-ones "invalid" value) holds ``INVALID[name]``:
all ones in the field's wire width. Units: ``hop_latency_ns`` and timestamps
in ns (timestamps since the Unix epoch), ``queue_occupancy`` and
``buffer_occupancy`` in 80-byte cells, ``egress_tx_util`` in parts per million
of the port's line rate (``TX_UTIL_SCALE``).

Every value fits what reads it: timestamps are below 2**63 ns (the store's
signed 64-bit columns) and the occupancies fit their 24 wire bits. A batch
that breaks this cannot be built; ``range_codes`` finds the reports that would
(``RANGE_REASONS``), so a parser can set them aside and count them.

On the bus a batch is the Protocol Buffers record ``fabricops.intreport.v2.IntBatch``
(:mod:`fabricops.core.wire_int`, codec version 2; version 1 was a private binary codec).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import IntFlag
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from fabricops.core.bus import Topic

CODEC_VERSION: Final = 2
"""What ``IntBatch.encode`` writes: 2 is the record ``SCHEMA``."""
SCHEMA: Final = Topic.INT.schema
TX_UTIL_SCALE: Final = 1_000_000
CELL_BYTES: Final = 80
ROCEV2_UDP_PORT: Final = 4791
DEFAULT_INT_UDP_PORT: Final = 5000
"""UDP destination port that marks INT after a UDP header (INT_TBD: no IANA value yet)."""


class Instruction(IntFlag):
    """INT-MD instruction bitmap bits (bit 0 is the MSB of the 16-bit field)."""

    NODE_ID = 0x8000
    L1_PORTS = 0x4000
    HOP_LATENCY = 0x2000
    QUEUE = 0x1000
    INGRESS_TS = 0x0800
    EGRESS_TS = 0x0400
    L2_PORTS = 0x0200
    TX_UTIL = 0x0100
    BUFFER = 0x0080
    CHECKSUM_COMPLEMENT = 0x0001


RESERVED_INSTRUCTIONS: Final = 0x007E
"""Bits 9-14: reserved, 4 bytes of metadata each when set."""
EIGHT_BYTE_INSTRUCTIONS: Final = Instruction.INGRESS_TS | Instruction.EGRESS_TS | \
    Instruction.L2_PORTS


class ReportFlag(IntFlag):
    """Per-report flags: the report header's D/Q/F/I bits and the INT-MD header's D/E/M."""

    INTERMEDIATE = 0x01
    TRACKED_FLOW = 0x02
    CONGESTED_QUEUE = 0x04
    DROPPED = 0x08
    MTU_EXCEEDED = 0x10
    HOP_LIMIT_EXCEEDED = 0x20
    DISCARD = 0x40


REPORT_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("ts_ns", "u8"), ("sink", "u4"), ("seq", "u4"), ("src_ip", "u4"), ("dst_ip", "u4"),
    ("sport", "u2"), ("dport", "u2"), ("proto", "u1"), ("flags", "u1"),
    ("instructions", "u2"), ("drop_reason", "u1"), ("hop_start", "u4"), ("hop_count", "u2"),
)
HOP_COLUMNS: Final[tuple[tuple[str, str, int], ...]] = (
    ("node_id", "u4", Instruction.NODE_ID),
    ("ingress_port", "u2", Instruction.L1_PORTS),
    ("egress_port", "u2", Instruction.L1_PORTS),
    ("hop_latency_ns", "u4", Instruction.HOP_LATENCY),
    ("queue_id", "u1", Instruction.QUEUE),
    ("queue_occupancy", "u4", Instruction.QUEUE),
    ("ingress_ts_ns", "u8", Instruction.INGRESS_TS),
    ("egress_ts_ns", "u8", Instruction.EGRESS_TS),
    ("l2_ingress_port", "u4", Instruction.L2_PORTS),
    ("l2_egress_port", "u4", Instruction.L2_PORTS),
    ("egress_tx_util", "u4", Instruction.TX_UTIL),
    ("buffer_id", "u1", Instruction.BUFFER),
    ("buffer_occupancy", "u4", Instruction.BUFFER),
    ("checksum_complement", "u4", Instruction.CHECKSUM_COMPLEMENT),
)
_WIRE_BITS: Final = {"queue_occupancy": 24, "buffer_occupancy": 24}
INVALID: Final[dict[str, int]] = {
    name: (1 << _WIRE_BITS.get(name, 8 * np.dtype(dt).itemsize)) - 1
    for name, dt, _ in HOP_COLUMNS
} | {"drop_reason": 0xFF}
"""The all-ones value of each hop field (and ``drop_reason``): not reported."""

MAX_TS_NS: Final = 2**63 - 1
"""The latest timestamp a batch holds: the store keeps times as signed 64-bit."""
RANGE_REASONS: Final = ("timestamp_out_of_range", "occupancy_out_of_range")
"""Why a report's values do not fit (``range_codes``)."""

_DTYPES: Final = {name: np.dtype(dt) for name, dt in REPORT_COLUMNS} | {
    name: np.dtype(dt) for name, dt, _ in HOP_COLUMNS}


class IntBatchError(ValueError):
    """Columns that do not form a valid batch; the message names the column and cause."""


class IntDecodeError(IntBatchError):
    """Bytes that are not a valid encoded batch; the message names the cause."""


@dataclass(frozen=True, eq=False)
class IntBatch:
    """Many INT reports as columns (see the module docstring for layout and units).

    The arrays are not copied: they must not be modified once the batch is built.
    """

    ts_ns: NDArray[np.uint64]
    sink: NDArray[np.uint32]
    seq: NDArray[np.uint32]
    src_ip: NDArray[np.uint32]
    dst_ip: NDArray[np.uint32]
    sport: NDArray[np.uint16]
    dport: NDArray[np.uint16]
    proto: NDArray[np.uint8]
    flags: NDArray[np.uint8]
    instructions: NDArray[np.uint16]
    drop_reason: NDArray[np.uint8]
    hop_start: NDArray[np.uint32]
    hop_count: NDArray[np.uint16]
    node_id: NDArray[np.uint32]
    ingress_port: NDArray[np.uint16]
    egress_port: NDArray[np.uint16]
    hop_latency_ns: NDArray[np.uint32]
    queue_id: NDArray[np.uint8]
    queue_occupancy: NDArray[np.uint32]
    ingress_ts_ns: NDArray[np.uint64]
    egress_ts_ns: NDArray[np.uint64]
    l2_ingress_port: NDArray[np.uint32]
    l2_egress_port: NDArray[np.uint32]
    egress_tx_util: NDArray[np.uint32]
    buffer_id: NDArray[np.uint8]
    buffer_occupancy: NDArray[np.uint32]
    checksum_complement: NDArray[np.uint32]

    def __post_init__(self) -> None:
        problem = _columns_problem(self)
        if problem:
            raise IntBatchError(f"INT batch: {problem}")

    @property
    def n_reports(self) -> int:
        return len(self.ts_ns)

    @property
    def n_hops(self) -> int:
        return len(self.node_id)

    def __len__(self) -> int:
        return self.n_reports

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IntBatch):
            return NotImplemented
        return all(np.array_equal(getattr(self, n), getattr(other, n)) for n in _DTYPES)

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_columns(cls, columns: Mapping[str, Any]) -> IntBatch:
        """Build from per-report and per-hop columns, cast to their dtypes.

        ``ts_ns`` and ``hop_count`` are required; ``hop_start`` is derived from
        ``hop_count``; other missing columns hold ``INVALID`` (hop fields and
        ``drop_reason``) or zero. IntBatchError names a bad column.
        """
        unknown = sorted(set(columns) - set(_DTYPES))
        missing = sorted({"ts_ns", "hop_count"} - set(columns))
        if unknown or missing:
            raise IntBatchError(f"INT batch: unknown columns {unknown}, missing {missing}")
        n_rep = len(columns["ts_ns"])
        n_hops = int(np.sum(columns["hop_count"], dtype=np.int64))
        out: dict[str, NDArray[Any]] = {}
        for name, dtype in _DTYPES.items():
            if name in columns:
                out[name] = np.asarray(columns[name]).astype(dtype, copy=False)
            else:
                size = n_hops if _is_hop_column(name) else n_rep
                out[name] = np.full(size, INVALID.get(name, 0), dtype)
        out["hop_start"] = _starts(out["hop_count"])
        return cls(**out)

    @classmethod
    def empty(cls) -> IntBatch:
        return cls(**{n: np.zeros(0, dt) for n, dt in _DTYPES.items()})

    def valid(self, column: str) -> NDArray[np.bool_]:
        """Per hop: True where ``column`` holds a reported value (not ``INVALID``)."""
        return np.asarray(getattr(self, column) != INVALID[column])

    def report_of_hop(self) -> NDArray[np.intp]:
        """Per hop: the index of the report it belongs to."""
        return np.repeat(np.arange(self.n_reports), self.hop_count)

    def take(self, reports: Sequence[int] | NDArray[np.integer[Any]]) -> IntBatch:
        """A batch of the given reports (by index, in the given order) and their hops."""
        idx = np.asarray(reports, dtype=np.intp)
        counts = self.hop_count[idx]
        hops = np.repeat(self.hop_start[idx].astype(np.intp) - _starts(counts), counts) + \
            np.arange(int(counts.sum()))
        cols = {n: getattr(self, n)[idx] for n, _ in REPORT_COLUMNS if n != "hop_start"}
        cols |= {n: getattr(self, n)[hops] for n, _, _ in HOP_COLUMNS}
        return IntBatch.from_columns(cols)

    def reports(self, node_names: Mapping[int, str] | None = None) -> Iterator[dict[str, Any]]:
        """Readable per-report dicts (for ``fabricops tail`` and debugging).

        Hops list only the fields they reported; ``node_names`` translates node ids.
        """
        names = node_names or {}
        rep = {n: getattr(self, n).tolist() for n, _ in REPORT_COLUMNS}
        hop = {n: getattr(self, n).tolist() for n, _, _ in HOP_COLUMNS}
        for i in range(self.n_reports):
            start, count = rep["hop_start"][i], rep["hop_count"][i]
            hops = [_hop_dict(hop, h, names) for h in range(start, start + count)]
            yield _report_dict(rep, i, names, hops)

    def encode(self) -> bytes:
        """The ``SCHEMA`` record of this batch (see :mod:`fabricops.core.wire_int`)."""
        return wire_int.encode(self)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> IntBatch:
        """Inverse of ``encode``; any defect raises IntDecodeError naming the cause."""
        return wire_int.decode(data)


def concat(batches: Sequence[IntBatch]) -> IntBatch:
    """One batch holding every report of ``batches``, in order."""
    if not batches:
        return IntBatch.empty()
    if len(batches) == 1:
        return batches[0]
    cols = {n: np.concatenate([getattr(b, n) for b in batches]) for n in _DTYPES
            if n != "hop_start"}
    return IntBatch.from_columns(cols)


def _is_hop_column(name: str) -> bool:
    return name in INVALID and name != "drop_reason"


def _starts(counts: NDArray[Any]) -> NDArray[np.uint32]:
    out = np.zeros(len(counts), np.uint32)
    if len(counts) > 1:
        np.cumsum(counts[:-1], out=out[1:], dtype=np.uint32)
    return out


def _columns_problem(batch: IntBatch) -> str | None:
    sizes = {"report": len(batch.ts_ns), "hop": len(batch.node_id)}
    for name, want, kind in _CHECKS:
        arr = getattr(batch, name)
        if type(arr) is not np.ndarray or arr.dtype != want or arr.ndim != 1:
            got = f"{arr.dtype}[{arr.ndim}d]" if isinstance(arr, np.ndarray) else type(arr)
            return f"column {name} must be a 1-d {want} array, got {got}"
        if len(arr) != sizes[kind]:
            return f"column {name} has {len(arr)} rows, expected one per {kind}"
    total = int(batch.hop_count.sum(dtype=np.int64))
    if total != batch.n_hops:
        return f"hop counts sum to {total}, but there are {batch.n_hops} hops"
    if not np.array_equal(batch.hop_start, _starts(batch.hop_count)):
        return "hop_start is not the running sum of hop_count"
    return _range_problem(batch)


_CHECKS: Final = tuple((name, dtype, "hop" if _is_hop_column(name) else "report")
                       for name, dtype in _DTYPES.items())

# (column, largest value that fits, reason); a hop column's defect is its report's.
_RANGE_CHECKS: Final = (
    ("ts_ns", MAX_TS_NS, "timestamp_out_of_range"),
    ("ingress_ts_ns", MAX_TS_NS, "timestamp_out_of_range"),
    ("egress_ts_ns", MAX_TS_NS, "timestamp_out_of_range"),
    ("queue_occupancy", 0xFFFFFF, "occupancy_out_of_range"),
    ("buffer_occupancy", 0xFFFFFF, "occupancy_out_of_range"),
)


def _too_big(values: NDArray[Any], name: str, limit: int) -> NDArray[np.bool_]:
    """Values past ``limit`` that are not the field's INVALID (not reported) value."""
    return np.asarray((values > limit) & (values != INVALID.get(name, -1)))


def range_codes(columns: Mapping[str, NDArray[Any]]) -> NDArray[np.uint8]:
    """Per report of batch columns (cast to their dtypes; absent ones are not checked):
    0 if every value fits, else 1 + the ``RANGE_REASONS`` index of its first defect."""
    counts = np.asarray(columns["hop_count"])
    codes = np.zeros(len(counts), np.uint8)
    for name, limit, reason in _RANGE_CHECKS:
        if name not in columns:
            continue
        bad = _too_big(columns[name], name, limit)
        if bad.any():
            if _is_hop_column(name):
                bad = np.isin(np.arange(len(counts)),
                              np.repeat(np.arange(len(counts)), counts)[bad])
            codes[bad & (codes == 0)] = RANGE_REASONS.index(reason) + 1
    return codes


def _range_problem(batch: IntBatch) -> str | None:
    for name, limit, reason in _RANGE_CHECKS:
        bad = np.flatnonzero(_too_big(getattr(batch, name), name, limit))
        if len(bad):
            row = "hop" if _is_hop_column(name) else "report"
            return (f"{reason}: column {name} holds {int(getattr(batch, name)[bad[0]])} "
                    f"at {row} #{int(bad[0])} (at most {limit})")
    return None


def _ip(value: int) -> str:
    return str(ipaddress.IPv4Address(value))


def _report_dict(rep: dict[str, list[Any]], i: int, names: Mapping[int, str],
                 hops: list[dict[str, Any]]) -> dict[str, Any]:
    flags = [f.name.lower() for f in ReportFlag if rep["flags"][i] & f and f.name]
    doc: dict[str, Any] = {
        "ts_ns": rep["ts_ns"][i], "sink": names.get(rep["sink"][i], rep["sink"][i]),
        "seq": rep["seq"][i],
        "flow": {"src_ip": _ip(rep["src_ip"][i]), "dst_ip": _ip(rep["dst_ip"][i]),
                 "sport": rep["sport"][i], "dport": rep["dport"][i], "proto": rep["proto"][i]},
        "flags": flags, "instructions": f"0x{rep['instructions'][i]:04x}", "hops": hops,
    }
    if rep["drop_reason"][i] != INVALID["drop_reason"]:
        doc["drop_reason"] = rep["drop_reason"][i]
    return doc


def _hop_dict(hop: dict[str, list[Any]], h: int, names: Mapping[int, str]) -> dict[str, Any]:
    out = {n: hop[n][h] for n, _, _ in HOP_COLUMNS if hop[n][h] != INVALID[n]}
    if "node_id" in out:
        out["node"] = names.get(out["node_id"], out["node_id"])
    return out


__all__ = [
    "CELL_BYTES", "CODEC_VERSION", "DEFAULT_INT_UDP_PORT", "EIGHT_BYTE_INSTRUCTIONS",
    "HOP_COLUMNS", "INVALID", "MAX_TS_NS", "RANGE_REASONS", "REPORT_COLUMNS",
    "RESERVED_INSTRUCTIONS", "ROCEV2_UDP_PORT", "SCHEMA", "TX_UTIL_SCALE", "Instruction",
    "IntBatch", "IntBatchError", "IntDecodeError", "ReportFlag", "concat", "range_codes",
]


from fabricops.core import wire_int  # noqa: E402  (last: it reads the column tables above)
