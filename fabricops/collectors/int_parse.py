"""Parse Telemetry Report v2.0 packets carrying INT-MD stacks into an ``IntBatch``.

``parse_packets(buffers)`` takes UDP payloads (one telemetry report packet
each) and returns the reports of every well-formed packet plus ``ParseStats``.
A packet with any defect is dropped whole and counted under a reason; nothing
raises. Every step runs on arrays over all packets of the call at once: the
payloads are joined into one buffer, and each field is one gather at a
per-row offset.

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
epoch), else ``received_ns``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fabricops.core.intreport import (
    DEFAULT_INT_UDP_PORT,
    EIGHT_BYTE_INSTRUCTIONS,
    HOP_COLUMNS,
    INVALID,
    Instruction,
    IntBatch,
)

I64 = NDArray[np.int64]


@dataclass(frozen=True)
class ParseStats:
    """What one ``parse_packets`` call saw: packets in, kept, and set aside by reason."""

    packets: int = 0
    parsed: int = 0
    reports: int = 0
    hops: int = 0
    empty_reports: int = 0
    malformed: dict[str, int] = field(default_factory=dict)

    @property
    def malformed_total(self) -> int:
        return sum(self.malformed.values())


def parse_packets(
    buffers: Sequence[bytes], *, int_udp_port: int = DEFAULT_INT_UDP_PORT,
    received_ns: int | ArrayLike = 0,
) -> tuple[IntBatch, ParseStats]:
    """Parse telemetry report packets (UDP payloads); never raises on bad input.

    ``received_ns`` (scalar or one per packet) stamps reports that carry no
    timestamp of their own.
    """
    if len(buffers) == 0:
        return IntBatch.empty(), ParseStats()
    wire = Wire(buffers)
    rows = read_reports(wire, int_udp_port)
    keep = np.flatnonzero(rows.alive & (wire.bad[rows.pkt] == 0) & rows.content)
    empty = int(np.count_nonzero(rows.alive & (wire.bad[rows.pkt] == 0) & ~rows.content))
    recv = np.broadcast_to(np.asarray(received_ns, dtype=np.uint64), (len(buffers),))
    batch = _assemble(wire, rows, keep, recv)
    codes = np.bincount(wire.bad, minlength=len(REASONS) + 1)
    stats = ParseStats(
        packets=len(buffers), parsed=int(codes[0]), reports=batch.n_reports,
        hops=batch.n_hops, empty_reports=empty,
        malformed={REASONS[i - 1]: int(c) for i, c in enumerate(codes) if i and c},
    )
    return batch, stats


def _assemble(wire: Wire, rows: ReportRows, keep: I64, recv: NDArray[np.uint64]) -> IntBatch:
    """Report columns of the kept rows, then their hops."""
    n_stack = np.where(rows.has_int[keep], rows.n_hops[keep], 0)
    has_md = rows.has_md[keep]
    count = (n_stack + has_md).astype(np.uint16)
    start = np.zeros(len(keep), np.int64)
    np.cumsum(count[:-1], out=start[1:])
    n_hops = int(count.sum(dtype=np.int64))
    hops = {name: np.full(n_hops, INVALID[name], dt) for name, dt in _HOP_DTYPES.items()}
    _stack_hops(wire, rows, keep, start, n_stack, hops)
    _own_hops(wire, rows, keep, start + n_stack, has_md, hops)
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
    return IntBatch.from_columns(cols | hops)


_HOP_DTYPES: Final = {name: np.dtype(dt) for name, dt, _ in HOP_COLUMNS}
_I = Instruction
# Per instruction bit, in wire order: (column, byte offset in the item, bytes, 24-bit mask).
_BIT_FIELDS: Final[dict[int, tuple[tuple[str, int, int, bool], ...]]] = {
    _I.NODE_ID: (("node_id", 0, 4, False),),
    _I.L1_PORTS: (("ingress_port", 0, 2, False), ("egress_port", 2, 2, False)),
    _I.HOP_LATENCY: (("hop_latency_ns", 0, 4, False),),
    _I.QUEUE: (("queue_id", 0, 1, False), ("queue_occupancy", 0, 4, True)),
    _I.INGRESS_TS: (("ingress_ts_ns", 0, 8, False),),
    _I.EGRESS_TS: (("egress_ts_ns", 0, 8, False),),
    _I.L2_PORTS: (("l2_ingress_port", 0, 4, False), ("l2_egress_port", 4, 4, False)),
    _I.TX_UTIL: (("egress_tx_util", 0, 4, False),),
    _I.BUFFER: (("buffer_id", 0, 1, False), ("buffer_occupancy", 0, 4, True)),
}
Layout = tuple[tuple[str, int, int, bool], ...]
_layouts: dict[tuple[int, int, bool], Layout] = {}


def _hop_layout(bits: int, hop_bytes: int, *, report_md: bool = False) -> Layout:
    """Fields of one hop item: (column, byte offset, bytes, 24-bit mask), cached.

    INT-MD items end with the checksum complement (bit 15) at ``hop_bytes - 4``.
    In report metadata (``report_md``) bit 0 is reserved and bit 15 (queue id
    and drop reason, the last word) is read apart, by ``_drop_word``.
    """
    key = (bits, hop_bytes, report_md)
    if key not in _layouts:
        out: list[tuple[str, int, int, bool]] = []
        offset = 0
        for bit in (1 << (15 - k) for k in range(15)):
            if bits & bit:
                skip = report_md and bit == 0x8000
                out += [] if skip else [(c, offset + o, n, m) for c, o, n, m in
                                        _BIT_FIELDS.get(bit, ())]
                offset += 8 if bit & EIGHT_BYTE_INSTRUCTIONS else 4
        if bits & 0x0001 and not report_md:
            out.append(("checksum_complement", hop_bytes - 4, 4, False))
        _layouts[key] = tuple(out)
    return _layouts[key]


def _stack_hops(wire: Wire, rows: ReportRows, keep: I64, start: I64, n_stack: I64,
                hops: dict[str, NDArray[Any]]) -> None:
    """Fill the INT-MD stack hops, one group per (instruction bitmap, hop size)."""
    has = n_stack > 0
    sel, cnt, first = keep[has], n_stack[has], start[has]
    key = rows.instr[sel].astype(np.int64) << 8 | rows.hop_bytes[sel]
    for k in np.unique(key).tolist():
        g = key == k
        counts = cnt[g]
        h = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        pos = np.repeat(rows.stack[sel[g]], counts) + h * (k & 0xFF)
        dest = np.repeat(first[g] + counts - 1, counts) - h
        for col, off, size, masked in _hop_layout(k >> 8, k & 0xFF):
            hops[col][dest] = wire.read(pos + off, size, masked)
        _source_only_complement(wire, rows, sel[g], first[g], k, hops)


def _source_only_complement(wire: Wire, rows: ReportRows, sel: I64, first: I64, key: int,
                            hops: dict[str, NDArray[Any]]) -> None:
    """Re-read the source hop's checksum complement past its source-only metadata."""
    extra = rows.extra[sel]
    if not key >> 8 & 0x0001 or not extra.any():
        return
    x = extra > 0
    end = rows.stack[sel[x]] + rows.n_hops[sel[x]] * (key & 0xFF) + extra[x]
    hops["checksum_complement"][first[x]] = wire.read(end - 4, 4, False)


def _own_hops(wire: Wire, rows: ReportRows, keep: I64, dest: I64, has_md: NDArray[np.bool_],
              hops: dict[str, NDArray[Any]]) -> None:
    """Fill the hop a node reported in its own report metadata (RepMdBits bits 1-8)."""
    sel, at = keep[has_md], dest[has_md]
    hops["node_id"][at] = wire.node_id[rows.pkt[sel]]
    bits = rows.repmd[sel]
    for b in np.unique(bits).tolist():
        g = bits == b
        for col, off, size, masked in _hop_layout(b, 0, report_md=True):
            hops[col][at[g]] = wire.read(rows.md_pos[sel[g]] + off, size, masked)
    q = (bits & 0x1001) == 0x0001
    hops["queue_id"][at[q]] = wire.read(_drop_word(rows, sel[q]), 1)


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


# ---------------------------------------------------------------- header reading

REASONS: Final = (
    "short_packet", "bad_version", "truncated_report", "bad_report_length", "too_many_reports",
    "unsupported_report_type", "bad_md_length", "unsupported_inner_type", "truncated_inner",
    "bad_inner_ip", "unsupported_inner_ip", "bad_tlv", "unsupported_int_type",
    "bad_int_header", "truncated_int", "bad_hop_ml", "bad_stack_length",
)
"""Why a packet was set aside; ``ParseStats.malformed`` counts packets by these."""
_CODE: Final = {r: i + 1 for i, r in enumerate(REASONS)}
MAX_REPORTS_PER_PACKET: Final = 256
MAX_TLVS: Final = 16
_PAD: Final = 16
_HOP_MD_BITS: Final = 0x7F80
"""RepMdBits that describe the reporting node's own hop (bits 1-8)."""
_BIT_BYTES: Final = np.array([4] * 16, np.int64) + np.isin(np.arange(16), (4, 5, 6)) * 4
_ITEM_BYTES: Final = (np.unpackbits(np.arange(65536, dtype=">u2").view(np.uint8)).reshape(
    -1, 16) * _BIT_BYTES).sum(axis=1)
"""Bytes of metadata a 16-bit instruction bitmap (or RepMdBits) asks for, by bitmap."""


class Wire:
    """The joined payloads with a big-endian view at every byte offset, and packet state."""

    def __init__(self, buffers: Sequence[bytes]) -> None:
        lengths = np.fromiter(map(len, buffers), np.int64, len(buffers))
        self.end = np.cumsum(lengths)
        self.start = self.end - lengths
        data = b"".join(buffers) + bytes(_PAD)
        self._views = {n: np.ndarray((len(data) - n + 1,), f">u{n}", data, 0, (1,))
                       for n in (1, 2, 4, 8)}
        self.bad = np.zeros(len(buffers), np.uint8)
        head = self.read(self.start, 4).astype(np.int64)
        self.seq = head & 0x3FFFFF
        self.node_id = self.read(self.start + 4, 4)
        short = lengths < 12
        self.bad[short] = _CODE["short_packet"]
        self.bad[~short & (head >> 28 != 2)] = _CODE["bad_version"]

    def read(self, pos: I64, size: int, masked: bool = False) -> NDArray[Any]:
        """Big-endian unsigned values of ``size`` bytes at each offset (``masked``: low 24 bits)."""
        values = self._views[size][pos]
        return values & 0xFFFFFF if masked else values


class ReportRows:
    """Per individual report: where it is, what it holds, and whether it is still sound."""

    def __init__(self, wire: Wire, pkt: I64, pos: I64, end: I64, w0: I64) -> None:
        n = len(pkt)
        self.wire, self.pkt, self.pos, self.end = wire, pkt, pos, end
        self.alive = np.ones(n, bool)
        self.rep_type, self.in_type = w0 >> 28, (w0 >> 24) & 0xF
        self.md_len, self.flags = (w0 >> 8) & 0xFF, ((w0 >> 4) & 0xF).astype(np.uint8)
        self.repmd, self.md_pos = np.zeros(n, np.int64), pos + 12
        self.src_ip, self.dst_ip = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.sport, self.dport, self.proto = (np.zeros(n, np.int64) for _ in range(3))
        self.instr, self.hop_bytes, self.stack = (np.zeros(n, np.int64) for _ in range(3))
        self.n_hops, self.extra, self.md_flags = (np.zeros(n, np.int64) for _ in range(3))
        self.has_int, self.has_md, self.content = (np.zeros(n, bool) for _ in range(3))

    def fail(self, mask: NDArray[np.bool_], reason: str) -> None:
        """Set the packets of the live rows in ``mask`` aside for ``reason``."""
        m = mask & self.alive
        if m.any():
            p = self.pkt[m]
            self.wire.bad[p] = np.where(self.wire.bad[p] == 0, _CODE[reason], self.wire.bad[p])
            self.alive &= ~m

    def need(self, pos: I64, n: I64 | int, where: NDArray[np.bool_], reason: str,
             limit: I64 | None = None) -> I64:
        """Fail rows in ``where`` lacking ``n`` bytes at ``pos``; return safe offsets (0 if not)."""
        self.fail(where & (pos + n > (self.end if limit is None else limit)), reason)
        return np.where(where & self.alive, pos, 0)

    def read(self, pos: I64, size: int) -> I64:
        return self.wire.read(pos, size).astype(np.int64)


def read_reports(wire: Wire, int_udp_port: int) -> ReportRows:
    """Split packets into reports and read each one's headers, flow and INT-MD header."""
    rows = _split_reports(wire)
    inner = _main_contents(rows)
    l3, v4, limit = _inner_packet(rows, inner)
    shim, has_int = _ipv4(rows, l3, v4, limit, int_udp_port)
    _int_md(rows, shim, has_int, limit)
    rows.content = rows.alive & (rows.has_int | rows.has_md | (rows.repmd & 1 != 0))
    return rows


def _split_reports(wire: Wire) -> ReportRows:
    """Walk the individual report headers of every sound packet, one report per round."""
    cur, end = wire.start + 8, wire.end
    active = wire.bad == 0
    parts: list[tuple[I64, ...]] = []
    for _ in range(MAX_REPORTS_PER_PACKET):
        idx = np.flatnonzero(active)
        if len(idx) == 0:
            break
        p, e = cur[idx], end[idx]
        short = p + 4 > e
        w0 = wire.read(np.where(short, 0, p), 4).astype(np.int64)
        words = (w0 >> 16) & 0xFF
        r_end = np.where(words == 0xFF, e, p + 4 + words * 4)
        odd = (words == 0xFF) & (e - p - 4 < 0xFF * 4)
        for mask, reason in ((short, "truncated_report"), (~short & odd, "bad_report_length"),
                             (~short & ~odd & (r_end > e), "truncated_report")):
            wire.bad[idx[mask]] = _CODE[reason]
        ok = wire.bad[idx] == 0
        parts.append((idx[ok], p[ok], r_end[ok], w0[ok]))
        cur[idx] = r_end
        active[idx] = ok & (r_end < e)
    wire.bad[active] = _CODE["too_many_reports"]
    pkt, pos, r_end, w0 = (np.concatenate(c) for c in zip(*parts, strict=True)) if parts \
        else (np.zeros(0, np.int64),) * 4
    order = np.argsort(pos, kind="stable")
    return ReportRows(wire, pkt[order], pos[order], r_end[order], w0[order])


def _main_contents(r: ReportRows) -> I64:
    """Check RepType and the INT main contents; return where the inner contents start."""
    r.fail(r.rep_type > 1, "unsupported_report_type")
    is_int = (r.rep_type == 1) & r.alive
    p = r.need(r.pos + 4, 8, is_int, "bad_md_length")
    repmd, dsmd = r.read(p, 2), r.read(p + 4, 2)
    md_bytes, base = r.md_len * 4, _ITEM_BYTES[repmd]
    r.fail(is_int & ((r.pos + 12 + md_bytes > r.end) | (base > md_bytes)
                     | ((dsmd == 0) & (base != md_bytes))), "bad_md_length")
    r.repmd = np.where(is_int & r.alive, repmd, 0)
    r.has_md = (r.repmd & _HOP_MD_BITS) != 0
    return np.where(is_int, r.pos + 12 + md_bytes, r.pos + 4)


def _inner_packet(r: ReportRows, inner: I64) -> tuple[I64, NDArray[np.bool_], I64]:
    """Find the inner IPv4 header: (offset, rows that have one, end of the inner packet)."""
    it = r.in_type
    r.fail(it > 5, "unsupported_inner_type")
    kind = np.where((it == 3) | (it == 4) | (it == 5), it, 0)
    at, limit = inner.copy(), r.end.copy()
    tlv = r.alive & (it == 1)
    if tlv.any():
        _tlv(r, inner, tlv, at, kind, limit)
    eth = r.alive & (kind == 3)
    if eth.any():
        _ethernet(r, at, eth, kind, limit)
    r.fail(kind == 5, "unsupported_inner_ip")
    return at, r.alive & (kind == 4), limit


def _tlv(r: ReportRows, pos: I64, act: NDArray[np.bool_], at: I64, kind: I64,
         limit: I64) -> None:
    """Locate the first packet TLV (Ethernet, IPv4, IPv6) of TLV inner contents, in place."""
    p = pos.copy()
    for _ in range(MAX_TLVS):
        safe = r.need(p, 4, act, "bad_tlv")
        act = act & r.alive
        word = r.read(safe, 4)
        data, t_type = p + 4, word >> 28
        t_end = data + ((word >> 16) & 0xFF) * 4
        r.fail(act & (t_end > r.end), "bad_tlv")
        hit = act & r.alive & (t_type >= 1) & (t_type <= 3)
        at[hit], kind[hit], limit[hit] = data[hit], t_type[hit] + 2, t_end[hit]
        p, act = t_end, act & r.alive & ~hit & (t_end < r.end)
        if not act.any():
            return
    r.fail(act, "bad_tlv")


def _ethernet(r: ReportRows, at: I64, eth: NDArray[np.bool_], kind: I64, limit: I64) -> None:
    """Step over an inner Ethernet header and up to two VLAN tags, in place."""
    safe = r.need(at, 14, eth, "truncated_inner", limit)
    ether, l3 = r.read(safe + 12, 2), at + 14
    for _ in range(2):
        tag = eth & r.alive & ((ether == 0x8100) | (ether == 0x88A8))
        safe = r.need(l3, 4, tag, "truncated_inner", limit)
        ether = np.where(tag, r.read(safe + 2, 2), ether)
        l3 = np.where(tag, l3 + 4, l3)
    at[eth] = l3[eth]
    kind[eth] = np.select([ether == 0x0800, ether == 0x86DD], [4, 5], 0)[eth]


def _ipv4(r: ReportRows, l3: I64, v4: NDArray[np.bool_], limit: I64,
          port: int) -> tuple[I64, NDArray[np.bool_]]:
    """Read the flow from the inner IPv4 and L4 headers; return (shim offset, INT rows)."""
    safe = r.need(l3, 20, v4, "truncated_inner", limit)
    first = r.read(safe, 1)
    ihl = first & 0xF
    r.fail(v4 & ((first >> 4 != 4) | (ihl < 5)), "bad_inner_ip")
    safe = r.need(l3, ihl * 4, v4, "truncated_inner", limit)
    v4 = v4 & r.alive
    r.proto[v4], r.src_ip[v4], r.dst_ip[v4] = (
        r.read(safe + k, n)[v4] for k, n in ((9, 1), (12, 4), (16, 4)))
    l4 = l3 + ihl * 4
    _l4_ports(r, l4, v4, limit)
    has_int = v4 & (r.proto == 17) & (r.dport == port) & (l4 + 4 <= limit)
    r.need(l4, 8 + 16, has_int, "truncated_int", limit)
    return l4 + 8, has_int & r.alive


def _l4_ports(r: ReportRows, l4: I64, rows: NDArray[np.bool_], limit: I64) -> None:
    """Read TCP/UDP ports at ``l4`` for ``rows`` whose protocol has them and that hold them."""
    ports = rows & ((r.proto == 6) | (r.proto == 17)) & (l4 + 4 <= limit)
    safe = np.where(ports, l4, 0)
    r.sport = np.where(ports, r.read(safe, 2), np.where(rows, 0, r.sport))
    r.dport = np.where(ports, r.read(safe + 2, 2), np.where(rows, 0, r.dport))


def _int_md(r: ReportRows, shim: I64, has: NDArray[np.bool_], limit: I64) -> None:
    """Check the INT shim and INT-MD header; size the stack; restore the original flow."""
    safe = np.where(has, shim, 0)
    s, m0, m1 = r.read(safe, 4), r.read(safe + 4, 4), r.read(safe + 8, 4)
    words = (s >> 16) & 0xFF
    r.fail(has & (s >> 28 != 1), "unsupported_int_type")
    r.fail(has & ((words < 3) | (m0 >> 28 != 2)), "bad_int_header")
    int_end = shim + 4 + words * 4
    r.fail(has & (int_end > limit), "truncated_int")
    hop_bytes, instr, domain = ((m0 >> 8) & 0x1F) * 4, m1 >> 16, m1 & 0xFFFF
    stack_len, base = words * 4 - 12, _ITEM_BYTES[instr]
    r.fail(has & ((hop_bytes < base) | ((domain == 0) & (hop_bytes != base))
                  | ((hop_bytes == 0) & (stack_len > 0))), "bad_hop_ml")
    n = stack_len // np.maximum(hop_bytes, 1)
    extra = stack_len - n * hop_bytes
    r.fail(has & (extra != 0) & ((domain == 0) | (n == 0)), "bad_stack_length")
    has = has & r.alive
    r.has_int, r.instr, r.hop_bytes = has, np.where(has, instr, 0), hop_bytes
    r.stack, r.n_hops, r.extra = shim + 16, np.where(has, n, 0), extra
    r.md_flags = (m0 >> 25) & 7
    npt = np.where(has, (s >> 26) & 3, 0)
    r.dport = np.where(npt == 1, s & 0xFFFF, r.dport)
    r.proto = np.where(npt == 2, s & 0xFF, r.proto)
    if (npt == 2).any():
        _l4_ports(r, int_end, npt == 2, limit)


__all__ = ["MAX_REPORTS_PER_PACKET", "REASONS", "ParseStats", "parse_packets"]
