"""INT probe planning: probes needed to cover every link, against two baselines.

For each fabric (routing at t=0, distinct ECMP seeds), the planner's default
candidates are traced through the simulated fabric's ECMP forwarding and
covered greedily. Prints one row per fabric: links, candidates traced, plan
size, coverage, one probe per link (= links), the random candidates needed
for the same coverage (mean over 5 seeds), and the planning time (candidates,
tracing and cover; one core).

    python bench/bench_probes.py [--seeds N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

from fabricops.core.topology import Topology
from fabricops.pipeline.probes import (
    ProbePlanner,
    ProbePlannerConfig,
    one_probe_per_link_count,
    random_probes_for_coverage,
)
from fabricops.simulator.agents.tracer import SimulatedTracer
from fabricops.simulator.builders import fat_tree, leaf_spine, rail_optimized
from fabricops.simulator.engine import SimConfig, Simulator

FABRICS: dict[str, Callable[[], Topology]] = {
    "leaf-spine 512 GPUs": lambda: leaf_spine(gpus=512),
    "fat-tree k=8": lambda: fat_tree(k=8),
    "rail-optimized 2,048 GPUs": lambda: rail_optimized(gpus=2048),
    "rail-optimized 16,384 GPUs": lambda: rail_optimized(gpus=16384),
}
HEADER = ("fabric", "links", "candidates", "plan", "coverage", "1/link", "random (mean of seeds)",
          "plan/links", "planning s")


def measure(name: str, make: Callable[[], Topology], seeds: int) -> tuple[str, ...]:
    topo = make()
    sim = Simulator(topo, SimConfig(seed=1))
    t0 = time.perf_counter()
    planner = ProbePlanner(ProbePlannerConfig(), topo, SimulatedTracer(sim))
    candidates = planner.trace(planner.candidates())
    plan = planner.cover(candidates)
    elapsed = time.perf_counter() - t0
    random = np.mean([random_probes_for_coverage(candidates, plan.coverage,
                                                 np.random.default_rng(seed), trials=1)
                      for seed in range(seeds)])
    per_link = one_probe_per_link_count(topo)
    return (name, f"{len(topo.links):,}", f"{plan.candidates_traced:,}", f"{len(plan.probes):,}",
            f"{plan.coverage:.2%}", f"{per_link:,}", f"{random:,.1f}",
            f"{len(plan.probes) / per_link:.3f}", f"{elapsed:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="Random-baseline seeds")
    parser.add_argument("--quick", action="store_true", help="Skip the 16,384-GPU fabric")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    rows = [HEADER] + [measure(name, make, args.seeds) for name, make in FABRICS.items()
                       if not (args.quick and "16,384" in name)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    for row in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))))


if __name__ == "__main__":
    main()
