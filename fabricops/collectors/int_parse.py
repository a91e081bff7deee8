"""Parse Telemetry Report v2.0 packets carrying INT-MD stacks into an ``IntBatch``.

``parse_packets(buffers)`` takes UDP payloads (one telemetry report packet
each) and returns the reports of every well-formed packet plus ``ParseStats``.
A packet with any defect is dropped whole and counted under a reason; nothing
raises. Every step runs on arrays over all packets of the call at once: the
payloads are joined into one buffer (or arrive in one, as ``Datagrams``), and
each field is one gather at a per-row offset. Hops of every layout (instruction
bitmap and hop size) are read together: a ``LayoutCache`` gives each report's
field offsets, so a batch of many layouts costs about what one layout does.

What is read, per individual report:
- RepType 0 (Inner Only) or 1 (INT). With RepType 1 and a non-zero
  *RepMdBits*, the sending node's own metadata becomes the report's last hop,
  its node id taken from the group header.
- Inner contents: InType 1 (TLV; the first Ethernet/IPv4/IPv6 TLV), 3
  (Ethernet, up to two VLAN tags), 4 (IPv4); 0 and 2 carry no packet. IPv6
  inner packets are set aside (``unsupported_inner_ip``): the record holds
  IPv4 addresses.
- The flow: IPv4 addresses, protocol, L4 ports. When the UDP destination port
  is ``int_udp_port`` an INT shim (type 1, INT-MD) follows; with NPT 1 the
  original UDP port is restored from the shim, with NPT 2 the original IP
  protocol and the L4 header after the stack.
- The INT-MD stack: every instruction bit, hop size from *Hop ML* (domain
  specific metadata skipped), source-only metadata of a non-zero domain
  tolerated. Hops are returned in path order (the wire stack is newest first).

A report with neither an INT-MD header nor its own metadata is counted in
``ParseStats.empty_reports`` and not returned. A report's ``ts_ns`` is its
last hop's egress timestamp, else its ingress timestamp (ns since the Unix
epoch), else ``received_ns``. A well-formed report holding a value its record
cannot (a timestamp of 2**63 ns or more, see ``intreport.RANGE_REASONS``) is
set aside alone and counted in ``ParseStats.rejected``; its packet's other
reports are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fabricops.collectors.int_headers import (
    _ITEM_BYTES,
    I64,
    MAX_REPORTS_PER_PACKET,
    REASONS,
    Datagrams,
    ReportRows,
    Wire,
    read_reports,
)
from fabricops.collectors.int_layouts import (
    CHECKSUM_FIELD,
    FIELDS,
    LayoutCache,
    LayoutLookups,
    layout_key,
)
from fabricops.core.intreport import (
    DEFAULT_INT_UDP_PORT,
    HOP_COLUMNS,
    INVALID,
    RANGE_REASONS,
    IntBatch,
    range_codes,
)


@dataclass(frozen=True)
class ParseStats:
    """What one ``parse_packets`` call saw: packets in, kept, and set aside by reason.

    ``malformed`` counts packets by ``REASONS``; ``rejected`` counts reports of
    well-formed packets by ``RANGE_REASONS``; ``layouts`` tells what the layout
    cache did for the call's distinct hop layouts.
    """

    packets: int = 0
    parsed: int = 0
    reports: int = 0
    hops: int = 0
    empty_reports: int = 0
    malformed: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    layouts: LayoutLookups = field(default_factory=LayoutLookups)

    @property
    def malformed_total(self) -> int:
        return sum(self.malformed.values())

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


_LAYOUTS: Final = LayoutCache()


def parse_packets(
    buffers: Sequence[bytes] | Datagrams, *, int_udp_port: int = DEFAULT_INT_UDP_PORT,
    received_ns: int | ArrayLike = 0, layouts: LayoutCache | None = None,
) -> tuple[IntBatch, ParseStats]:
    """Parse telemetry report packets (UDP payloads); never raises on bad input.

    ``received_ns`` (scalar or one per packet) stamps reports that carry no
    timestamp of their own. ``layouts`` (default: one shared by the process)
    caches hop layouts; the result does not depend on what it holds.
    """
    if len(buffers) == 0:
        return IntBatch.empty(), ParseStats()
    wire = Wire(buffers)
    rows = read_reports(wire, int_udp_port)
    keep = np.flatnonzero(rows.alive & (wire.bad[rows.pkt] == 0) & rows.content)
    empty = int(np.count_nonzero(rows.alive & (wire.bad[rows.pkt] == 0) & ~rows.content))
    recv = np.broadcast_to(np.asarray(received_ns, dtype=np.uint64), (len(buffers),))
    cols, lookups = _assemble(wire, rows, keep, recv, _LAYOUTS if layouts is None else layouts)
    ranges = range_codes(cols)
    batch = IntBatch.from_columns(_without(cols, ranges != 0) if ranges.any() else cols)
    codes = np.bincount(wire.bad, minlength=len(REASONS) + 1)
    stats = ParseStats(
        packets=len(buffers), parsed=int(codes[0]), reports=batch.n_reports,
        hops=batch.n_hops, empty_reports=empty,
        malformed=_by_reason(codes, REASONS),
        rejected=_by_reason(np.bincount(ranges, minlength=len(RANGE_REASONS) + 1),
                            RANGE_REASONS),
        layouts=lookups,
    )
    return batch, stats


def _by_reason(counts: NDArray[np.intp], reasons: Sequence[str]) -> dict[str, int]:
    """{reason: count} from counts by code, code ``i`` >= 1 being ``reasons[i - 1]``."""
    return {reasons[i - 1]: int(c) for i, c in enumerate(counts) if i and c}


def _without(cols: dict[str, Any], drop: NDArray[np.bool_]) -> dict[str, Any]:
    """The batch columns without the reports in ``drop`` and their hops."""
    keep = ~drop
    hop_keep = np.repeat(keep, cols["hop_count"])
    return {name: np.asarray(v)[hop_keep if name in _HOP_DTYPES else keep]
            for name, v in cols.items()}


def _assemble(wire: Wire, rows: ReportRows, keep: I64, recv: NDArray[np.uint64],
              layouts: LayoutCache) -> tuple[dict[str, Any], LayoutLookups]:
    """Batch columns of the kept rows: report columns, then their hops."""
    n_stack = np.where(rows.has_int[keep], rows.n_hops[keep], 0)
    has_md = rows.has_md[keep]
    count = (n_stack + has_md).astype(np.uint16)
    start = np.zeros(len(keep), np.int64)
    np.cumsum(count[:-1], out=start[1:])
    n_hops = int(count.sum(dtype=np.int64))
    hops = {name: np.full(n_hops, INVALID[name], dt) for name, dt in _HOP_DTYPES.items()}
    stack = _stack_hops(wire, rows, keep, start, n_stack, hops, layouts)
    own = _own_hops(wire, rows, keep, start + n_stack, has_md, hops, layouts)
    pkt = rows.pkt[keep]
    flags = rows.flags[keep] | np.where(rows.has_int[keep], rows.md_flags[keep] << 4, 0)
    cols: dict[str, Any] = {
        "ts_ns": _report_ts(hops, start, count, recv[pkt]),
        "sink": wire.node_id[pkt], "seq": wire.seq[pkt],
        "src_ip": rows.src_ip[keep], "dst_ip": rows.dst_ip[keep], "sport": rows.sport[keep],
        "dport": rows.dport[keep], "proto": rows.proto[keep], "flags": flags,
        "instructions": np.where(rows.has_int[keep], rows.instr[keep], 0),
        "drop_reason": _drop_reasons(wire, rows, keep), "hop_count": count,
    }
    lookups = LayoutLookups(stack.hits + own.hits, stack.misses + own.misses,
                            stack.evictions + own.evictions)
    return cols | hops, lookups


_HOP_DTYPES: Final = {name: np.dtype(dt) for name, dt, _ in HOP_COLUMNS}


def _stack_hops(wire: Wire, rows: ReportRows, keep: I64, start: I64, n_stack: I64,
                hops: dict[str, NDArray[Any]], layouts: LayoutCache) -> LayoutLookups:
    """Fill the INT-MD stack hops of every layout at once, in path order (wire: newest first)."""
    has = n_stack > 0
    sel, cnt, first = keep[has], n_stack[has], start[has]
    if len(sel) == 0:
        return LayoutLookups()
    size = rows.hop_bytes[sel]
    table, lookups = layouts.lookup(layout_key(rows.instr[sel], size))
    rep = np.repeat(np.arange(len(sel)), cnt)
    total = len(rep)
    k = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    pos = (rows.stack[sel] + (cnt - 1) * size)[rep] - k * size[rep]
    dest = first[rep] + k
    _gather(wire, table, rep, pos, None if total == len(hops["node_id"]) else dest, hops)
    extra = rows.extra[sel]
    late = (extra > 0) & (table[:, CHECKSUM_FIELD] >= 0)
    if late.any():
        end = rows.stack[sel[late]] + cnt[late] * size[late] + extra[late]
        hops["checksum_complement"][first[late]] = wire.read(end - 4, 4)
    return lookups


def _gather(wire: Wire, table: NDArray[np.int16], rep: I64, pos: I64, dest: I64 | None,
            hops: dict[str, NDArray[Any]]) -> None:
    """Per field, read the hops whose report's layout (``table[rep]``) has it, into ``dest``
    (``None``: every hop, in order).

    ``pos`` is each hop's item offset; a field absent from a layout keeps ``INVALID``.
    Every hop's item is read once as a row of words (a field starts at a word, or
    at its metadata's half or byte), then each field is taken from the rows. A
    field absent from some layouts reads two all-ones words there: ``INVALID``.
    """
    span = int((table + _FIELD_BYTES).max())
    same = (table == table[0]).all(axis=0)
    words = wire.words(pos, span + -span % 4, ones=0 if same.all() else 2)
    width = words.shape[1]
    if not same.all():
        at_word = np.where(table >= 0, table >> 2, width - 2).T.copy()
        base = np.arange(0, words.size, width)
        flat = words.reshape(-1)
    for f, (col, _, _, size, _) in enumerate(FIELDS):
        if same[f]:
            if table[0, f] < 0:
                continue
            at = int(table[0, f]) >> 2
            hi = words[:, at]
            values = _field(hi, words[:, at + 1] if size == 8 else hi, f)
        else:
            cell = at_word[f][rep] + base
            hi = flat[cell]
            values = _field(hi, flat[cell + 1] if size == 8 else hi, f)
        if dest is None:
            hops[col][:] = values
        else:
            hops[col][dest] = values


def _field(hi: NDArray[np.uint32], lo: NDArray[np.uint32], f: int) -> NDArray[Any]:
    """Field ``f`` of ``FIELDS`` from the word it starts in (``hi``) and the next (``lo``)."""
    _, _, sub, size, masked = FIELDS[f]
    if size == 8:
        return hi.astype(np.uint64) << 32 | lo
    if size == 4:
        return hi & 0xFFFFFF if masked else hi
    return (hi >> (8 * (4 - sub % 4 - size))) & ((1 << 8 * size) - 1)


_FIELD_BYTES: Final = np.array([spec[3] for spec in FIELDS], np.int16)
"""Bytes of each field of ``FIELDS``: a layout's row plus these is where its fields end."""


def _own_hops(wire: Wire, rows: ReportRows, keep: I64, dest: I64, has_md: NDArray[np.bool_],
              hops: dict[str, NDArray[Any]], layouts: LayoutCache) -> LayoutLookups:
    """Fill the hop a node reported in its own report metadata (RepMdBits bits 1-8)."""
    sel, at = keep[has_md], dest[has_md]
    if len(sel) == 0:
        return LayoutLookups()
    hops["node_id"][at] = wire.node_id[rows.pkt[sel]]
    bits = rows.repmd[sel]
    table, lookups = layouts.lookup(layout_key(bits, 0, own=True))
    _gather(wire, table, np.arange(len(sel)), rows.md_pos[sel], at, hops)
    q = (bits & 0x1001) == 0x0001
    hops["queue_id"][at[q]] = wire.read(_drop_word(rows, sel[q]), 1)
    return lookups


def _drop_reasons(wire: Wire, rows: ReportRows, keep: I64) -> NDArray[np.uint8]:
    """Per kept report, the drop reason of RepMdBits bit 15, else ``INVALID``."""
    drop = np.full(len(keep), INVALID["drop_reason"], np.uint8)
    has = rows.repmd[keep] & 1 != 0
    drop[has] = wire.read(_drop_word(rows, keep[has]) + 1, 1)
    return drop


def _drop_word(rows: ReportRows, sel: I64) -> I64:
    """Offset of the RepMdBits bit 15 word (queue id, drop reason): the last baseline word."""
    offset: I64 = rows.md_pos[sel] + _ITEM_BYTES[rows.repmd[sel]] - 4
    return offset


def _report_ts(hops: dict[str, NDArray[Any]], start: I64, count: NDArray[np.uint16],
               recv: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """Last hop's egress timestamp, else its ingress timestamp, else the receive time."""
    ts = recv.copy()
    has = count > 0
    last = (start + count.astype(np.int64) - 1)[has]
    for col in ("ingress_ts_ns", "egress_ts_ns"):
        value = hops[col][last]
        ok = value != INVALID[col]
        ts[np.flatnonzero(has)[ok]] = value[ok]
    return ts


__all__ = ["MAX_REPORTS_PER_PACKET", "REASONS", "ParseStats", "parse_packets"]
