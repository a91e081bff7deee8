"""Sub-second sampling on the twin: a suspect port is sampled at 100 ms, so a 300 ms PFC
storm on it is seen as what it is; sampled at 1 s, the same storm is a 1 s smear.

The twin ticks every 100 ms and publishes each tick's frames on its board, as it does
for its protocol agents. A ``FrameSampler`` per pipeline (the collector of a push
source) listens there and forwards what is due to the bus; the pipeline worker turns
frames into events; in the adaptive pipeline the ``SamplingController`` publishes
policies on ``control.v2`` and a ``PolicyListener`` hands them to the sampler, as in
production. Everything is judged on the pipeline's own events, in device time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.collectors.policy import FrameSampler, FrameSamplerConfig, PolicyListener
from fabricops.core.bus import DEFAULT_PREFIX, Consumer, Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.frame import Frame
from fabricops.core.membus import MemoryBus
from fabricops.core.records import Event, EventKind, SamplingPolicy
from fabricops.pipeline.sampling import SamplingConfig, SamplingController
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig

S = 10**9
TICK_S = 0.1
INCAST_AT_S, STORM_AT_S, STORM_S, END_S = 33.0, 36.0, 0.3, 39.0
PAUSE = "pfc_rx_pause{prio=3}"


@dataclass
class Pipeline:
    """A sampler feeding a bus, a worker on it, and (adaptive) a controller and listener."""

    store: Store
    sampler: FrameSampler
    worker: PipelineWorker
    bus: MemoryBus
    consumer: Consumer
    registry: CollectorRegistry
    controller: SamplingController | None = None
    listener: PolicyListener | None = None
    events: list[Event] = field(default_factory=list)
    policies: list[SamplingPolicy] = field(default_factory=list)
    sent: list[tuple[str, int]] = field(default_factory=list)

    def collect(self, frames: Sequence[Frame]) -> None:
        """A board listener: offer one tick's frames to the sampler."""
        self.sent += [(f.device, f.ts_ns) for f in self.sampler.offer(frames)]

    def process(self) -> None:
        """Process what reached the bus; wait until the policies it raised have landed."""
        self.events += self.worker.process(self.consumer.poll(0.0, 1_000_000)).events
        self.consumer.commit()
        deadline = time.monotonic() + 10
        while self._applied() < len(self.policies) and time.monotonic() < deadline:
            time.sleep(0.002)
        assert self._applied() >= len(self.policies), "a policy did not reach the sampler"

    def _applied(self) -> float:
        return self.registry.get_sample_value("fabricops_sampler_policies_total") or 0.0

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.stop()
        self.bus.stop()
        self.store.stop()


def pipeline(tmp_path: Path, name: str, *, adaptive: bool) -> Pipeline:
    """A pipeline whose sampler starts every device at 1 s; ``adaptive`` follows policies."""
    registry = CollectorRegistry()
    bus = MemoryBus()
    bus.start()
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / name}.db"))
    store.start()
    sampler = FrameSampler(FrameSamplerConfig(interval_s=1.0), BusFrameSink(bus), registry)
    config = PipelineConfig(max_future_s=1e9, keyframe_interval_s=60)
    worker = PipelineWorker(config, bus, store)
    consumer = bus.subscribe([topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)], config.group)
    p = Pipeline(store, sampler, worker, bus, consumer, registry)
    if adaptive:
        controller = p.controller = SamplingController(SamplingConfig(), bus, fat_tree(k=4),
                                                       registry)
        worker.on_batch.append(
            lambda events, now: p.policies.extend(controller.observe(events, now)))
        p.listener = PolicyListener(bus, [sampler], group="collectors", registry=registry)
        p.listener.start()
    return p


def twin() -> tuple[Simulator, str, str]:
    """A healthy k=4 fat-tree at 100 ms ticks; a victim NIC, and its leaf port."""
    topo = fat_tree(k=4)
    sim = Simulator(topo, SimConfig(seed=1, tick_s=TICK_S))
    sim.add_job(JobSpec(hosts=12, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    host = sim.placement()["job-llm-01"][0]
    nic = next(p for p in topo.port_by_id if p.startswith(f"{host}:"))
    sim.add_fault(FaultSpec(type="incast", entity=nic, start_s=INCAST_AT_S,
                            params={"fan_in": 1, "rate_share": 0.5}))
    sim.add_fault(FaultSpec(type="pfc_storm", entity=nic, start_s=STORM_AT_S,
                            duration_s=STORM_S))
    return sim, nic, topo.peer_of[nic]


def episodes(events: list[Event], entity: str, metric: str) -> list[tuple[int, int, float]]:
    """(start ns, end ns, rate that opened it) of each threshold condition on one series."""
    out, opened, rate = [], None, 0.0
    for e in sorted(events, key=lambda e: e.ts_ns):
        if (e.entity, e.metric) != (entity, metric):
            continue
        if e.kind is EventKind.THRESHOLD:
            opened, rate = e.ts_ns, e.value
        elif opened is not None and e.kind is EventKind.CLEARED:
            out.append((opened, e.ts_ns, rate))
            opened = None
    return out


@dataclass
class Run:
    """One twin run fed to an adaptive pipeline and a fixed 1 s one."""

    t0_ns: int
    nic: str
    port: str
    fast: Pipeline
    slow: Pipeline
    intervals_at_storm: dict[str, float]
    wall_s: float

    @property
    def leaf(self) -> str:
        return self.port.split(":")[0]

    @property
    def host(self) -> str:
        return self.nic.split(":")[0]

    def at(self, seconds: float) -> int:
        """Device time ``seconds`` into the run, in ns."""
        return self.t0_ns + round(seconds * S)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    started = time.monotonic()
    tmp_path = tmp_path_factory.mktemp("subsecond")
    sim, nic, port = twin()
    fast = pipeline(tmp_path, "adaptive", adaptive=True)
    slow = pipeline(tmp_path, "one-second", adaptive=False)
    board = FrameBoard()
    board.add_listener(fast.collect)
    board.add_listener(slow.collect)
    intervals_at_storm: dict[str, float] = {}
    try:
        while sim.time_s < END_S - 1e-9:
            if abs(sim.time_s - STORM_AT_S) < 1e-9:
                intervals_at_storm = {d: fast.sampler.interval_of(d, sim.ts_ns)
                                      for d in sim.fabric.node_ids}
            sim.step()
            board.publish(sim.frames())
            fast.process()
            slow.process()
    finally:
        fast.stop()
        slow.stop()
    return Run(sim.config.start_time_ns, nic, port, fast, slow, intervals_at_storm,
               time.monotonic() - started)


def test_rising_ecn_marks_put_only_the_suspect_port_s_devices_at_100ms(run: Run) -> None:
    rising = [e for e in run.fast.events if e.entity == run.port
              and e.metric == "ecn_marked_pkts" and e.kind is EventKind.ANOMALY]
    assert rising, "rising ECN marks on the leaf port raise an anomaly"
    assert run.at(INCAST_AT_S) < rising[0].ts_ns <= run.at(INCAST_AT_S + 2)
    to_fast = [p for p in run.fast.policies if p.device == run.leaf and p.interval_s == 0.1]
    assert to_fast
    assert run.port in to_fast[0].reason
    assert run.intervals_at_storm[run.leaf] == run.intervals_at_storm[run.host] == 0.1
    others = {d: i for d, i in run.intervals_at_storm.items() if d not in (run.leaf, run.host)}
    assert set(others.values()) == {1.0}, "the rest stays at the collectors' own 1 s"
    sent = [(d, ts) for d, ts in run.fast.sent if run.at(1) <= ts < run.at(STORM_AT_S)]
    assert all(ts % S == 0 for d, ts in sent if d not in (run.leaf, run.host))
    leaf = [ts for d, ts in sent if d == run.leaf and ts > to_fast[0].ts_ns]
    assert leaf[:3] == [leaf[0] + k * S // 10 for k in range(3)], "the leaf: every 100 ms"
    suspects = run.fast.registry.get_sample_value("fabricops_sampling_suspect_devices")
    assert suspects is not None
    assert suspects >= 2


def test_at_100ms_the_storm_is_one_300ms_episode_of_pause_on_that_port(run: Run) -> None:
    seen = episodes(run.fast.events, run.port, PAUSE)
    assert len(seen) == 1, seen
    start, end, _ = seen[0]
    assert start == run.at(STORM_AT_S + TICK_S), "raised by the first 100 ms sample in it"
    assert end - start == round(STORM_S * S)


def test_at_1s_the_same_storm_is_a_1s_smear_at_a_third_of_the_rate(run: Run) -> None:
    """A 300 ms full pause and a 1 s pause at 30 % give the same 1 s sample."""
    _, _, full_rate = episodes(run.fast.events, run.port, PAUSE)[0]
    seen = episodes(run.slow.events, run.port, PAUSE)
    assert len(seen) == 1, seen
    start_1s, end_1s, rate_1s = seen[0]
    assert start_1s == run.at(math.ceil(STORM_AT_S + STORM_S)), "seen at the next whole second"
    assert end_1s - start_1s == S
    assert 0.25 < rate_1s / full_rate < 0.35
    assert run.wall_s < 30
