"""The INT report parser on bad input: fuzzed packets, defects counted by their reason, and
values a report cannot hold."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from fabricops.collectors.int_parse import REASONS, parse_packets
from fabricops.collectors.int_receiver import IntListSink, IntReceiver, IntReceiverConfig
from fabricops.core.intreport import INVALID, RANGE_REASONS, concat
from fabricops.simulator.agents.int_wire import WireOptions, encode_packets
from tests.collectors.int_packets import (
    BITS,
    INT_TBD,
    RECEIVED,
    group,
    int_over_udp,
    own_metadata_packet,
    report,
    vxlan_example_packet,
    wrapped_packets,
)
from tests.collectors.int_samples import COMMON_BITS, after_wire, differences, random_batch


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
