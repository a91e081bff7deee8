"""A PostgreSQL restart under a running pipeline worker: the worker waits it out,
then stores every frame sent meanwhile, none twice, and stays alive."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabricops.core.busio import BusFrameSink
from fabricops.core.liveness import Liveness
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig
from tests.conftest import missing_peer
from tests.faults.counting import Key, RestartablePostgres, stored_points

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def postgres() -> Iterator[RestartablePostgres]:
    base = Path(tempfile.mkdtemp(prefix="fabricops-pg-restart-"))
    try:
        server = RestartablePostgres(base)
    except Exception as exc:
        shutil.rmtree(base, ignore_errors=True)
        missing_peer(f"embedded PostgreSQL failed to start: {type(exc).__name__}: {exc}")
    yield server
    server.cleanup()
    shutil.rmtree(base, ignore_errors=True)


def _failures(worker: PipelineWorker, kind: str) -> float:
    return float(worker.loop.m_failures.labels("pipeline-worker", kind)._value.get())


def test_a_postgresql_restart_loses_nothing_and_stores_nothing_twice(postgres: Any) -> None:
    topo = fat_tree(k=4)
    sim = Simulator(topo, SimConfig(seed=6))
    sim.add_job(JobSpec(hosts=12, placement="random", compute_s=0.2, comm_bytes_per_nic=3e10))
    bus = MemoryBus()
    bus.start()
    store = Store(StoreConfig(url=postgres.uri, timeout_s=2))
    store.start()
    liveness = Liveness()
    worker = PipelineWorker(PipelineConfig(max_future_s=1e9, keyframe_interval_s=10,
                                           poll_timeout_s=0.05), bus, store, liveness=liveness)
    sink = BusFrameSink(bus)
    sent: set[Key] = set()
    feeding = threading.Event()
    feeding.set()

    def feed() -> None:
        while feeding.is_set():
            sim.step()
            frames = sim.frames()
            sent.update((f.device, f.source.value, f.ts_ns) for f in frames)
            sink.publish_frames(frames)
            time.sleep(0.05)

    feeder = threading.Thread(target=feed, daemon=True)
    worker.start()
    feeder.start()
    try:
        time.sleep(3)
        postgres.stop()
        time.sleep(8)  # frames keep coming while the database is away
        assert _failures(worker, "transient") > 0, "the worker noticed the outage"
        postgres.start()
        time.sleep(3)
        feeding.clear()
        feeder.join(timeout=30)
        deadline = time.monotonic() + 120
        while set(stored_points(store)) != sent and time.monotonic() < deadline:
            time.sleep(0.5)
        assert liveness.dead_workers() == []
    finally:
        feeding.clear()
        worker.stop()
    stored = stored_points(store)
    store.stop()
    lost = sent - set(stored)
    assert not lost, f"{len(lost)} of {len(sent)} frames lost"
    assert max(stored.values()) == 1, "a frame was stored twice"
    assert worker.dead_letters.count() == 0, "no valid frame is set aside for an outage"
