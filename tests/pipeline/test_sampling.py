"""Adaptive sampling: implicated devices fast within two intervals, slow once calm."""

from __future__ import annotations

from fabricops.core.bus import DEFAULT_PREFIX, Topic, record_headers, topic_name
from fabricops.core.membus import MemoryBus
from fabricops.core.records import Event, EventKind, SamplingPolicy
from fabricops.pipeline.sampling import SamplingConfig, SamplingController
from fabricops.pipeline.worker import PipelineConfig
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.faults import FaultSpec
from fabricops.store.store import Store

from .conftest import Feed, small_sim

S = 10**9


def _policies(bus: MemoryBus) -> list[SamplingPolicy]:
    consumer = bus.subscribe([topic_name(Topic.CONTROL, DEFAULT_PREFIX)], "reader")
    records = consumer.poll(0.0, 100_000)
    got = [SamplingPolicy.decode(m.value) for m in records]
    consumer.close()
    assert [m.key for m in records] == [p.device.encode() for p in got], "keyed by device"
    assert {m.headers for m in records} <= {record_headers(Topic.CONTROL, "pipeline")}
    return got


def test_a_fault_speeds_up_its_devices_and_neighbours_then_they_slow_down(store: Store) -> None:
    sim = small_sim()
    start = 300
    port = "agg-0-0:eth1"  # the aggregation end of a leaf uplink
    sim.add_fault(FaultSpec(type="gray_loss", entity="agg-0-0:eth1~leaf-0-0:eth3",
                            start_s=start, duration_s=120, params={"loss_rate": 1e-2}))
    feed = Feed(sim, store, PipelineConfig(max_future_s=1e9))
    config = SamplingConfig(slow_interval_s=10, fast_interval_s=1, calm_s=60,
                            announce_default=True)
    controller = SamplingController(config, feed.bus, fat_tree(k=4))
    controller.start(now_ns=sim.ts_ns)
    hot_at: dict[str, int] = {}
    calm_at: dict[str, int] = {}

    def watch(events: object, now_ns: int) -> None:
        for p in controller.observe(events, now_ns):  # type: ignore[arg-type]
            (hot_at if p.interval_s == 1 else calm_at).setdefault(p.device, p.ts_ns)

    feed.worker.on_batch.append(watch)
    feed.run(start, batch_ticks=1)
    assert hot_at == {}, "nothing is implicated before the fault"
    t0 = sim.ts_ns
    feed.run(600, batch_ticks=1)
    assert {"leaf-0-0", "agg-0-0"} <= hot_at.keys(), hot_at
    for device in ("leaf-0-0", "agg-0-0"):
        assert hot_at[device] - t0 <= 2 * config.slow_interval_s * S, device
        assert calm_at[device] > t0 + 120 * S, "fast for as long as the fault lasts"
        assert calm_at[device] - (t0 + 120 * S) <= (config.calm_s + 30) * S
    assert controller.hot == frozenset()
    published = _policies(feed.bus)
    assert [p.interval_s for p in published if p.device == "*"] == [10.0]
    assert sorted(p.device for p in published if p.interval_s == 1) == sorted(hot_at)
    assert port.split(":")[0] in hot_at


def test_a_state_change_is_a_moment_of_trouble_then_calm() -> None:
    bus = MemoryBus()
    bus.start()
    controller = SamplingController(SamplingConfig(calm_s=30), bus)
    flap = Event(ts_ns=100 * S, device="leaf-1", entity="leaf-1:eth2", metric="oper_status",
                 kind=EventKind.STATE_CHANGE, value=2)
    assert [p.device for p in controller.observe([flap], 100 * S)] == ["leaf-1"]
    assert controller.observe([], 120 * S) == []
    slow = controller.observe([], 131 * S)
    assert [(p.device, p.interval_s) for p in slow] == [("leaf-1", 10.0)]
