"""``kill -9`` of a pipeline worker process, three times while frames stream in over a
real Kafka-protocol broker: every frame sent is stored, none twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.core.busio import BusFrameSink
from fabricops.core.kafkabus import KafkaBus
from fabricops.core.topology import save_topology
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig
from tests.faults.counting import Key, stored_points

from .conftest import TansuBroker, bus_config, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _serve_pipeline(bootstrap: str, db: str, topology: Path, log: Path,
                    metrics_port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FABRICOPS_BUS__KIND": "kafka"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "fabricops.cli.main", "serve", "pipeline", "--bus", "kafka",
             "-b", bootstrap, "--db", db, "--topology", str(topology),
             "--metrics-port", str(metrics_port)],
            stdout=out, stderr=subprocess.STDOUT, env=env)


def _frames_taken(metrics_port: int) -> float:
    """Frames the worker process has stepped (its own counter, from 0 at each start)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                    timeout=2) as reply:
            text = reply.read().decode()
    except OSError:
        return 0.0
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("fabricops_pipeline_frames_total"))


def test_three_kill_9s_of_the_pipeline_lose_nothing_and_store_nothing_twice(
    restartable_kafka_broker: TansuBroker, tmp_path: Path,
) -> None:
    topo = fat_tree(k=4)
    topology = save_topology(topo, tmp_path / "topology.json")
    db = f"sqlite:///{tmp_path / 'f.db'}"
    sim = Simulator(topo, SimConfig(seed=4))
    sim.add_job(JobSpec(hosts=12, placement="random", compute_s=0.2, comm_bytes_per_nic=3e10))
    bus = KafkaBus(bus_config(restartable_kafka_broker.bootstrap), CollectorRegistry())
    bus.start()
    sink = BusFrameSink(bus)
    sent: set[Key] = set()
    stop_feed = threading.Event()

    def feed() -> None:
        while not stop_feed.is_set():
            for _ in range(5):
                sim.step()
                frames = sim.frames()
                sent.update((f.device, f.source.value, f.ts_ns) for f in frames)
                sink.publish_frames(frames)
            stop_feed.wait(0.1)

    store = Store(StoreConfig(url=db))
    store.start()
    log = tmp_path / "pipeline.log"
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    kills = 0
    try:
        for _ in range(3):
            port = free_port()
            proc = _serve_pipeline(restartable_kafka_broker.bootstrap, db, topology, log, port)
            deadline = time.monotonic() + 120
            # mid-stream, surely: windows open, their frames only on the bus
            while _frames_taken(port) < 200:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the worker took no frame in 120 s"
                time.sleep(0.2)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            kills += 1
        stop_feed.set()
        feeder.join(timeout=30)
        assert bus.flush(60)
        port = free_port()
        proc = _serve_pipeline(restartable_kafka_broker.bootstrap, db, topology, log, port)
        deadline = time.monotonic() + 180
        taken, still_since = -1.0, time.monotonic()
        while set(stored_points(store)) != sent and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            now_taken = _frames_taken(port)
            if now_taken != taken:
                taken, still_since = now_taken, time.monotonic()
            elif taken > 0 and time.monotonic() - still_since > 5:
                break  # caught up: the last windows are written as it stops
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        stop_feed.set()
        bus.stop()
    stored = stored_points(store)
    store.stop()
    assert kills == 3
    lost = sent - set(stored)
    assert not lost, f"{len(lost)} of {len(sent)} frames lost, e.g. {sorted(lost)[:3]}"
    twice = {k: n for k, n in stored.items() if n > 1}
    assert not twice, f"{len(twice)} frames stored twice, e.g. {list(twice.items())[:3]}"
    assert len(stored) == len(sent)
