"""What a collection outage costs the RCA: every switch's telemetry stops for a
few seconds (a collector, its host or the management network down) while the
hosts' NIC telemetry goes on.

A rail-optimized fabric (16,384 GPUs by default) runs a healthy job. Each tick's
frames are folded into two engines; after ``--before`` ticks the switches'
frames are withheld for ``--outage`` ticks, then they come back for
``--after``. One engine sets such a mass silence aside (``RuleConfig``
``outage_share``, the default), the other analyses it as that many silent
switches (``outage_share`` 1, as before). ``--silent N`` stops only N switches;
``--down`` makes them go down (their links too) instead of only stopping
their telemetry. Printed per engine and phase: step
CPU time (median, max; ``time.process_time``), symptoms, and diagnoses
(without ``--down`` the fabric has no fault: each names a switch that did not
fail), how many of the switches were named ``switch_down`` and how many other
roots (entity and type) were named; then the ratio of the outage steps' CPU
time.

    python bench/bench_rca_outage.py [--gpus 16384] [--outage 6]
    python bench/bench_rca_outage.py --gpus 100352 --leaf-radix 128 --spine-radix 256
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from fabricops.core import heap
from fabricops.rca.detect import RuleConfig
from fabricops.rca.engine import RcaConfig, RcaEngine
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.simulator.faults import FaultSpec, FaultType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rail_job import add_shape_args, busy_rail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_args(ap)
    ap.add_argument("--before", type=int, default=14, help="ticks before (10 warm up)")
    ap.add_argument("--outage", type=int, default=6, help="ticks without switch telemetry")
    ap.add_argument("--after", type=int, default=4)
    ap.add_argument("--silent", type=int, default=None,
                    help="only this many switches stop (the first by name; a large incident "
                         "below the outage limit if fewer than a fifth), default all")
    ap.add_argument("--down", action="store_true",
                    help="the switches go down for the outage (a switch_down fault in the "
                         "twin: their links go down too), not only their telemetry")
    args = ap.parse_args()
    sim = busy_rail(args)
    topo = sim.fabric.topology
    hosts = sum(1 for _ in topo.hosts())
    model = RcaModel.load(DEFAULT_MODEL)
    engines = {"set aside": RcaEngine(topo, model),
               "analysed": RcaEngine(topo, model, RcaConfig(rules=RuleConfig(outage_share=1.0)))}
    every = sorted(n.id for n in topo.nodes if not n.is_host)
    switches = set(every[:args.silent])
    what = "go down" if args.down else "stop reporting"
    print(f"rail-optimized {args.gpus:,} GPUs: {len(every):,} switches, {hosts:,} hosts; "
          f"{len(switches):,} switches {what} for {args.outage} s")
    if args.down:
        for name in sorted(switches):
            sim.add_fault(FaultSpec(type=FaultType.SWITCH_DOWN, entity=name,
                                    start_s=float(args.before), duration_s=float(args.outage)))
    heap.settle()
    phases = [("before", args.before), ("outage", args.outage), ("after", args.after)]
    seen: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
    named: dict[tuple[str, str], set[str]] = {}  # switches of the set named switch_down
    other: dict[tuple[str, str], set[tuple[str, str]]] = {}  # every other root named
    for phase, ticks in phases:
        for _ in range(ticks):
            sim.step()
            frames = sim.frames()
            if phase == "outage" and not args.down:
                frames = [f for f in frames if f.device not in switches]
            for name, engine in engines.items():
                engine.ingest_frames(frames)
                t0 = time.process_time()
                result = engine.step()
                cpu = time.process_time() - t0
                seen.setdefault((name, phase), []).append(
                    (cpu, len(result.symptoms), len(result.diagnoses)))
                down = {d.root for d in result.diagnoses
                        if d.fault_type == "switch_down" and d.root in switches}
                named.setdefault((name, phase), set()).update(down)
                other.setdefault((name, phase), set()).update(
                    (d.root, d.fault_type) for d in result.diagnoses if d.root not in down)
    for name in engines:
        for phase, _ in phases:
            rows = seen[(name, phase)]
            cpu = np.array([r[0] for r in rows]) * 1e3
            print(f"{name:9s} {phase:6s}: step ms median {np.median(cpu):7.1f} max "
                  f"{cpu.max():7.1f}; symptoms up to {max(r[1] for r in rows):6,}; "
                  f"diagnoses {sum(r[2] for r in rows)}")
            print(f"{'':17s} of the {len(switches):,}: {len(named[(name, phase)]):,} named "
                  f"switch_down; {len(other[(name, phase)]):,} other roots named")
    out = {n: sum(r[0] for r in seen[(n, "outage")]) for n in engines}
    print(f"outage steps' CPU time, analysed / set aside: "
          f"{out['analysed'] / max(out['set aside'], 1e-9):.1f}x")


if __name__ == "__main__":
    main()
