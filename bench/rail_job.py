"""The fabric the RCA benches run: a rail-optimized fabric with one job over every host.

``add_shape_args`` adds ``--gpus`` (16,384 by default), ``--leaf-radix`` and
``--spine-radix`` (the 100k-GPU shape is ``--gpus 100352 --leaf-radix 128
--spine-radix 256``); ``busy_rail`` builds the simulator they describe, its job
placed at random with compute phases of 0.5 s and 40 GB per NIC a collective.
"""

from __future__ import annotations

import argparse

from fabricops.simulator.builders import rail_optimized
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec


def add_shape_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--gpus", type=int, default=16384)
    ap.add_argument("--leaf-radix", type=int, help="ports per leaf (builder default)")
    ap.add_argument("--spine-radix", type=int, help="ports per spine (builder default)")


def busy_rail(args: argparse.Namespace, seed: int = 5) -> Simulator:
    """The simulator of ``args``' shape (see ``add_shape_args``), its job added."""
    radix = {k: v for k, v in (("leaf_radix", args.leaf_radix),
                               ("spine_radix", args.spine_radix)) if v is not None}
    topo = rail_optimized(gpus=args.gpus, **radix)
    sim = Simulator(topo, SimConfig(seed=seed))
    hosts = sum(1 for _ in topo.hosts())
    sim.add_job(JobSpec(hosts=hosts, placement="random", compute_s=0.5,
                        comm_bytes_per_nic=40e9))
    return sim
