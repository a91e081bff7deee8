"""Diagnosis latency of the RCA on a rail-optimized fabric (16,384 GPUs by default).

The simulator runs a fabric-wide job; a gray-loss fault starts at 12 s. Each
tick's frames and INT reports are encoded as on the bus, decoded and folded
into the engine (ingest), then the engine steps (signals, rules, features of
every candidate, model on the candidates near a symptom). A second engine fed
the same telemetry scores every candidate with activity of its own (the
baseline, as before scoring was focused). Printed: ingest and step time per
tick (median, p95, max) before and during the fault, the step-time ratio
against the baseline, and the time from onset to the first diagnosis naming
the faulty link by each. What set-up built is settled before the ticks, as the
RCA command does once started (:mod:`fabricops.core.heap`); before, the
collector's full passes over the 100k-GPU topology's objects landed in
random steps.

    python bench/bench_rca_latency.py [--gpus 16384] [--ticks 20]
    python bench/bench_rca_latency.py --gpus 100352 --leaf-radix 128 --spine-radix 256
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fabricops.core import heap
from fabricops.core.frame import Frame
from fabricops.core.intreport import IntBatch
from fabricops.core.wire_frame import EntityTables
from fabricops.rca.engine import RcaConfig, RcaEngine
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.simulator.agents.int_exporter import IntExporter, IntExporterConfig, ListSender
from fabricops.simulator.faults import FaultSpec, FaultType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rail_job import add_shape_args, busy_rail

ONSET_S = 12.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_args(ap)
    ap.add_argument("--ticks", type=int, default=20)
    args = ap.parse_args()
    sim = busy_rail(args)
    topo = sim.fabric.topology
    link = next(lk.id for lk in topo.links if lk.a.startswith("leaf") and "spine" in lk.b)
    sim.add_fault(FaultSpec(type=FaultType.GRAY_LOSS, entity=link, start_s=ONSET_S,
                            params={"loss_rate": 1e-4}))
    exporter = IntExporter(IntExporterConfig(sample_flows_per_tick=64), sim, ListSender())
    model = RcaModel.load(DEFAULT_MODEL)
    engines = {"focused": RcaEngine(topo, model),
               "baseline": RcaEngine(topo, model, RcaConfig(score_near_symptoms=False))}
    s = topo.summary()
    print(f"fabric: rail-optimized {args.gpus:,} GPUs: {s['switches']:,} switches, "
          f"{s['hosts']:,} hosts, {s['ports']:,} ports, {s['links']:,} links; "
          f"candidates: {len(engines['focused'].candidates):,}")
    tables = {name: EntityTables() for name in engines}  # as each service keeps its own
    heap.settle()
    ingest: list[tuple[float, float]] = []
    step: dict[str, list[tuple[float, float]]] = {k: [] for k in engines}
    found: dict[str, tuple[float, str, float]] = {}
    for _ in range(args.ticks):
        sim.step()
        frames = [f.encode() for f in sim.frames()]
        report = exporter.build_batch(sim).encode()
        t_s = sim.tick * sim.config.tick_s
        for name, engine in engines.items():
            t0 = time.perf_counter()
            engine.ingest_frames(Frame.decode(b, tables[name]) for b in frames)
            engine.ingest_int(IntBatch.decode(report))
            t1 = time.perf_counter()
            result = engine.step()
            t2 = time.perf_counter()
            if name == "focused":
                ingest.append((t_s, t1 - t0))
            step[name].append((t_s, t2 - t1))
            d = result.diagnosis
            if name not in found and d is not None and d.root == link:
                found[name] = (t_s - ONSET_S, d.fault_type, d.confidence)
    phases: tuple[tuple[str, Callable[[float], bool]], ...] = (
        ("healthy", lambda t: t <= ONSET_S), ("fault", lambda t: t > ONSET_S))
    for label, pick in phases:
        ing = np.array([v for t, v in ingest if pick(t)]) * 1e3
        print(f"{label:8s} ticks {len(ing):3d}  decode+ingest ms: median {np.median(ing):7.1f} "
              f"p95 {np.percentile(ing, 95):7.1f}")
        for name in engines:
            stp = np.array([v for t, v in step[name] if pick(t)]) * 1e3
            print(f"  step {name:8s} ms: median {np.median(stp):8.1f} p95 "
                  f"{np.percentile(stp, 95):8.1f} max {stp.max():8.1f}")
        f = np.median([v for t, v in step["focused"] if pick(t)])
        b = np.median([v for t, v in step["baseline"] if pick(t)])
        print(f"  median step, baseline / focused: {b / max(f, 1e-9):.1f}x")
    for name in engines:
        if name in found:
            dt, ftype, conf = found[name]
            print(f"{name}: onset -> diagnosis of {link}: {dt:.1f} s simulated "
                  f"({ftype}, confidence {conf:.2f})")
        else:
            print(f"{name}: the faulty link {link} was not diagnosed within {args.ticks} ticks")


if __name__ == "__main__":
    main()
