"""Sampling policies on control.v1 reach every collector; INT batches go out per sink."""

from __future__ import annotations

import time

import numpy as np

from fabricops.collectors.policy import PolicyListener
from fabricops.core.bus import Topic, topic_name
from fabricops.core.busio import BusIntSink
from fabricops.core.intreport import IntBatch
from fabricops.core.membus import MemoryBus
from fabricops.core.records import SamplingPolicy

from .int_samples import random_batch


class Recorder:
    def __init__(self) -> None:
        self.policies: list[SamplingPolicy] = []

    def apply_policy(self, policy: SamplingPolicy) -> None:
        self.policies.append(policy)


def test_policies_reach_every_collector_and_junk_is_counted() -> None:
    bus = MemoryBus()
    bus.start()
    snmp, gnmi = Recorder(), Recorder()
    listener = PolicyListener(bus, [snmp, gnmi], group="collectors-1")
    listener.start()
    try:
        policy = SamplingPolicy(device="leaf-3", interval_s=1.0, ts_ns=1, reason="fcs errors")
        control = topic_name(Topic.CONTROL)
        bus.publish(control, b"leaf-3", [b"{not json", policy.encode()])
        deadline = time.monotonic() + 5
        while not gnmi.policies and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        listener.stop()
        bus.stop()
    assert snmp.policies == [policy]
    assert gnmi.policies == [policy]
    assert listener.rejected._value.get() == 1


def test_int_batches_are_published_one_record_per_sink() -> None:
    rng = np.random.default_rng(1)
    batch = random_batch(rng, 12, 4, 0xFD00, sink=rng.integers(1, 4, 12))
    bus = MemoryBus()
    bus.start()
    consumer = bus.subscribe([topic_name(Topic.INT)], "g")
    BusIntSink(bus).publish_int(batch)
    msgs = consumer.poll(timeout_s=1.0)
    bus.stop()
    sinks = sorted(set(batch.sink.tolist()))
    assert sorted(int(m.key) for m in msgs) == sinks
    total = sum(IntBatch.decode(m.value).n_reports for m in msgs)
    assert total == batch.n_reports
    for m in msgs:
        assert np.all(IntBatch.decode(m.value).sink == int(m.key))
