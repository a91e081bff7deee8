"""Encode an ``IntBatch`` as Telemetry Report v2.0 packets carrying INT-MD stacks.

Each packet is a UDP payload: the Telemetry Report Group Header (Ver 2, hw_id,
22-bit sequence number, node id = the report's ``sink``), then one Individual
Report Header per report. Consecutive reports with the same ``sink`` and
``seq`` share a packet (coalescing), up to ``max_payload_bytes`` (a larger
report gets a packet of its own); a report of 255 words or more gets Report
Length 0xFF and ends its packet.

An individual report is RepType 0 (Inner Only) with InType 4 (IPv4), unless
it carries metadata of its own: with ``sink_metadata="report"`` the last hop
goes into the *Variable Optional Baseline Metadata* (RepMdBits bits 1-8 of the
instruction bitmap; its node id is the group header's; a hop without such
bits stays in the stack), and a ``drop_reason``
sets RepMdBits bit 15; then RepType is 1 (INT).

The inner IPv4 packet is the monitored RoCEv2 packet as the sink saw it: IPv4,
UDP with destination port ``int_udp_port`` (INT_TBD), the INT shim (type 1,
NPT 1 carrying the original UDP destination port; NPT 2 and the original L4
header after the stack for non-UDP flows), the 12-byte INT-MD header, the
metadata stack (newest hop first, each item in instruction-bit order, domain
specific words, then the checksum complement), and the InfiniBand BTH.

Values wider than their wire field are truncated to it (occupancies to 24 bits).
"""

from __future__ import annotations

import struct
from typing import Any, Final, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.intreport import (
    DEFAULT_INT_UDP_PORT,
    EIGHT_BYTE_INSTRUCTIONS,
    INVALID,
    IntBatch,
)

_GROUP = struct.Struct(">II")
_WORD = struct.Struct(">I")
_MAIN = struct.Struct(">HHHH")
_IPV4 = struct.Struct(">BBHHHBBHII")
_UDP_SHIM_MD = struct.Struct(">HHHHIIII")
_BTH = struct.Struct(">BBHII")
# Instruction bit -> names of the big-endian fields it writes, in order.
_ITEMS: Final[dict[int, tuple[str, ...]]] = {
    0x8000: ("node_id",), 0x4000: ("l1_ports",), 0x2000: ("hop_latency_ns",),
    0x1000: ("queue",), 0x0800: ("ingress_ts_ns",), 0x0400: ("egress_ts_ns",),
    0x0200: ("l2_ingress_port", "l2_egress_port"), 0x0100: ("egress_tx_util",),
    0x0080: ("buffer",),
}
REPORT_MD_BITS: Final = 0x7F80
"""Instruction bits a sink may carry in RepMdBits (bits 1-8)."""


class IntWireError(ValueError):
    """A report that cannot be encoded; the message names the report and the cause."""


class WireOptions(BaseModel):
    """How reports are laid out on the wire."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    int_udp_port: int = Field(default=DEFAULT_INT_UDP_PORT, ge=1, le=65535,
                              description="UDP destination port marking INT (INT_TBD)")
    sink_metadata: Literal["stack", "report"] = Field(
        default="stack", description="Where the sink puts its own hop: the stack or RepMdBits")
    hop_limit: int = Field(default=8, ge=0, le=255,
                           description="Remaining Hop Count the INT source starts from")
    hw_id: int = Field(default=0, ge=0, le=63)
    domain_specific_id: int = Field(default=0, ge=0, le=0xFFFF)
    ds_instruction: int = Field(default=0, ge=0, le=0xFFFF)
    ds_words_per_hop: int = Field(default=0, ge=0, le=31,
                                  description="Domain specific metadata words in each hop")
    max_payload_bytes: int = Field(default=1472, ge=64, le=65507)


def encode_packets(batch: IntBatch, options: WireOptions | None = None) -> list[bytes]:
    """The telemetry report packets (UDP payloads) of every report in ``batch``."""
    opts = options or WireOptions()
    if opts.ds_words_per_hop and not opts.domain_specific_id:
        raise IntWireError("domain specific words need a non-zero domain_specific_id")
    own = (batch.hop_count > 0) & (batch.instructions & REPORT_MD_BITS != 0) & (
        opts.sink_metadata == "report")
    stacks = _stacks(batch, batch.hop_count - own, opts.ds_words_per_hop)
    own_md = _own_metadata(batch, own)
    sink, seq = batch.sink.tolist(), batch.seq.tolist()
    packets: list[bytes] = []
    body: list[bytes] = []
    size, closed = _GROUP.size, False
    for i in range(batch.n_reports):
        report = _report(batch, i, stacks[i], own_md[i], opts)
        if body and (closed or size + len(report) > opts.max_payload_bytes
                     or (sink[i], seq[i]) != (sink[i - 1], seq[i - 1])):
            packets.append(_packet(sink[i - 1], seq[i - 1], body, opts))
            body, size = [], _GROUP.size
        body.append(report)
        size += len(report)
        closed = report[1] == 0xFF
    if body:
        packets.append(_packet(sink[-1], seq[-1], body, opts))
    return packets


def _packet(sink: int, seq: int, body: list[bytes], opts: WireOptions) -> bytes:
    head = _GROUP.pack(2 << 28 | opts.hw_id << 22 | seq & 0x3FFFFF, sink)
    return head + b"".join(body)


def _report(batch: IntBatch, i: int, stack: bytes, own_md: bytes, opts: WireOptions) -> bytes:
    """One individual report: header, INT main contents if any, truncated packet."""
    inner = _inner_packet(batch, i, stack, opts)
    flags = int(batch.flags[i])
    if own_md:
        repmd = int.from_bytes(own_md[:2], "big")
        main = _MAIN.pack(repmd, 0, 0, 0) + own_md[2:]
        md_words = (len(own_md) - 2) // 4
    else:
        main, md_words = b"", 0
    words = (len(main) + len(inner)) // 4
    rep_type = 1 if own_md else 0
    head = rep_type << 28 | 4 << 24 | min(words, 0xFF) << 16 | md_words << 8 | (flags & 0xF) << 4
    return _WORD.pack(head) + main + inner


def _inner_packet(batch: IntBatch, i: int, stack: bytes, opts: WireOptions) -> bytes:
    """IPv4 + UDP (INT_TBD) + INT shim + INT-MD header + stack + original L4 + BTH."""
    proto, sport, dport = int(batch.proto[i]), int(batch.sport[i]), int(batch.dport[i])
    item_words = _item_bytes(int(batch.instructions[i]), opts.ds_words_per_hop) // 4
    if item_words > 31:
        raise IntWireError(f"report #{i}: {item_words} words per hop exceed Hop ML (31)")
    int_words = 3 + len(stack) // 4
    if int_words > 0xFF:
        raise IntWireError(f"report #{i}: an INT stack of {len(stack)} bytes is too long")
    npt, shim_field = (1, dport) if proto == 17 else (2, proto)
    tail = b"" if proto == 17 else struct.pack(">HH", sport, dport) + bytes(
        16 if proto == 6 else 4)
    tail += _BTH.pack(0x07, 0x40, 0xFFFF, sport & 0xFFFFFF, 0)
    flags = int(batch.flags[i])
    n_stack = len(stack) // max(item_words * 4, 1)
    md0 = (2 << 28 | (flags >> 6 & 1) << 27 | (flags >> 5 & 1) << 26 | (flags >> 4 & 1) << 25
           | item_words << 8 | max(opts.hop_limit - n_stack, 0))
    udp_len = 8 + 4 + int_words * 4 + len(tail)
    udp = _UDP_SHIM_MD.pack(
        sport, opts.int_udp_port, udp_len, 0, 1 << 28 | npt << 26 | int_words << 16 | shim_field,
        md0, int(batch.instructions[i]) << 16 | opts.domain_specific_id, opts.ds_instruction << 16)
    ip = _ipv4_header(20 + udp_len, int(batch.seq[i]), int(batch.src_ip[i]),
                      int(batch.dst_ip[i]))
    return ip + udp + stack + tail


def _ipv4_header(total: int, ident: int, src: int, dst: int) -> bytes:
    fields = [0x45, 26 << 2 | 0b10, total, ident & 0xFFFF, 0x4000, 64, 17, 0, src, dst]
    raw = _IPV4.pack(*fields)
    s = sum(struct.unpack(">10H", raw))
    s = (s & 0xFFFF) + (s >> 16)
    fields[7] = ~((s & 0xFFFF) + (s >> 16)) & 0xFFFF
    return _IPV4.pack(*fields)


def _item_bytes(bits: int, ds_words: int) -> int:
    base = sum((8 if 1 << k & EIGHT_BYTE_INSTRUCTIONS else 4) for k in range(1, 16)
               if bits & 1 << k)
    return base + (4 if bits & 1 else 0) + 4 * ds_words


def _item_dtype(bits: int, ds_words: int, *, cc: bool = True) -> np.dtype[Any]:
    """Big-endian layout of one metadata item for ``bits`` (reserved bits as filler)."""
    names, formats, offsets, at = [], [], [], 0
    for k in range(15, 0, -1):
        bit = 1 << k
        if not bits & bit:
            continue
        parts = _ITEMS.get(bit, (f"reserved_{k}",))
        width = 8 if bit & EIGHT_BYTE_INSTRUCTIONS else 4
        for j, name in enumerate(parts):
            names.append(name)
            formats.append(">u8" if width == 8 and len(parts) == 1 else ">u4")
            offsets.append(at + 4 * j)
        at += width
    names += [f"ds_{j}" for j in range(ds_words)]
    formats += [">u4"] * ds_words
    offsets += [at + 4 * j for j in range(ds_words)]
    at += 4 * ds_words
    if cc and bits & 1:
        names.append("cc")
        formats.append(">u4")
        offsets.append(at)
        at += 4
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": at})


def _fill(items: NDArray[Any], batch: IntBatch, hops: NDArray[np.intp]) -> None:
    """Write the hop columns of ``hops`` into structured ``items`` (missing fields: ones)."""
    col = {n: getattr(batch, n)[hops].astype(np.uint64) for n in (
        "node_id", "hop_latency_ns", "ingress_ts_ns", "egress_ts_ns", "l2_ingress_port",
        "l2_egress_port", "egress_tx_util", "checksum_complement")}
    col["l1_ports"] = (batch.ingress_port[hops].astype(np.uint64) << 16
                       | batch.egress_port[hops])
    col["queue"] = (batch.queue_id[hops].astype(np.uint64) << 24
                    | batch.queue_occupancy[hops] & 0xFFFFFF)
    col["buffer"] = (batch.buffer_id[hops].astype(np.uint64) << 24
                     | batch.buffer_occupancy[hops] & 0xFFFFFF)
    col["cc"] = col.pop("checksum_complement")
    for name in items.dtype.names or ():
        mask = 0xFFFFFFFFFFFFFFFF if items.dtype[name].itemsize == 8 else 0xFFFFFFFF
        items[name] = col[name] & np.uint64(mask) if name in col else mask


def _stacks(batch: IntBatch, n_stack: NDArray[Any], ds_words: int) -> list[bytes]:
    """Per report, its metadata stack: its first ``n_stack`` hops, newest first."""
    out = [b""] * batch.n_reports
    for bits in np.unique(batch.instructions).tolist():
        reps = np.flatnonzero(batch.instructions == bits)
        counts = n_stack[reps].astype(np.intp)
        h = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        hops = np.repeat(batch.hop_start[reps].astype(np.intp) + counts - 1, counts) - h
        items = np.zeros(len(hops), _item_dtype(bits, ds_words))
        _fill(items, batch, hops)
        raw, size = items.tobytes(), items.dtype.itemsize
        ends = np.cumsum(counts) * size
        for r, end, count in zip(reps.tolist(), ends.tolist(), counts.tolist(), strict=True):
            out[r] = raw[end - count * size:end]
    return out


def _own_metadata(batch: IntBatch, own: NDArray[np.bool_]) -> list[bytes]:
    """Per report, RepMdBits (2 bytes) + its baseline metadata, or b"" if it has none."""
    out = [b""] * batch.n_reports
    drop = batch.drop_reason != INVALID["drop_reason"]
    for i in np.flatnonzero(own | drop).tolist():
        bits = (int(batch.instructions[i]) & REPORT_MD_BITS if own[i] else 0) | int(drop[i])
        if not bits:
            continue
        item = np.zeros(1, _item_dtype(bits & ~1, 0))
        last = int(batch.hop_start[i]) + int(batch.hop_count[i]) - 1
        if own[i]:
            _fill(item, batch, np.array([last]))
        tail = b""
        if drop[i]:
            qid = int(batch.queue_id[last]) if own[i] and batch.hop_count[i] else 0xFF
            tail = bytes([qid, int(batch.drop_reason[i]), 0, 0])
        out[i] = bits.to_bytes(2, "big") + item.tobytes() + tail
    return out


__all__ = ["REPORT_MD_BITS", "IntWireError", "WireOptions", "encode_packets"]
