"""A Kafka-protocol broker stopped (SIGTERM) for 30 s and started again under a running
pipeline: the broker keeps its log in an S3 bucket (Tansu's object storage, on
moto's S3 server), so nothing it acknowledged is lost with it. Frames published
during the outage wait in the producer's buffer; the worker rejoins its group.
Every frame is stored once."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.core.bus import Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.kafkabus import KafkaBus
from fabricops.core.liveness import Liveness
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig
from tests.conftest import missing_peer
from tests.faults.counting import Key, stored_points

from .conftest import TansuBroker, bus_config, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]
OUTAGE_S = 30.0
S3_ENV = {"AWS_ACCESS_KEY_ID": "fabricops", "AWS_SECRET_ACCESS_KEY": "fabricops",
          "AWS_DEFAULT_REGION": "eu-west-2", "AWS_ALLOW_HTTP": "true"}


@pytest.fixture
def durable_kafka_broker(tansu_path: Path, tmp_path: Path) -> Iterator[TansuBroker]:
    """Tansu with its log in a bucket of a local S3 server (moto), restartable."""
    try:
        import boto3
        import moto.server  # noqa: F401  (the server's own module must be there)
    except ImportError as exc:
        missing_peer(f"moto[server] is not installed ({exc}); it serves the broker's S3 log")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with (tmp_path / "moto.log").open("ab") as log:
        s3 = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                               "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="eu-west-2",
                              aws_access_key_id="fabricops", aws_secret_access_key="fabricops")
        deadline = time.monotonic() + 60
        while True:
            try:
                client.create_bucket(Bucket="tansu", CreateBucketConfiguration={
                    "LocationConstraint": "eu-west-2"})
                break
            except Exception:
                assert time.monotonic() < deadline, (tmp_path / "moto.log").read_text()
                time.sleep(0.2)
        broker = TansuBroker(tansu_path, free_port(), tmp_path / "tansu.log",
                             storage="s3://tansu/", env={**S3_ENV, "AWS_ENDPOINT": endpoint})
        broker.start()
        yield broker
        broker.stop()
    finally:
        s3.terminate()
        s3.wait(timeout=30)


def test_a_30_s_broker_stop_loses_nothing_and_stores_nothing_twice(
    durable_kafka_broker: TansuBroker, tmp_path: Path,
) -> None:
    broker = durable_kafka_broker
    topo = fat_tree(k=4)
    sim = Simulator(topo, SimConfig(seed=8))
    sim.add_job(JobSpec(hosts=12, placement="random", compute_s=0.2, comm_bytes_per_nic=3e10))
    # A short delivery timeout hands records the broker did not acknowledge back
    # to the bus's own buffer, which keeps them through the outage; the buffer is
    # sized for it (the feed publishes ~360 frames/s).
    config = bus_config(broker.bootstrap, delivery_timeout_ms=5000, request_timeout_ms=3000,
                        buffer_records=50_000)
    producer = KafkaBus(config, CollectorRegistry())
    worker_bus = KafkaBus(config, CollectorRegistry())
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'f.db'}"))
    store.start()
    liveness = Liveness()
    worker = PipelineWorker(PipelineConfig(max_future_s=1e9, keyframe_interval_s=10),
                            worker_bus, store, liveness=liveness)
    sink = BusFrameSink(producer)
    sent: set[Key] = set()
    feeding = threading.Event()
    feeding.set()

    def feed() -> None:
        while feeding.is_set():
            sim.step()
            frames = sim.frames()
            sent.update((f.device, f.source.value, f.ts_ns) for f in frames)
            sink.publish_frames(frames)
            time.sleep(0.1)

    producer.start()
    worker_bus.start()
    worker.start()
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        time.sleep(5)
        broker.stop(graceful=True)
        before_outage = len(sent)
        time.sleep(OUTAGE_S)
        during_outage = len(sent) - before_outage
        broker.start()
        time.sleep(5)
        feeding.clear()
        feeder.join(timeout=30)
        assert producer.flush(120), "the producer delivered its buffer after the outage"
        deadline = time.monotonic() + 180
        while set(stored_points(store)) != sent and time.monotonic() < deadline:
            time.sleep(0.5)
        assert liveness.dead_workers() == []
    finally:
        feeding.clear()
        worker.stop()
        worker_bus.stop()
        producer.stop()
    stored = stored_points(store)
    store.stop()
    assert during_outage > 0, "frames were published while the broker was down"
    dropped = producer.registry.get_sample_value("fabricops_kafkabus_dropped_records_total",
                                                 {"topic": topic_name(Topic.TELEMETRY),
                                                  "reason": "buffer_full"})
    assert not dropped, "the producer's buffer held the outage"
    lost = sent - set(stored)
    assert not lost, f"{len(lost)} of {len(sent)} frames lost"
    assert max(stored.values()) == 1, "a frame was stored twice"
