"""The INT receiver on loopback: batches reach the sink, defects are counted, a failing
sink does not stop it."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from fabricops.collectors.int_receiver import IntListSink, IntReceiver, IntReceiverConfig
from fabricops.core.intreport import IntBatch
from fabricops.core.liveness import Liveness
from fabricops.simulator.agents.int_wire import encode_packets
from tests.collectors.int_samples import COMMON_BITS, after_wire, differences, random_batch


def wait_for(done: Callable[[], bool], timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def send(port: int, packets: list[bytes]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for packet in packets:
            sock.sendto(packet, ("127.0.0.1", port))


def metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


def test_reports_arrive_in_batches_and_malformed_datagrams_are_counted() -> None:
    sent = random_batch(np.random.default_rng(3), 200, 5, COMMON_BITS, seq=np.arange(200))
    packets = encode_packets(sent)
    registry, sink = CollectorRegistry(), IntListSink()
    receiver = IntReceiver(IntReceiverConfig(batch_packets=64, max_wait_ms=5), sink, registry)
    receiver.start()
    try:
        assert receiver.port > 0
        send(receiver.port, [*packets[:100], b"\x10" * 40, packets[0][:-8], *packets[100:]])
        wait_for(lambda: metric(registry, "fabricops_int_receiver_packets_total") == 202)
    finally:
        receiver.stop()
    got = sink.batch()
    assert differences(got, after_wire(sent)) == []
    assert all(b.n_reports <= 64 for b in sink.batches)
    assert metric(registry, "fabricops_int_receiver_hop_records_total") == 1000
    assert metric(registry, "fabricops_int_receiver_malformed_packets_total",
                  reason="bad_version") == 1
    assert metric(registry, "fabricops_int_receiver_malformed_packets_total",
                  reason="truncated_report") == 1
    assert metric(registry, "fabricops_int_receiver_batches_total") >= 4
    assert metric(registry, "fabricops_int_receiver_lag_seconds_count") >= 4


class FlakySink:
    """Refuses its first batch."""

    def __init__(self) -> None:
        self.batches: list[IntBatch] = []
        self.calls = 0

    def publish_int(self, batch: IntBatch) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("store is away")
        self.batches.append(batch)


def test_a_sink_that_raises_is_counted_and_the_receiver_goes_on() -> None:
    packets = encode_packets(random_batch(np.random.default_rng(4), 2, 3, COMMON_BITS,
                                          seq=np.arange(2)))
    registry, sink = CollectorRegistry(), FlakySink()
    receiver = IntReceiver(IntReceiverConfig(batch_packets=1), sink, registry)
    receiver.start()
    try:
        send(receiver.port, packets[:1])
        wait_for(lambda: sink.calls == 1)
        send(receiver.port, packets[1:])
        wait_for(lambda: len(sink.batches) == 1)
    finally:
        receiver.stop()
    assert metric(registry, "fabricops_int_receiver_sink_errors_total") == 1


def test_a_batch_the_parser_fails_on_is_counted_and_the_receiver_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fabricops.collectors import int_receiver
    real = int_receiver.parse_packets
    calls = []

    def parser_with_a_defect(datagrams: list[bytes], **kw: Any) -> Any:
        calls.append(len(datagrams))
        if len(calls) == 1:
            raise IndexError("a defect the next release fixes")
        return real(datagrams, **kw)

    monkeypatch.setattr(int_receiver, "parse_packets", parser_with_a_defect)
    packets = encode_packets(random_batch(np.random.default_rng(5), 2, 3, COMMON_BITS,
                                          seq=np.arange(2)))
    registry, sink, liveness = CollectorRegistry(), IntListSink(), Liveness()
    receiver = IntReceiver(IntReceiverConfig(batch_packets=1), sink, registry, liveness)
    receiver.start()
    try:
        send(receiver.port, packets[:1])
        wait_for(lambda: len(calls) == 1, timeout_s=60)
        send(receiver.port, packets[1:])
        wait_for(lambda: sink.n_reports() == 1, timeout_s=60)
        assert [(s.name, s.alive) for s in liveness.states()] == [("int-receiver", True)]
    finally:
        receiver.stop()
    assert metric(registry, "fabricops_int_receiver_malformed_packets_total",
                  reason="parser_error") == 1
