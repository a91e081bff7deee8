"""FrameSampler follows policies in device time; IntervalFloor holds a collector to its floor."""

from __future__ import annotations

import time

import numpy as np
from prometheus_client import CollectorRegistry

from fabricops.collectors.policy import (
    INTERVAL_FLOORS_S,
    FrameSampler,
    FrameSamplerConfig,
    IntervalFloor,
    PolicyListener,
)
from fabricops.collectors.snmp import SnmpPoller
from fabricops.core.bus import Topic, topic_name
from fabricops.core.frame import Frame, Source
from fabricops.core.membus import MemoryBus
from fabricops.core.records import SamplingPolicy
from fabricops.core.sinks import ListSink

MS = 10**6
T0 = 1_767_225_600 * 10**9


def frame(device: str, ts_ns: int) -> Frame:
    return Frame(device=device, ts_ns=ts_ns, source=Source.SIM, seq=ts_ns // (100 * MS),
                 entities=(f"{device}:eth1",), entity_idx=np.zeros(1, np.uint32),
                 metric=np.zeros(1, np.uint16), raw=np.zeros(1, np.uint64))


def ticks(sampler: FrameSampler, devices: tuple[str, ...], start_ms: int,
          stop_ms: int) -> list[tuple[str, int]]:
    """Offer every device one frame per 100 ms; (device, ms) of what went through."""
    out = []
    for ms in range(start_ms, stop_ms, 100):
        for f in sampler.offer([frame(d, T0 + ms * MS) for d in devices]):
            out.append((f.device, (f.ts_ns - T0) // MS))
    return out


def policy(device: str, interval_s: float, at_ms: int, expires_ms: int | None = None
           ) -> SamplingPolicy:
    return SamplingPolicy(device=device, interval_s=interval_s, ts_ns=T0 + at_ms * MS,
                          expires_ns=None if expires_ms is None else T0 + expires_ms * MS)


def test_frames_go_through_at_the_interval_in_force_in_device_time() -> None:
    sink, registry = ListSink(), CollectorRegistry()
    sampler = FrameSampler(FrameSamplerConfig(interval_s=1.0), sink, registry)
    assert ticks(sampler, ("leaf-1", "leaf-2"), 0, 2000) == [
        ("leaf-1", 0), ("leaf-2", 0), ("leaf-1", 1000), ("leaf-2", 1000)]
    sampler.apply_policy(policy("leaf-1", 0.1, 2000, expires_ms=2500))
    got = ticks(sampler, ("leaf-1", "leaf-2"), 2000, 4000)
    assert [ms for d, ms in got if d == "leaf-1"] == [2000, 2100, 2200, 2300, 2400, 3000]
    assert [ms for d, ms in got if d == "leaf-2"] == [2000, 3000]
    assert len(sink.frames) == 12
    assert registry.get_sample_value("fabricops_sampler_frames_total",
                                     {"outcome": "skipped"}) == 80 - 12


def test_the_newest_policy_wins_and_the_device_s_own_beats_the_default() -> None:
    sampler = FrameSampler(FrameSamplerConfig(interval_s=10.0), ListSink())
    sampler.apply_policy(policy("*", 1.0, 0))
    sampler.apply_policy(policy("leaf-1", 0.1, 5))
    sampler.apply_policy(policy("leaf-1", 1.0, 3))  # older: ignored
    assert sampler.interval_of("leaf-1", T0) == 0.1
    assert sampler.interval_of("leaf-2", T0) == 1.0


class Recorder:
    def __init__(self) -> None:
        self.policies: list[SamplingPolicy] = []

    def apply_policy(self, policy: SamplingPolicy) -> None:
        self.policies.append(policy)


def test_a_floor_raises_faster_policies_and_counts_them() -> None:
    snmp, registry = Recorder(), CollectorRegistry()
    floor = IntervalFloor(snmp, 1.0, name="snmp", registry=registry)
    floor.apply_policy(policy("leaf-1", 0.1, 0))
    floor.apply_policy(policy("leaf-1", 10.0, 1))
    assert [p.interval_s for p in snmp.policies] == [1.0, 10.0]
    assert "asked 0.1 s" in snmp.policies[0].reason
    assert registry.get_sample_value("fabricops_policy_floored_total",
                                     {"collector": "snmp"}) == 1


class Poller(Recorder):
    """A collector type with a floor."""


def test_the_listener_holds_collector_types_with_a_floor_to_it() -> None:
    assert INTERVAL_FLOORS_S[SnmpPoller] == 1.0
    bus = MemoryBus()
    bus.start()
    streaming, poller = Recorder(), Poller()
    listener = PolicyListener(bus, [streaming, poller], group="collectors",
                              floors_s={Poller: 1.0})
    listener.start()
    try:
        bus.publish(topic_name(Topic.CONTROL), b"leaf-1", [policy("leaf-1", 0.1, 0).encode()])
        deadline = time.monotonic() + 5
        while not poller.policies and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        listener.stop()
        bus.stop()
    assert [p.interval_s for p in streaming.policies] == [0.1]
    assert [p.interval_s for p in poller.policies] == [1.0]
