"""The INT report parser: packets built by hand from the spec tables, encoder round trips,
fuzzed packets, and batches that mix good and bad packets."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from fabricops.collectors.int_headers import Wire
from fabricops.collectors.int_parse import REASONS, parse_packets
from fabricops.collectors.int_receiver import IntListSink, IntReceiver, IntReceiverConfig
from fabricops.core.intreport import INVALID, RANGE_REASONS, Instruction, IntBatch, concat
from fabricops.simulator.agents.int_wire import WireOptions, encode_packets
from tests.collectors.int_samples import COMMON_BITS, after_wire, differences, random_batch

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


def test_hand_built_report_with_own_metadata_parses_field_by_field() -> None:
    batch, stats = parse_packets([own_metadata_packet()], int_udp_port=INT_TBD,
                                 received_ns=RECEIVED)
    assert (stats.packets, stats.parsed, stats.reports, stats.hops) == (1, 1, 1, 3)
    r = next(batch.reports())
    assert r["sink"] == 259
    assert r["seq"] == 1234
    assert r["ts_ns"] == RECEIVED
    assert r["flow"] == {"src_ip": "10.0.0.5", "dst_ip": "10.0.0.9", "sport": 50123,
                         "dport": 4791, "proto": 17}
    assert r["flags"] == ["tracked_flow", "congested_queue"]
    assert batch.instructions[0] == 0xF400
    assert r["hops"] == [
        {"node_id": 1, "node": 1, "ingress_port": 1, "egress_port": 49, "hop_latency_ns": 700,
         "queue_id": 3, "queue_occupancy": 20, "egress_ts_ns": 1_700_000_000_000_001_000},
        {"node_id": 2, "node": 2, "ingress_port": 5, "egress_port": 33, "hop_latency_ns": 900,
         "queue_id": 3, "queue_occupancy": 50, "egress_ts_ns": 1_700_000_000_000_002_000},
        {"node_id": 259, "node": 259, "ingress_port": 17, "egress_port": 18, "queue_id": 3,
         "queue_occupancy": 1000},
    ]


def test_spec_vxlan_example_parses_to_its_three_hops() -> None:
    batch, stats = parse_packets([vxlan_example_packet()], int_udp_port=INT_TBD,
                                 received_ns=RECEIVED)
    assert stats.malformed == {}
    assert stats.reports == 1
    r = next(batch.reports({3: "switch3"}))
    assert r["sink"] == "switch3"
    assert r["seq"] == 7
    assert r["flow"] == {"src_ip": "192.168.1.1", "dst_ip": "192.168.2.2", "sport": 56789,
                         "dport": 4789, "proto": 17}
    assert [(h["node_id"], h["ingress_port"], h["egress_port"]) for h in r["hops"]] == [
        (1, 3, 4), (2, 5, 6), (3, 7, 8)]
    assert r["hops"][2]["node"] == "switch3"


def test_coalesced_hand_built_reports_are_all_read() -> None:
    first, second = own_metadata_packet(), vxlan_example_packet()
    both = first + second[8:]  # second packet's individual report after the first's
    batch, stats = parse_packets([both], int_udp_port=INT_TBD)
    assert stats.reports == 2
    assert stats.hops == 6
    assert batch.sink.tolist() == [259, 259]
    assert batch.seq.tolist() == [1234, 1234]
    assert batch.dport.tolist() == [4791, 4789]


def parse_one(packet: bytes) -> IntBatch:
    batch, stats = parse_packets([packet], int_udp_port=INT_TBD)
    assert stats.malformed == {}
    return batch


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


def test_inner_ethernet_with_vlan_tags_and_tlv_wrapping_are_followed() -> None:
    want = parse_one(vxlan_example_packet())
    for packet in wrapped_packets():
        assert differences(parse_one(packet), want) == []


def test_npt_2_restores_the_ip_protocol_and_reads_the_original_l4_header() -> None:
    tcp = struct.pack(">HH", 40000, 443) + bytes(16)
    inner = int_over_udp(0x0A000001, 0x0A000002, 777, VXLAN_STACK, 2, 0xC000, npt=2,
                         shim_field=6, tail=tcp)
    (r,) = parse_one(group(3, 1) + report(0, 4, inner, 0b0010)).reports()
    assert r["flow"] == {"src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "sport": 40000,
                         "dport": 443, "proto": 6}


def test_source_only_domain_metadata_is_skipped_and_its_checksum_complement_read() -> None:
    # Domain 7: each hop adds one DS word (Hop ML 3 = node id + DS + checksum complement);
    # the source adds one more, source-only, word.
    stack = struct.pack(">III", 2, 0xD5D5D5D5, 0xC2C2C2C2) + struct.pack(
        ">IIII", 1, 0xD5D5D5D5, 0x50505050, 0xC1C1C1C1)
    inner = int_over_udp(0x0A000001, 0x0A000002, 777, stack, 3, 0x8001, domain=7)
    batch = parse_one(group(2, 1) + report(0, 4, inner, 0b0010))
    assert batch.node_id.tolist() == [1, 2]
    assert batch.checksum_complement.tolist() == [0xC1C1C1C1, 0xC2C2C2C2]


BITS = [int(b) for b in Instruction]
RESERVED_BIT = 0x0010


@pytest.mark.parametrize("bits", [*BITS, sum(BITS), sum(BITS) | RESERVED_BIT, COMMON_BITS],
                         ids=lambda b: f"0x{b:04x}")
@pytest.mark.parametrize("hops", [1, 3, 8])
def test_round_trip_of_every_instruction_bit(bits: int, hops: int) -> None:
    rng = np.random.default_rng(bits * 31 + hops)
    proto = np.tile([17, 17, 6, 47], 3)  # UDP (NPT 1), TCP and GRE (NPT 2)
    ports = np.where(proto == 47, 0, rng.integers(1, 2**16, (2, 12)))
    sent = random_batch(rng, 12, hops, bits, proto=proto, sport=ports[0],
                        dport=np.where(proto == 17, 4791, ports[1]))
    packets = encode_packets(sent, WireOptions(hop_limit=hops))
    got, stats = parse_packets(packets, received_ns=RECEIVED)
    assert stats.malformed == {}
    assert differences(got, after_wire(sent, received_ns=RECEIVED)) == []


@pytest.mark.parametrize("bits", [*BITS, sum(BITS)], ids=lambda b: f"0x{b:04x}")
def test_round_trip_with_the_sink_hop_in_report_metadata(bits: int) -> None:
    rng = np.random.default_rng(bits)
    sent = random_batch(rng, 10, [1, 2, 5, 1, 3, 4, 2, 6, 1, 2], bits)
    packets = encode_packets(sent, WireOptions(sink_metadata="report"))
    got, stats = parse_packets(packets, received_ns=RECEIVED)
    assert stats.malformed == {}
    own = bits & 0x7F80 != 0  # only bits 1-8 travel in RepMdBits
    if not own:
        assert differences(got, after_wire(sent, received_ns=RECEIVED)) == []
        return
    assert differences(got, after_wire(sent, own_hop=True, received_ns=RECEIVED)) == []


def test_round_trip_of_coalesced_reports_drop_reasons_and_domain_metadata() -> None:
    rng = np.random.default_rng(5)
    n = 40
    sent = random_batch(rng, n, rng.integers(0, 7, n).tolist(), sum(BITS),
                        sink=np.repeat([7, 8], n // 2), seq=np.repeat(np.arange(8), 5),
                        drop_reason=np.where(np.arange(n) % 3 == 0, 71, INVALID["drop_reason"]),
                        flags=rng.integers(0, 128, n))
    opts = WireOptions(domain_specific_id=9, ds_instruction=0x8000, ds_words_per_hop=2)
    packets = encode_packets(sent, opts)
    assert len(packets) == 8
    got, stats = parse_packets(packets)
    assert stats.malformed == {}
    assert stats.reports == n
    assert differences(got, after_wire(sent)) == []


def test_a_long_report_takes_the_rest_of_its_packet() -> None:
    rng = np.random.default_rng(6)
    sent = random_batch(rng, 3, [19, 1, 19], sum(BITS), sink=np.full(3, 4), seq=np.zeros(3))
    packets = encode_packets(sent, WireOptions(max_payload_bytes=65507))
    assert len(packets) == 2
    assert packets[0][9] == 0xFF
    got, stats = parse_packets(packets)
    assert stats.malformed == {}
    assert differences(got, after_wire(sent)) == []


def mutate(rng: np.random.Generator, packet: bytes) -> bytes:
    """Truncate, flip bits, or both."""
    data = bytearray(packet)
    kind = rng.integers(0, 3)
    if kind != 0:
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(0, len(data)))
            data[i] ^= 1 << int(rng.integers(0, 8))
    if kind != 1:
        del data[int(rng.integers(0, len(data))):]
    return bytes(data)


def valid_packets(rng: np.random.Generator) -> list[bytes]:
    out: list[bytes] = []
    for mode in ("stack", "report"):
        for bits in (COMMON_BITS, sum(BITS), 0x8000, 0xC000 | 0x0001):
            sent = random_batch(rng, 30, rng.integers(0, 6, 30).tolist(), bits,
                                sink=np.repeat([1, 2, 3], 10), seq=np.arange(30) // 3)
            out += encode_packets(sent, WireOptions(sink_metadata=mode))
    return [*out, own_metadata_packet(), vxlan_example_packet(), *wrapped_packets()]


def test_fuzzed_packets_are_parsed_or_counted_and_never_raise() -> None:
    rng = np.random.default_rng(20240601)
    base = valid_packets(rng)
    fuzzed = [mutate(rng, base[int(i)]) for i in rng.integers(0, len(base), 100_000)]
    parsed = malformed = 0
    for start in range(0, len(fuzzed), 5000):
        _, stats = parse_packets(fuzzed[start:start + 5000])
        assert set(stats.malformed) <= set(REASONS)
        parsed += stats.parsed
        malformed += stats.malformed_total
    assert parsed + malformed == len(fuzzed)
    assert malformed > 50_000


def test_batch_parse_equals_packet_by_packet_parse_on_fuzzed_packets() -> None:
    rng = np.random.default_rng(7)
    base = valid_packets(rng)
    fuzzed = [mutate(rng, base[int(i)]) for i in rng.integers(0, len(base), 1500)] + base
    together, stats = parse_packets(fuzzed)
    one_by_one = [parse_packets([p]) for p in fuzzed]
    assert differences(together, concat([b for b, _ in one_by_one])) == []
    assert stats.parsed == sum(s.parsed for _, s in one_by_one)


def bad_packets(good: bytes) -> dict[str, bytes]:
    """One defective variant of ``good`` per reason (a stack-mode RoCEv2 report)."""
    def at(offset: int, value: int, size: int = 1, data: bytes = good) -> bytes:
        return data[:offset] + value.to_bytes(size, "big") + data[offset + size:]

    words = good[9]
    return {
        "short_packet": good[:10],
        "bad_version": at(0, 0x10 | good[0] & 0x0F),
        "truncated_report": good[:-4],
        "bad_report_length": at(9, 0xFF),
        "bad_md_length": at(8, 0x14),
        "bad_tlv": at(8, 0x01),
        "unsupported_report_type": at(8, 0x24),
        "unsupported_inner_type": at(8, 0x07),
        "bad_inner_ip": at(12, 0x65),
        "unsupported_inner_ip": at(8, 0x05),
        "truncated_inner": at(9, 3)[:24],
        "unsupported_int_type": at(40, 0x34),
        "bad_int_header": at(44, 0x30),
        "truncated_int": at(41, 0xF0),
        "bad_hop_ml": at(46, 0x07 | good[46] & 0xE0),
        "bad_stack_length": at(41, (good[41] + 1) & 0xFF, data=at(9, words + 1) + bytes(4)),
        "too_many_reports": good[:8] + b"\x00\x00\x00\x00" * 300,
    }


def test_each_defect_is_counted_under_its_reason_and_good_packets_are_kept() -> None:
    rng = np.random.default_rng(11)
    sent = random_batch(rng, 6, 3, COMMON_BITS, seq=np.arange(6))
    good = encode_packets(sent)
    bad = bad_packets(good[0])
    assert set(bad) == set(REASONS)
    mixed: list[bytes] = []
    for i, packet in enumerate(bad.values()):
        mixed += [packet, good[i % len(good)]]
    got, stats = parse_packets(mixed)
    assert stats.malformed == dict.fromkeys(bad, 1)
    assert stats.parsed == len(bad)
    kept = [i % len(good) for i in range(len(bad))]
    assert differences(got, after_wire(sent).take(kept)) == []


def test_empty_input_and_reports_without_int() -> None:
    batch, stats = parse_packets([])
    assert batch == IntBatch.empty()
    assert stats.packets == 0
    inner_only_no_packet = struct.pack(">III", 2 << 28, 1, 0 << 24)
    batch, stats = parse_packets([inner_only_no_packet])
    assert stats.parsed == 1
    assert stats.empty_reports == 1
    assert batch.n_reports == 0


# ---- values a report cannot hold ----------------------------------------------------

TOO_LATE = 2**63


def two_hop_packet(first_ts: int, last_ts: int, seq: int = 1) -> bytes:
    """Node 2 reports (Inner Only) a packet whose stack has two hops, each with its
    egress timestamp; the report's time is the last hop's."""
    stack = b"".join(struct.pack(">IHHIIQ", node, ing, eg, lat, 3 << 24 | occ, ts) for
                     node, ing, eg, lat, occ, ts in ((2, 5, 33, 900, 50, last_ts),
                                                     (1, 1, 49, 700, 20, first_ts)))
    inner = int_over_udp(0x0A000005, 0x0A000009, 50123, stack, 6, 0xF400)
    return group(2, seq) + report(0, 4, inner, 0b0010)


@pytest.mark.parametrize(("first_ts", "last_ts"), [
    (1_000, TOO_LATE), (TOO_LATE, 2_000), (1_000, 2**64 - 2), (2**64 - 2, 2**64 - 2)])
def test_a_report_with_a_timestamp_past_2_63_is_rejected_and_counted(
        first_ts: int, last_ts: int) -> None:
    batch, stats = parse_packets([two_hop_packet(first_ts, last_ts)], int_udp_port=INT_TBD,
                                 received_ns=RECEIVED)
    assert batch.n_reports == 0
    assert (stats.parsed, stats.malformed, stats.reports, stats.hops) == (1, {}, 0, 0)
    assert stats.rejected == {"timestamp_out_of_range": 1}
    assert stats.rejected_total == 1


def test_a_timestamp_not_reported_falls_back_to_the_receive_time() -> None:
    not_reported = INVALID["egress_ts_ns"]
    batch, stats = parse_packets([two_hop_packet(not_reported, not_reported)],
                                 int_udp_port=INT_TBD, received_ns=RECEIVED)
    assert stats.rejected == {}
    assert batch.ts_ns.tolist() == [RECEIVED]
    batch, stats = parse_packets([two_hop_packet(not_reported, not_reported)],
                                 int_udp_port=INT_TBD, received_ns=TOO_LATE)
    assert (batch.n_reports, stats.rejected) == (0, {"timestamp_out_of_range": 1})


def test_only_the_bad_report_of_a_packet_is_set_aside() -> None:
    good, bad = two_hop_packet(1_000, 2_000), two_hop_packet(1_000, TOO_LATE)
    both = bad + good[8:]  # the good individual report after the bad one, same group
    batch, stats = parse_packets([good, bad, both, good], int_udp_port=INT_TBD)
    assert (stats.parsed, stats.reports, stats.hops) == (4, 3, 6)
    assert stats.rejected == {"timestamp_out_of_range": 2}
    assert batch.ts_ns.tolist() == [2_000] * 3
    assert batch.hop_start.tolist() == [0, 2, 4]


def test_fuzzed_timestamps_never_reach_a_batch() -> None:
    rng = np.random.default_rng(99)
    base = valid_packets(rng)
    fuzzed = [mutate(rng, base[int(i)]) for i in rng.integers(0, len(base), 20_000)]
    batch, stats = parse_packets(fuzzed)
    assert stats.parsed + stats.malformed_total == len(fuzzed)
    assert set(stats.rejected) <= set(RANGE_REASONS)
    assert stats.rejected_total > 0
    assert int(batch.ts_ns.max()) < TOO_LATE
    for name in ("ingress_ts_ns", "egress_ts_ns"):
        column = getattr(batch, name)
        assert int(column[column != INVALID[name]].max(initial=0)) < TOO_LATE


@given(st.binary(max_size=120), st.binary(max_size=60))
def test_random_bytes_are_parsed_or_counted_and_never_raise(head: bytes, tail: bytes) -> None:
    packets = [head, group(2, 1) + tail, two_hop_packet(1, 2)[:len(tail) + 8] + head]
    batch, stats = parse_packets(packets, int_udp_port=INT_TBD)
    assert stats.parsed + stats.malformed_total == len(packets)
    assert stats.reports == batch.n_reports


def test_the_receiver_counts_rejected_reports_by_reason() -> None:
    registry, sink = CollectorRegistry(), IntListSink()
    receiver = IntReceiver(IntReceiverConfig(int_udp_port=INT_TBD), sink, registry)
    stats = receiver.handle([two_hop_packet(1, TOO_LATE), two_hop_packet(1, 2)])
    assert stats.rejected == {"timestamp_out_of_range": 1}
    assert registry.get_sample_value("fabricops_int_receiver_rejected_reports_total",
                                     {"reason": "timestamp_out_of_range"}) == 1
    assert registry.get_sample_value("fabricops_int_receiver_reports_total") == 1
    assert sink.batch().ts_ns.tolist() == [2]


def test_hop_items_read_as_rows_of_words_with_zeros_past_the_buffer() -> None:
    wire = Wire([bytes(range(1, 13)), bytes([0xAB, 0xCD])])
    words = wire.words(np.array([0, 2, 12, 26]), 8, ones=1)
    assert words.dtype == np.uint32
    assert words.tolist() == [
        [0x01020304, 0x05060708, 0xFFFFFFFF],
        [0x03040506, 0x0708090A, 0xFFFFFFFF],
        [0xABCD0000, 0, 0xFFFFFFFF],  # the padding after the last packet
        [0, 0, 0xFFFFFFFF],  # past the buffer's end
    ]
    assert wire.words(np.array([4]), 4).tolist() == [[0x05060708]]
