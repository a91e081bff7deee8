"""Simulated seconds per second of one core's CPU time, 1 s ticks.

Three fabrics under a running training job (ring AllReduce over every rail,
random placement, compute and collective phases): a 512-GPU leaf-spine, a
16,384-GPU rail-optimized fabric and a 16,000-GPU three-tier fat-tree (k=40,
2,000 hosts of 8 NICs), the same job size on two shapes. Prints per fabric its
build and set-up time, flows, milliseconds per tick and the speed-up over real time, for the model
alone and with every device's telemetry frames cut each tick: in CPU time
(``time.process_time``: other load on the machine does not count) and, beside
it, in wall time (the process is pinned to one core; the bench's own count of
the frames' samples is taken out of both). Then, per fabric, what a
link change costs once the control plane converges (CPU time,
median of ``--changes`` changes, each of the busiest leaf uplink, then of the
switch it climbs to, going down and back): only the flows it can move routed again
(``reroute_changed``), beside searching every hop distance and routing every
flow again (the baseline).
``--preset NAME`` (repeatable) measures a shipped scenario the same way, e.g.
``rail-64k`` and ``rail-100k``, and prints the process's peak resident memory
after it (presets run in the order given; the peak is the process's so far).
``--shape KIND:KEY=VALUE,...`` (repeatable) measures a builder's fabric with a
job on every host, e.g. ``fat_tree:k=40,nics_per_host=4``.
What set-up built is settled before the ticks, as a command does once started
(:mod:`fabricops.core.heap`).

    python bench/bench_simulator.py [--ticks N] [--preset rail-100k]
        [--shape fat_tree:k=40,nics_per_host=4] [--skip-default]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable

import numpy as np

from fabricops.core import heap
from fabricops.core.topology import Topology
from fabricops.simulator.builders import (
    BuilderError,
    build,
    fat_tree,
    leaf_spine,
    rail_optimized,
)
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.scenario import build_simulator, load_preset
from fabricops.simulator.workload import JobSpec

FABRICS: dict[str, tuple[Callable[[], Topology], int]] = {
    "leaf-spine 512 GPUs": (lambda: leaf_spine(gpus=512), 60),
    "rail-optimized 16,384 GPUs": (lambda: rail_optimized(gpus=16384), 2000),
    "fat-tree k=40, 16,000 GPUs": (lambda: fat_tree(k=40, nics_per_host=8), 2000),
}


def measure(name: str, make: Callable[[], Topology], hosts: int, ticks: int) -> Simulator:
    t0 = time.perf_counter()
    topo = make()
    sim = Simulator(topo, SimConfig(seed=1))
    sim.add_job(JobSpec(hosts=hosts, placement="random", qps_per_pair=4, compute_s=1.0,
                        comm_bytes_per_nic=50e9))
    return timed(name, sim, time.perf_counter() - t0, ticks)


def _kind_params(spec: str) -> tuple[str, dict[str, int | float]]:
    kind, _, rest = spec.partition(":")
    return kind, {k: float(v) if "." in v else int(v)
                  for k, v in (p.split("=", 1) for p in rest.split(",") if p)}


def measure_shape(spec: str, kind: str, params: dict[str, int | float],
                  ticks: int) -> Simulator:
    """The builder ``kind`` with ``params`` (parsed from ``spec``, ``KIND:KEY=VALUE,...``),
    a job on every host; BuilderError for a shape the builder refuses."""
    topo = build(kind, **params)
    hosts = sum(1 for n in topo.nodes if n.is_host)
    return measure(spec, lambda: topo, hosts, ticks)


def measure_preset(name: str, ticks: int) -> Simulator:
    t0 = time.perf_counter()
    sim = build_simulator(load_preset(name))
    return timed(f"preset {name}", sim, time.perf_counter() - t0, ticks)


def timed(name: str, sim: Simulator, setup: float, ticks: int) -> Simulator:
    topo = sim.fabric.topology
    heap.settle()  # as a command does once started (fabricops.core.heap)
    sim.run(3)
    model = _per_tick(lambda: sim.run(ticks), ticks)
    samples, counting = 0, 0.0

    def with_frames() -> None:
        nonlocal samples, counting
        for _ in range(ticks):
            sim.step()
            frames = sim.frames()
            start = time.process_time()
            samples += sum(f.n_samples for f in frames)
            counting += time.process_time() - start
            del frames  # freed as a sink that sent them would free them

    cpu, wall = _per_tick(with_frames, ticks)
    framed = cpu - counting / ticks, wall - counting / ticks  # the bench's own count out
    s = topo.summary()
    print(f"{name}: switches={s['switches']:,} nics={s['nics']:,} "
          f"flows={len(sim.workload.flows):,} setup={setup:.2f}s")
    for label, (cpu, wall) in (("model", model), ("with frames", framed)):
        print(f"  {label:11s} {cpu * 1e3:7.1f} ms/tick CPU = {1 / cpu:6.1f}x real time "
              f"(wall {wall * 1e3:.1f} ms = {1 / wall:.1f}x)")
    print(f"  {samples // ticks:,} samples/tick")
    return sim


def _per_tick(run: Callable[[], None], ticks: int) -> tuple[float, float]:
    """CPU seconds (``time.process_time``) and wall seconds per tick of ``run``."""
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    return (time.process_time() - cpu) / ticks, (time.perf_counter() - wall) / ticks


def link_change(name: str, sim: Simulator, changes: int) -> None:
    """CPU ms to converge on a link change: incremental beside rerouting every flow."""
    fab, router = sim.fabric, sim.router
    busy = np.bincount(sim.paths[:, 1] // 2, minlength=fab.n_links + 1)[:fab.n_links]
    link = int(np.argmax(busy))
    spine = int(fab.port_node[fab.ch_rx_port[2 * link]])  # the switch it climbs to
    ports = np.asarray(fab.node_ports(spine))
    spine_links = np.unique(fab.port_tx_ch[ports[fab.port_tx_ch[ports] >= 0]] // 2)
    for label, links in (("busiest link", np.array([link])),
                         (f"all {len(spine_links)} links of the switch above", spine_links)):
        ch = np.concatenate((2 * links, 2 * links + 1)).astype(np.int32)
        inc, full, moved = [], [], []
        for _ in range(changes):
            old = router.dist
            router.link_up[links] = ~router.link_up[links]
            t = time.process_time()
            router.refresh()
            moved.append(len(sim.reroute_changed(old, ch)))
            inc.append(time.process_time() - t)
            t = time.process_time()
            router.refresh(from_scratch=True)  # every distance searched, every flow routed
            sim.reroute_all()
            full.append(time.process_time() - t)
        ms_inc, ms_full = 1e3 * statistics.median(inc), 1e3 * statistics.median(full)
        print(f"  {label} down or up: {ms_inc:.1f} ms, "
              f"{statistics.median(moved):,.0f} flows routed again\n"
              f"    (every flow routed again: {ms_full:.1f} ms, "
              f"{ms_full / max(ms_inc, 1e-9):.0f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--changes", type=int, default=6, help="link changes per link")
    parser.add_argument("--preset", action="append", default=[],
                        help="also a shipped scenario (repeat), e.g. rail-100k")
    parser.add_argument("--shape", action="append", default=[],
                        help="also a builder's fabric (repeat), KIND:KEY=VALUE,..., e.g. "
                             "fat_tree:k=40,nics_per_host=4")
    parser.add_argument("--skip-default", action="store_true",
                        help="only the presets and shapes, not the three default fabrics")
    args = parser.parse_args()
    shapes = []
    for spec in args.shape:  # a spec that does not parse: its one-line reason, first
        try:
            shapes.append((spec, *_kind_params(spec)))
        except ValueError as exc:
            parser.error(f"--shape {spec}: {exc}")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(f"1 s ticks, {args.ticks} ticks each, pinned to one core")
    for name, (make, hosts) in ({} if args.skip_default else FABRICS).items():
        link_change(name, measure(name, make, hosts, args.ticks), args.changes)
    for spec, kind, params in shapes:
        try:
            sim = measure_shape(spec, kind, params, args.ticks)
        except BuilderError as exc:  # a shape the builder refuses: its one-line reason
            parser.error(f"--shape {spec}: {exc}")
        link_change(spec, sim, args.changes)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"  peak resident memory so far: {peak:.2f} GB")
    for preset in args.preset:
        link_change(preset, measure_preset(preset, args.ticks), args.changes)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"  peak resident memory so far: {peak:.2f} GB")


if __name__ == "__main__":
    main()
