"""Pipeline fixtures: a SQLite store in tmp_path, a small fabric feeding a worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fabricops.core.bus import DEFAULT_PREFIX, Message, Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.frame import Frame
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.worker import BatchResult, PipelineConfig, PipelineWorker
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'fabricops.db'}"))
    s.start()
    yield s
    s.stop()


def messages(*frames: Frame, offset: int = 0) -> list[Message]:
    """``frames`` as telemetry records of partition 0 from ``offset``, keyed by device."""
    topic = topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)
    return [Message(topic, 0, offset + i, f.device.encode(), f.encode(), 0)
            for i, f in enumerate(frames)]


def bare_worker(store: Store) -> PipelineWorker:
    """A worker on ``store`` that takes any frame time, fed by hand (``messages``)."""
    bus = MemoryBus()
    bus.start()
    return PipelineWorker(PipelineConfig(max_future_s=1e9), bus, store)


UPKEEP_T0 = 1_800_000_000 * 10**9
"""A boundary of windows and of spans of up to an hour."""


def hours_of_frames(store: Store, hours: float, t0_ns: int = UPKEEP_T0,
                    device: str = "leaf-9") -> None:
    """Frames of two ports of ``device`` every 20 s from ``t0_ns`` (a whole hour) to
    ``hours`` later (both ends included), written by a worker: one segment per minute."""
    ports = [f"{device}:eth1", f"{device}:eth2"]
    worker = bare_worker(store)
    worker.process(messages(*(
        Frame.build(device, t0_ns + t * 10**9, "gnmi", i, ports,
                    ["in_octets", "temperature_c"], [t * 1000, 40.0 + t / 4096])
        for i, t in enumerate(range(0, round(hours * 3600) + 1, 20)))))
    worker.flush()


def small_sim(seed: int = 1) -> Simulator:
    """A k=4 fat-tree (20 switches, 16 hosts) with one job streaming without pause."""
    sim = Simulator(fat_tree(k=4), SimConfig(seed=seed))
    sim.add_job(JobSpec(hosts=12, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    return sim


class Feed:
    """Runs a simulator tick by tick into a MemoryBus and a worker, in batches."""

    def __init__(self, sim: Simulator, store: Store, config: PipelineConfig | None = None,
                 bus: MemoryBus | None = None) -> None:
        self.sim = sim
        self.bus = bus or MemoryBus()
        self.bus.start()
        self.store = store
        self.config = config or PipelineConfig(max_future_s=1e9, keyframe_interval_s=60)
        self.worker = PipelineWorker(self.config, self.bus, store)
        self.sink = BusFrameSink(self.bus, DEFAULT_PREFIX)
        self.consumer = self.bus.subscribe([topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)],
                                           self.config.group)
        self.sent: list[Frame] = []

    def run(self, ticks: int, batch_ticks: int = 20) -> list[BatchResult]:
        results = []
        for start in range(0, ticks, batch_ticks):
            for _ in range(min(batch_ticks, ticks - start)):
                self.sim.step()
                frames = self.sim.frames()
                self.sent.extend(frames)
                self.sink.publish_frames(frames)
            results.append(self.worker.process(self.consumer.poll(0.0, 1_000_000)))
            self.consumer.commit(self.worker.windows.holds())
        return results
