"""CPU cost of running the twin at 100 ms ticks instead of 1 s, for the same simulated time.

Each fabric runs a training job (ring AllReduce over every rail, compute and
collective phases) with a slow receiver pausing one host, for ``--seconds``
simulated seconds at each tick length. Prints the CPU time (``process_time``,
one core) of the model alone and with every device's telemetry frames cut each
tick (what the running twin does for its agents), and the ratio to 1 s ticks.
At 100 ms the twin does ten ticks per simulated second, so the ratio says how
close to 10x the cost of sub-second telemetry is, and the last column how much
faster than real time it still runs.

    python bench/bench_subsecond.py [--seconds N]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from fabricops.core.topology import Topology
from fabricops.simulator.builders import fat_tree, leaf_spine, rail_optimized
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.workload import JobSpec

FABRICS: dict[str, tuple[Callable[[], Topology], int]] = {
    "fat-tree k=8": (lambda: fat_tree(k=8), 96),
    "leaf-spine 512 GPUs": (lambda: leaf_spine(gpus=512), 56),
    "rail-optimized 2,048 GPUs": (lambda: rail_optimized(gpus=2048), 240),
}
TICKS_S = (1.0, 0.1)


def twin(topo: Topology, hosts: int, tick_s: float) -> Simulator:
    sim = Simulator(topo, SimConfig(seed=1, tick_s=tick_s))
    sim.add_job(JobSpec(hosts=hosts, placement="random", compute_s=1.0,
                        comm_bytes_per_nic=50e9))
    sim.add_fault(FaultSpec(type="slow_receiver", entity=sim.placement()["job-llm-01"][0],
                            start_s=1.0, params={"drain_share": 0.5}))
    return sim


def cpu_seconds(sim: Simulator, seconds: float, *, frames: bool) -> float:
    """CPU time to simulate ``seconds`` more of ``sim`` (with frames cut each tick)."""
    ticks = round(seconds / sim.config.tick_s)
    started = time.process_time()
    for _ in range(ticks):
        sim.step()
        if frames:
            sim.frames()
    return time.process_time() - started


def measure(topo: Topology, hosts: int, seconds: float) -> list[tuple[float, float, float]]:
    """Per tick length: (model CPU s, model + frames CPU s, ticks)."""
    rows = []
    for tick_s in TICKS_S:
        sim = twin(topo, hosts, tick_s)
        cpu_seconds(sim, 2.0, frames=False)  # past the first collective's start
        model = cpu_seconds(sim, seconds, frames=False)
        with_frames = cpu_seconds(sim, seconds, frames=True)
        rows.append((model, with_frames, seconds / tick_s))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="Simulated seconds")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(f"CPU seconds to simulate {args.seconds:g} s, one core (process_time)")
    print(f"{'fabric':26s} {'tick':>5s} {'ticks':>5s} {'model':>7s} {'ratio':>6s} "
          f"{'+frames':>7s} {'ratio':>6s} {'x real':>7s}")
    print("-" * 78)
    for name, (make, hosts) in FABRICS.items():
        topo = make()
        rows = measure(topo, hosts, args.seconds)
        base_model, base_frames, _ = rows[0]
        for tick_s, (model, with_frames, ticks) in zip(TICKS_S, rows, strict=True):
            print(f"{name:26s} {tick_s:4.1f}s {ticks:5.0f} {model:6.2f}s "
                  f"{model / base_model:5.1f}x {with_frames:6.2f}s "
                  f"{with_frames / base_frames:5.1f}x {args.seconds / with_frames:6.0f}x")
            name = ""


if __name__ == "__main__":
    main()
