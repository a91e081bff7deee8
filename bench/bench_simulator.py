"""Simulated seconds per wall-clock second, 1 s ticks, one core.

Two fabrics under a running training job (ring AllReduce over every rail,
random placement, compute and collective phases): a 512-GPU leaf-spine and a
16,384-GPU rail-optimized fabric. Prints one row per fabric: build and set-up
time, flows, milliseconds per tick and the speed-up over real time, for the
model alone and with every device's telemetry frames cut each tick.

    python bench/bench_simulator.py [--ticks N]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from fabricops.core.topology import Topology
from fabricops.simulator.builders import leaf_spine, rail_optimized
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec

FABRICS: dict[str, tuple[Callable[[], Topology], int]] = {
    "leaf-spine 512 GPUs": (lambda: leaf_spine(gpus=512), 60),
    "rail-optimized 16,384 GPUs": (lambda: rail_optimized(gpus=16384), 2000),
}


def measure(name: str, make: Callable[[], Topology], hosts: int, ticks: int) -> None:
    t0 = time.perf_counter()
    topo = make()
    sim = Simulator(topo, SimConfig(seed=1))
    sim.add_job(JobSpec(hosts=hosts, placement="random", qps_per_pair=4, compute_s=1.0,
                        comm_bytes_per_nic=50e9))
    setup = time.perf_counter() - t0
    sim.run(3)
    t = time.perf_counter()
    sim.run(ticks)
    model = (time.perf_counter() - t) / ticks
    t = time.perf_counter()
    samples = 0
    for _ in range(ticks):
        sim.step()
        samples += sum(f.n_samples for f in sim.frames())
    with_frames = (time.perf_counter() - t) / ticks
    s = topo.summary()
    print(f"{name:28s} switches={s['switches']:5d} nics={s['nics']:6d} "
          f"flows={len(sim.workload.flows):6d} setup={setup:5.2f}s | "
          f"model {model * 1e3:7.1f} ms/tick = {1 / model:7.1f}x real time | "
          f"with frames {with_frames * 1e3:7.1f} ms/tick = {1 / with_frames:6.1f}x "
          f"({samples // ticks:,} samples/tick)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=20)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(f"1 s ticks, {args.ticks} ticks each, pinned to one core")
    for name, (make, hosts) in FABRICS.items():
        measure(name, make, hosts, args.ticks)


if __name__ == "__main__":
    main()
