"""The INT report parser on good packets: built by hand from the spec tables, and encoder
round trips."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from fabricops.collectors.int_headers import Wire
from fabricops.collectors.int_parse import parse_packets
from fabricops.core.intreport import INVALID, IntBatch
from fabricops.simulator.agents.int_wire import WireOptions, encode_packets
from tests.collectors.int_packets import (
    BITS,
    INT_TBD,
    RECEIVED,
    VXLAN_STACK,
    group,
    int_over_udp,
    own_metadata_packet,
    report,
    vxlan_example_packet,
    wrapped_packets,
)
from tests.collectors.int_samples import COMMON_BITS, after_wire, differences, random_batch


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


def test_empty_input_and_reports_without_int() -> None:
    batch, stats = parse_packets([])
    assert batch == IntBatch.empty()
    assert stats.packets == 0
    inner_only_no_packet = struct.pack(">III", 2 << 28, 1, 0 << 24)
    batch, stats = parse_packets([inner_only_no_packet])
    assert stats.parsed == 1
    assert stats.empty_reports == 1
    assert batch.n_reports == 0


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
