"""The header walk of the INT report parser: where each report's INT-MD stack is.

``read_reports(wire, int_udp_port)`` splits every sound packet of a ``Wire`` into
its individual reports and, for each, reads the Telemetry Report headers, the
inner packet (TLV, Ethernet with VLAN tags, IPv4), its flow (addresses,
protocol, L4 ports, restored per the INT shim's NPT) and the INT shim and INT-MD
header, down to the offset and size of the hop stack. The result is a
``ReportRows``; a defect sets the whole packet aside under one of ``REASONS``.
``fabricops.collectors.int_parse`` reads the hops and assembles the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]


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
PAD_BYTES: Final = 16
"""Readable bytes a buffer of ``Datagrams`` needs past its last datagram."""
_HOP_MD_BITS: Final = 0x7F80
"""RepMdBits that describe the reporting node's own hop (bits 1-8)."""
_BIT_BYTES: Final = np.array([4] * 16, np.int64) + np.isin(np.arange(16), (4, 5, 6)) * 4
_ITEM_BYTES: Final = (np.unpackbits(np.arange(65536, dtype=">u2").view(np.uint8)).reshape(
    -1, 16) * _BIT_BYTES).sum(axis=1)
"""Bytes of metadata a 16-bit instruction bitmap (or RepMdBits) asks for, by bitmap."""


@dataclass(frozen=True)
class Datagrams:
    """Datagrams received into one buffer: datagram ``i`` is the ``length[i]`` bytes
    at ``start[i]`` of ``data``, which holds at least ``PAD_BYTES`` more past the last."""

    data: NDArray[np.uint8]
    start: I64
    length: I64

    def __post_init__(self) -> None:
        if len(self.start) != len(self.length) or (len(self.start) and (
                (self.start < 0).any() or (self.length < 0).any()
                or (self.start + self.length).max() + PAD_BYTES > len(self.data))):
            raise ValueError("datagrams must lie inside their buffer, with PAD_BYTES after")

    def __len__(self) -> int:
        return len(self.start)

    @property
    def nbytes(self) -> int:
        return int(self.length.sum())


class Wire:
    """The packets with a big-endian view at every byte offset, and packet state."""

    def __init__(self, packets: Sequence[bytes] | Datagrams) -> None:
        if isinstance(packets, Datagrams):
            data: Any = packets.data
            lengths, self.start = packets.length, packets.start
            self.end = self.start + lengths
        else:
            lengths = np.fromiter(map(len, packets), np.int64, len(packets))
            self.end = np.cumsum(lengths)
            self.start = self.end - lengths
            data = b"".join(packets) + bytes(PAD_BYTES)
        size = len(data)
        self._data = data
        self._views = {n: np.ndarray((size - n + 1,), f">u{n}", data, 0, (1,))
                       for n in (1, 2, 4, 8)}
        self.bad = np.zeros(len(packets), np.uint8)
        head = self.read(self.start, 4).astype(np.int64)
        self.seq = head & 0x3FFFFF
        self.node_id = self.read(self.start + 4, 4)
        short = lengths < 12
        self.bad[short] = _CODE["short_packet"]
        self.bad[~short & (head >> 28 != 2)] = _CODE["bad_version"]

    def read(self, pos: I64, size: int) -> NDArray[Any]:
        """Big-endian unsigned values of ``size`` bytes at each offset."""
        return self._views[size][pos]

    def words(self, pos: I64, span: int, ones: int = 0) -> NDArray[np.uint32]:
        """The ``span`` bytes (a multiple of 4) at each offset as a row of words, then
        ``ones`` all-ones words.

        One gather of ``span``-byte records, then native words: reading fields from
        these rows costs a fraction of one unaligned gather per field. Bytes past
        the buffer's end read as zero.
        """
        data, n, width = self._data, len(pos), span // 4
        if n and int(pos.max()) + span > len(data):
            data = np.concatenate([np.frombuffer(data, np.uint8), np.zeros(span, np.uint8)])
        records = np.ndarray((len(data) - span + 1,), f"V{span}", data, 0, (1,))[pos]
        out = np.empty((n, width + ones), np.uint32)
        out[:, :width] = records.view(">u4").reshape(n, width)
        out[:, width:] = 0xFFFFFFFF
        return out


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


__all__ = ["I64", "MAX_REPORTS_PER_PACKET", "MAX_TLVS", "PAD_BYTES", "REASONS", "Datagrams",
           "ReportRows", "Wire", "read_reports"]
