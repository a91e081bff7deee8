"""Hop layouts: the bounded layout cache, batches that mix many layouts, and the receiver
reading them from several sockets on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from fabricops.collectors.int_layouts import LayoutCache, compile_layouts, layout_key
from fabricops.collectors.int_parse import parse_packets
from fabricops.collectors.int_receiver import IntListSink, IntReceiver, IntReceiverConfig
from fabricops.collectors.int_socket import HAS_RECVMMSG, DatagramSocket, open_sockets
from fabricops.core.intreport import IntBatch, concat
from fabricops.core.liveness import Liveness
from fabricops.simulator.agents.int_wire import WireOptions, encode_packets
from tests.collectors.int_samples import after_wire, differences, random_batch
from tests.conftest import missing_peer

RECEIVED = 42
LATE_MARK = 0x7EADBEEF00000000
"""An egress timestamp the tests turn into one past 2**63 by setting its top bit."""


def keys(*bits: int) -> np.ndarray:
    return layout_key(np.array(bits), 4 * np.ones(len(bits), np.int64))


# ---- the cache ------------------------------------------------------------------------

def test_the_cache_keeps_the_most_recently_used_layouts_and_counts_what_it_does() -> None:
    cache = LayoutCache(capacity=3)
    a, b, c, d = (keys(k) for k in (0x8000, 0x4000, 0x2000, 0x1000))
    for k in (a, b, c):
        assert cache.lookup(k)[1].misses == 1
    assert cache.lookup(a)[1].hits == 1  # a is now newer than b and c
    assert cache.lookup(d)[1].evictions == 1  # b, the least recently used, goes
    assert cache.lookup(np.concatenate([a, c, d]))[1].hits == 3
    again = cache.lookup(b)[1]
    assert (again.hits, again.misses, again.evictions) == (0, 1, 1)
    assert len(cache) == 3


def test_rows_do_not_depend_on_what_the_cache_holds() -> None:
    rng = np.random.default_rng(1)
    bits = rng.choice(np.arange(1, 2**16), 50, replace=False)
    many = layout_key(bits, rng.integers(1, 32, 50) * 4)
    roomy, tight = LayoutCache(100), LayoutCache(2)
    seen = []
    for _ in range(2):
        rows, looked = tight.lookup(many)
        assert np.array_equal(rows, compile_layouts(many))
        assert np.array_equal(roomy.lookup(many)[0], rows)
        seen.append((looked.hits, looked.misses, looked.evictions))
    assert seen == [(0, 50, 0), (2, 48, 0)]  # more new layouts than room: used, not kept
    assert len(tight) == 2


def test_memory_is_fixed_by_the_capacity() -> None:
    cache = LayoutCache(64)
    size = cache.nbytes
    for start in range(0, 20_000, 1000):
        cache.lookup(layout_key(np.arange(start, start + 1000) % 2**16 + 1, 8))
    assert cache.nbytes == size
    assert len(cache) == 64
    with pytest.raises(ValueError, match="at least 1"):
        LayoutCache(0)


def test_a_layout_puts_each_field_after_the_bits_before_it() -> None:
    # node id (4) | L1 ports (4) | ingress ts (8) | egress ts (8) | checksum (4); Hop ML 8
    (row,) = compile_layouts(layout_key(np.array([0xCC01]), 32))
    assert row.tolist() == [0, 4, 6, -1, -1, -1, 8, 16, -1, -1, -1, -1, -1, 28]
    # RepMdBits: no node id of its own, no checksum complement
    (own,) = compile_layouts(layout_key(np.array([0xCC01]), 0, own=True))
    assert own.tolist() == [-1, 4, 6, -1, -1, -1, 8, 16, -1, -1, -1, -1, -1, -1]


# ---- batches of many layouts -----------------------------------------------------------

def mixed_packets(rng: np.random.Generator, n_layouts: int, per_layout: int,
                  sink_metadata: str = "stack") -> tuple[list[bytes], IntBatch]:
    """Packets of ``n_layouts`` random layouts (instruction bits, reserved bits too, and
    0-3 domain specific words per hop), shuffled; and what was sent, in ``seq`` order."""
    packets: list[bytes] = []
    sent: list[IntBatch] = []
    for i in range(n_layouts):
        seq = np.arange(i * per_layout, (i + 1) * per_layout)
        batch = random_batch(rng, per_layout, rng.integers(0, 7, per_layout).tolist(),
                             int(rng.integers(1, 2**16)), seq=seq,
                             sink=rng.integers(1, 2**32 - 1, per_layout))
        ds = int(rng.integers(0, 4))
        packets += encode_packets(batch, WireOptions(
            sink_metadata=sink_metadata, domain_specific_id=9 if ds else 0,
            ds_words_per_hop=ds))
        sent.append(batch)
    order = rng.permutation(len(packets))
    return [packets[i] for i in order], concat(sent)


def in_seq_order(batch: IntBatch) -> IntBatch:
    return batch.take(np.argsort(batch.seq, kind="stable"))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["stack", "report"])
def test_a_mixed_batch_decodes_as_its_packets_do_one_at_a_time(seed: int, mode: str) -> None:
    rng = np.random.default_rng(seed)
    packets, sent = mixed_packets(rng, 24, 4, mode)
    together, stats = parse_packets(packets, received_ns=RECEIVED, layouts=LayoutCache(5))
    alone = [parse_packets([p], received_ns=RECEIVED, layouts=LayoutCache(1))[0]
             for p in packets]
    assert stats.malformed == {}
    assert differences(together, concat(alone)) == []
    if mode == "stack":
        assert differences(in_seq_order(together), after_wire(sent, received_ns=RECEIVED)) == []


def with_late_timestamp(rng: np.random.Generator) -> bytes:
    """A well-formed packet one of whose hops says it left at 2**63 ns or later."""
    batch = random_batch(rng, 1, 3, 0x8401, seq=np.array([999]))
    cols = {n: getattr(batch, n).copy() for n in batch.__dataclass_fields__
            if n != "hop_start"}
    cols["egress_ts_ns"][-1] = LATE_MARK
    (packet,) = encode_packets(IntBatch.from_columns(cols))
    mark = LATE_MARK.to_bytes(8, "big")
    return packet.replace(mark, (LATE_MARK | 2**63).to_bytes(8, "big"))


def test_bad_packets_in_a_mixed_batch_are_set_aside_and_counted_and_the_rest_decodes() -> None:
    rng = np.random.default_rng(7)
    good, _ = mixed_packets(rng, 16, 3)
    garbage = [b"\x5a" + rng.bytes(int(n)) for n in rng.integers(0, 200, 10)]
    truncated = [p[:int(rng.integers(0, len(p)))] for p in good[:10]]
    late = [with_late_timestamp(rng) for _ in range(3)]
    mixed = [*good, *garbage, *truncated, *late]
    order = rng.permutation(len(mixed))
    batch, stats = parse_packets([mixed[i] for i in order], received_ns=RECEIVED)
    assert stats.malformed_total == len(garbage) + len(truncated)
    assert stats.malformed["bad_version"] >= len(garbage)
    assert stats.rejected == {"timestamp_out_of_range": len(late)}
    assert stats.parsed == len(good) + len(late)
    kept = [i for i in order.tolist() if i < len(good)]
    want = concat([parse_packets([good[i]], received_ns=RECEIVED)[0] for i in kept])
    assert differences(batch, want) == []


# ---- the receiver ------------------------------------------------------------------------

def metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


def wait_for(done: Callable[[], bool], timeout_s: float = 10.0) -> None:
    end = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_the_receiver_counts_layout_cache_hits_misses_and_evictions() -> None:
    rng = np.random.default_rng(3)
    packets, _ = mixed_packets(rng, 3, 2)
    registry = CollectorRegistry()
    receiver = IntReceiver(IntReceiverConfig(layout_cache_size=2), IntListSink(), registry)
    receiver.handle(packets)
    receiver.handle(packets[:1])
    prefix = "fabricops_int_receiver_layout_cache"
    assert metric(registry, f"{prefix}_misses_total") == 3
    assert metric(registry, f"{prefix}_hits_total") == 1
    assert metric(registry, f"{prefix}_evictions_total") == 0  # the surplus was not kept
    assert metric(registry, f"{prefix}_entries") == 2


@pytest.mark.parametrize("field", ["sockets", "layout_cache_size", "max_datagram_bytes"])
def test_receiver_config_refuses_out_of_range_values(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        IntReceiverConfig(**{field: 0})
    assert IntReceiverConfig().sockets >= 1


@pytest.mark.parametrize("call", ["recvmmsg", "recv_into"])
def test_several_sockets_share_the_port_and_every_report_arrives(call: str) -> None:
    if call == "recvmmsg" and not HAS_RECVMMSG:
        missing_peer("the C library has no recvmmsg here")
    rng = np.random.default_rng(11)
    packets, sent = mixed_packets(rng, 8, 12)
    too_long = b"\x20" + bytes(700)
    bad = [b"\x5a" * 40, packets[0][:20], too_long]
    registry, sink = CollectorRegistry(), IntListSink()
    config = IntReceiverConfig(sockets=3, receive_call=call, batch_packets=16, max_wait_ms=5,
                               max_datagram_bytes=512)
    receiver = IntReceiver(config, sink, registry)
    receiver.start()
    senders = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(32)]
    try:
        for i, packet in enumerate([*packets, *bad]):
            senders[i % len(senders)].sendto(packet, ("127.0.0.1", receiver.port))
        total = len(packets) + len(bad)
        wait_for(lambda: metric(registry, "fabricops_int_receiver_packets_total") == total)
    finally:
        for s in senders:
            s.close()
        receiver.stop()
    per_socket = [metric(registry, "fabricops_int_receiver_socket_packets_total", socket=str(i))
                  for i in range(3)]
    assert sum(per_socket) == total
    assert sum(n > 0 for n in per_socket) >= 2
    malformed = "fabricops_int_receiver_malformed_packets_total"
    assert metric(registry, malformed, reason="datagram_too_long") == 1
    assert metric(registry, malformed, reason="bad_version") == 1
    assert metric(registry, malformed, reason="truncated_report") == 1
    got, want = in_seq_order(sink.batch()), after_wire(sent)
    assert set(differences(got, want)) <= {"ts_ns"}  # the receive time where none was sent
    stamped = want.ts_ns != 0
    assert np.array_equal(got.ts_ns[stamped], want.ts_ns[stamped])


def test_datagrams_the_kernel_drops_are_counted() -> None:
    (sock,) = open_sockets("127.0.0.1", 0, 1, 65536)
    reader = DatagramSocket(sock, 4096, 512)
    if reader.kernel_drops() is None:
        missing_peer("this system does not tell a socket's drops (SO_MEMINFO, Linux)")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        for _ in range(3000):
            sender.sendto(bytes(300), sock.getsockname())
    kept = len(reader.receive().datagrams)
    drops = reader.kernel_drops()
    sock.close()
    assert drops is not None
    assert drops > 0
    assert kept + drops == 3000


def test_a_socket_that_fails_for_good_is_reported_dead_and_the_others_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_fill = DatagramSocket.fill
    broken: list[DatagramSocket] = []
    lock = threading.Lock()

    def fill(self: DatagramSocket, until: int | None = None) -> int:
        with lock:
            if not broken:
                broken.append(self)
        if broken[0] is self:  # the first socket to read fails for good
            raise OSError(9, "Bad file descriptor")
        return real_fill(self, until)

    monkeypatch.setattr(DatagramSocket, "fill", fill)
    packets, _ = mixed_packets(np.random.default_rng(5), 4, 8)
    registry, sink, liveness = CollectorRegistry(), IntListSink(), Liveness()
    receiver = IntReceiver(IntReceiverConfig(sockets=2, max_wait_ms=5), sink, registry, liveness)
    receiver.start()
    senders = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(32)]
    try:
        for i, packet in enumerate(packets * 4):
            senders[i % len(senders)].sendto(packet, ("127.0.0.1", receiver.port))
        (dead,) = liveness.wait_for_death(timeout_s=10)
        wait_for(lambda: sink.n_reports() > 0)
    finally:
        for s in senders:
            s.close()
        receiver.stop()
    assert dead.name == "int-receiver"
    assert "UDP socket" in dead.reason
    assert "Bad file descriptor" in dead.reason
