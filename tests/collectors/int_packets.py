"""INT report packets built by hand from the spec tables, for the parser tests."""

from __future__ import annotations

import struct

from fabricops.core.intreport import Instruction

INT_TBD = 5000  # the UDP port both ends agree marks INT (the spec leaves it to deployments)
RECEIVED = 42


def ipv4(src: int, dst: int, payload_len: int, proto: int = 17) -> bytes:
    """Ver=4 IHL=5 | DSCP/ECN | Length || Identification | Flags/Offset || TTL | Proto | Csum."""
    return struct.pack(">BBHHHBBHII", 0x45, 26 << 2 | 2, 20 + payload_len, 0, 0x4000, 64, proto,
                       0, src, dst)


def int_over_udp(src: int, dst: int, sport: int, stack: bytes, hop_ml: int, bits: int, *,
                 npt: int = 1, shim_field: int = 4791, domain: int = 0,
                 tail: bytes = bytes(12)) -> bytes:
    """IPv4 + UDP (dport INT_TBD) + INT shim + INT-MD header + stack + what follows it."""
    words = 3 + len(stack) // 4
    #       Type 1    NPT          R R  Length         UDP port / IP proto
    shim = 1 << 28 | npt << 26 | 0 << 24 | words << 16 | shim_field
    #            Ver 2   D E M  Reserved  Hop ML       Remaining Hop Count
    md = struct.pack(">III", 2 << 28 | 0 << 25 | hop_ml << 8 | 6, bits << 16 | domain, 0)
    udp_len = 8 + 4 + len(md) + len(stack) + len(tail)
    udp = struct.pack(">HHHH", sport, INT_TBD, udp_len, 0)
    return ipv4(src, dst, udp_len) + udp + struct.pack(">I", shim) + md + stack + tail


def report(rep_type: int, in_type: int, inner: bytes, dqfi: int, main: bytes = b"",
           md_words: int = 0) -> bytes:
    """Individual Report Header (RepType, InType, Report Length, MD Length, D Q F I) + body."""
    words = (len(main) + len(inner)) // 4
    head = rep_type << 28 | in_type << 24 | words << 16 | md_words << 8 | dqfi << 4
    return struct.pack(">I", head) + main + inner


def group(node_id: int, seq: int, hw_id: int = 0) -> bytes:
    """Telemetry Report Group Header: Ver 2, hw_id, Sequence Number, Node ID."""
    return struct.pack(">II", 2 << 28 | hw_id << 22 | seq, node_id)


def own_metadata_packet() -> bytes:
    """A sink (node 259) reports a RoCEv2 packet: its own L1 ports and queue in RepMdBits,
    two upstream hops in the INT-MD stack (node id, L1 ports, latency, queue, egress ts)."""
    stack = b"".join(struct.pack(">IHHIIQ", node, ing, eg, lat, qid << 24 | occ, ts) for
                     node, ing, eg, lat, qid, occ, ts in (
                         (2, 5, 33, 900, 3, 50, 1_700_000_000_000_002_000),  # newest first
                         (1, 1, 49, 700, 3, 20, 1_700_000_000_000_001_000)))
    inner = int_over_udp(0x0A000005, 0x0A000009, 50123, stack, 6, 0xF400)
    main = struct.pack(">HHHH", 0x5000, 0, 0, 0)  # RepMdBits: bit 1 (L1 ports), bit 3 (queue)
    own = struct.pack(">HHI", 17, 18, 3 << 24 | 1000)
    return group(259, 1234, hw_id=5) + report(1, 4, inner, 0b0110, main + own, md_words=2)


VXLAN_STACK = b"".join(struct.pack(">IHH", node, ing, eg) for node, ing, eg in (
    (3, 7, 8), (2, 5, 6), (1, 3, 4)))


def vxlan_example_packet() -> bytes:
    """The spec's 'Embedded INT-MD over UDP in a VXLAN Packet' example, RepType Inner Only.

    The example's shim says Length=7 although it carries 3 hops of 2 words; the
    field's definition (header + stack words, shim excluded) gives 9, used here.
    """
    tail = bytes(8 + 14 + 20 + 20 + 2)  # VXLAN, inner Ethernet, IP, TCP, padding to a word
    inner = int_over_udp(0xC0A80101, 0xC0A80202, 56789, VXLAN_STACK, 2, 0xC000,
                         shim_field=4789, tail=tail)
    return group(3, 7) + report(0, 4, inner, 0b0010)


def wrapped_packets() -> list[bytes]:
    """The VXLAN example's packet behind Ethernet and VLAN tags, and inside TLVs."""
    inner = int_over_udp(0xC0A80101, 0xC0A80202, 56789, VXLAN_STACK, 2, 0xC000,
                         shim_field=4789)
    #                     dst MAC      src MAC      802.1ad tag       802.1Q tag        IPv4
    eth = bytes(6) + bytes(6) + struct.pack(">HHHHH", 0x88A8, 100, 0x8100, 200, 0x0800)
    padded = eth + inner + bytes(2)  # the truncated packet, padded to a word
    ds_tlv = struct.pack(">I", 0 << 28 | 1 << 16 | 0x0042) + bytes(4)  # one word of DS data
    ip_tlv = struct.pack(">I", 2 << 28 | (len(inner) // 4) << 16) + inner
    eth_tlv = struct.pack(">I", 1 << 28 | (len(padded) // 4) << 16) + padded
    return [group(3, 7) + report(0, 3, padded, 0b0010),
            group(3, 7) + report(0, 1, ds_tlv + ip_tlv, 0b0010),
            group(3, 7) + report(0, 1, ds_tlv + eth_tlv, 0b0010)]


BITS = [int(b) for b in Instruction]
