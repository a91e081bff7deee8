"""How fast the RCA service drains a backlog of telemetry (a restart, an outage,
or more telemetry than it folds and analyses in real time), with and without
putting off steps while behind (``RcaServiceConfig.catch_up_s``).

A rail-optimized fabric (16,384 GPUs by default) runs a job for ``--seconds``
simulated seconds; every device's frames go onto an in-memory bus of
``--partitions`` partitions first (the backlog). Then one ``RcaService`` per
setting drains it as its consumer loop does: polls of ``max_records`` (500),
``process`` on each, then one empty poll (``idle``). Printed per setting: CPU
time to drain (``time.process_time``) and per second of telemetry, steps taken
and put off, the longest telemetry time between two steps analysed, how many
steps saw switches silent (symptoms, or a collection outage) and how many
diagnoses were published (the fabric is healthy: each is a false alarm); then
the ratio against a step every second (``catch_up_s`` 1).

    python bench/bench_rca_backlog.py [--gpus 16384] [--seconds 30]
    python bench/bench_rca_backlog.py --gpus 100352 --leaf-radix 128 --spine-radix 256
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from fabricops.core import heap
from fabricops.core.bus import Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.membus import MemoryBus, MemoryBusConfig
from fabricops.rca.detect import STOPPED
from fabricops.rca.engine import StepResult
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.rca.service import RcaService, RcaServiceConfig
from fabricops.simulator.engine import Simulator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rail_job import add_shape_args, busy_rail


def backlog(sim: Simulator, seconds: int, partitions: int) -> tuple[MemoryBus, int]:
    """A bus holding ``seconds`` of ``sim``'s telemetry; and how many records."""
    bus = MemoryBus(MemoryBusConfig(partitions=partitions, retention_records=1 << 30,
                                    retention_bytes=1 << 40))
    bus.start()
    sink = BusFrameSink(bus)
    records = 0
    for _ in range(seconds):
        sim.step()
        frames = sim.frames()
        sink.publish_frames(frames)
        records += len(frames)
    return bus, records


def drain(bus: MemoryBus, sim: Simulator, catch_up_s: float) -> dict[str, float]:
    service = RcaService(RcaServiceConfig(catch_up_s=catch_up_s), bus, sim.fabric.topology,
                         RcaModel.load(DEFAULT_MODEL))
    steps: list[int] = []
    silent = 0
    step = service.engine.step

    def counted(now: int | None = None, **kw: bool) -> StepResult:
        nonlocal silent
        steps.append(service.engine.view.newest_ns if now is None else now)
        result = step(now, **kw)
        silent += bool(result.outage_switches or any(s.rule == STOPPED
                                                     for s in result.symptoms))
        return result

    service.engine.step = counted  # type: ignore[method-assign]
    consumer = bus.subscribe([topic_name(Topic.TELEMETRY), topic_name(Topic.INT)],
                             f"rca-{catch_up_s:g}")
    heap.settle()
    t0 = time.process_time()
    while batch := consumer.poll(0.0, service.config.max_records):
        service.process(batch)
    service.idle()
    cpu = time.process_time() - t0
    consumer.close()
    gaps = np.diff(steps) / 1e9 if len(steps) > 1 else np.zeros(1)
    return {"cpu": cpu, "steps": len(steps), "deferred": service.m_deferred._value.get(),
            "gap": float(gaps.max()), "published": len(service.diagnoses), "silent": silent}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_args(ap)
    ap.add_argument("--seconds", type=int, default=30, help="telemetry in the backlog")
    ap.add_argument("--partitions", type=int, default=8)
    args = ap.parse_args()
    sim = busy_rail(args)
    bus, records = backlog(sim, args.seconds, args.partitions)
    print(f"backlog: {args.seconds} s of a {args.gpus:,}-GPU rail fabric, {records:,} "
          f"frames on {args.partitions} partitions; polls of 500")
    results = {}
    for catch_up in (1.0, 10.0):
        r = results[catch_up] = drain(bus, sim, catch_up)
        print(f"catch_up_s {catch_up:4g}: {r['cpu']:6.1f} CPU s to drain "
              f"({r['cpu'] / args.seconds:.2f} per s of telemetry), {r['steps']:3.0f} steps, "
              f"{r['deferred']:4.0f} put off, longest gap {r['gap']:4.1f} s")
        print(f"  {r['silent']:.0f} steps saw switches silent, {r['published']:.0f} diagnoses "
              "(the fabric is healthy)")
    print(f"drain CPU time, every second / catch_up_s 10: "
          f"{results[1.0]['cpu'] / results[10.0]['cpu']:.2f}x")
    bus.stop()


if __name__ == "__main__":
    main()
