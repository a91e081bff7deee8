"""Pipeline scale-out: N worker processes, each owning its share of the partitions.

The twin (``--family``, ``--gpus``) runs a training job for ``--seconds`` at 1 s
ticks. Its devices' frames are dealt to ``--partitions`` partitions by device
(CRC-32 of the name, as the bus keys them) and the partitions to the workers,
as a consumer group would. Each worker is a process of its own with the
records of its partitions on an in-process bus (no broker in the way: what is
measured is the pipeline), and every worker writes into the same store (a
SQLite file in WAL mode). Frames are made before the clock
starts; the workers start together, consume everything and write every
window (``flush``).

A run with one worker and a run with ``--workers`` are made one after the
other on the same frames. Printed per run: samples, wall time from the common
start to the last worker's end, each worker's CPU time (``time.process_time``)
and samples per CPU-second. The scale-out ratio is wall throughput over the
one-worker run's; it needs a core per worker, so run it on an idle machine.

    python bench/bench_scale_out.py [--gpus 4096] [--seconds 70] [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

from fabricops.core.bus import DEFAULT_PREFIX, Topic, record_headers, topic_name
from fabricops.core.membus import MemoryBus, MemoryBusConfig, partition_for_key
from fabricops.evaluation.scenarios import shape_params
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.simulator.builders import build
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig

Records = list[tuple[str, str, bytes]]  # device, source, encoded frame


def twin_records(family: str, gpus: int, seconds: int) -> tuple[Records, int]:
    """Every frame of the run, encoded, in publishing order, and the sample count."""
    params = shape_params(family, gpus)
    if family != "fat_tree":
        params.update(leaf_radix=64, spine_radix=64)
    topo = build(family, **params)
    sim = Simulator(topo, SimConfig(seed=1))
    sim.add_job(JobSpec(hosts=sum(1 for _ in topo.hosts()), placement="random",
                        compute_s=0.5, comm_bytes_per_nic=30e9))
    out: Records = []
    samples = 0
    for _ in range(seconds):
        sim.step()
        for f in sim.frames():
            out.append((f.device, f.source.value, f.encode()))
            samples += f.n_samples
    return out, samples


def worker_run(records: Records, url: str, start: object, results: object) -> None:
    """One worker process: its records on a private bus, consumed to the end."""
    bus = MemoryBus(MemoryBusConfig(retention_records=10**9, retention_bytes=1 << 40))
    bus.start()
    topic = topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)
    for device, source, value in records:
        bus.publish(topic, device.encode(), [value], record_headers(Topic.TELEMETRY, source))
    store = Store(StoreConfig(url=url, timeout_s=60))
    store.start()
    worker = PipelineWorker(PipelineConfig(max_future_s=1e9), bus, store)
    consumer = bus.subscribe([topic], worker.config.group)
    start.wait()  # type: ignore[attr-defined]
    t0, c0 = time.perf_counter(), time.process_time()
    while messages := consumer.poll(0.0, worker.config.max_records):
        worker.process(messages)
        consumer.commit(worker.windows.holds())
    worker.flush()
    results.put((time.perf_counter() - t0, time.process_time() - c0))  # type: ignore[attr-defined]
    store.stop()


def run(records: Records, samples: int, workers: int, partitions: int, url: str) -> float:
    """Samples per wall second of ``workers`` processes over the same records."""
    shares: list[Records] = [[] for _ in range(workers)]
    for rec in records:
        shares[partition_for_key(rec[0].encode(), partitions) % workers].append(rec)
    ctx = mp.get_context("fork")
    start, results = ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=worker_run, args=(share, url, start, results))
             for share in shares]
    for p in procs:
        p.start()
    start.wait()
    done = [results.get() for _ in procs]
    for p in procs:
        p.join()
    wall = max(w for w, _ in done)
    print(f"{workers} worker(s): {samples:,} samples in {wall:.1f} s wall = "
          f"{samples / wall / 1e6:.2f} M samples/s")
    for i, ((w, cpu), share) in enumerate(zip(done, shares, strict=True)):
        print(f"  worker {i}: {len(share):,} frames, {w:.1f} s wall, {cpu:.1f} CPU-s")
    cpu_rate = samples / sum(cpu for _, cpu in done) / 1e6
    print(f"  {cpu_rate:.2f} M samples per CPU-second per worker")
    return samples / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="rail_optimized",
                        choices=("leaf_spine", "fat_tree", "rail_optimized"))
    parser.add_argument("--gpus", type=int, default=4096, help="GPUs (k for a fat-tree)")
    parser.add_argument("--seconds", type=int, default=70, help="simulated seconds")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=16)
    args = parser.parse_args()
    print(f"{args.family} {args.gpus}: simulating {args.seconds} s ...", flush=True)
    records, samples = twin_records(args.family, args.gpus, args.seconds)
    rates = []
    for n in (1, args.workers):
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'fabricops.db'}"
            rates.append(run(records, samples, n, args.partitions, url))
    print(f"scale-out: {args.workers} workers {rates[1] / rates[0]:.2f}x one worker "
          f"(cores: {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'})")


if __name__ == "__main__":
    main()
