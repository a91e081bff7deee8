"""The small fabric the RCA service tests run: a k=4 fat-tree (20 switches, 16 hosts)
with one job over every host."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pytest

from fabricops.rca.engine import RcaConfig, RcaEngine, StepResult
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.workload import JobSpec


def busy_fat_tree() -> Simulator:
    sim = Simulator(fat_tree(k=4), SimConfig(seed=3))
    sim.add_job(JobSpec(hosts=16, placement="random", compute_s=0.3, comm_bytes_per_nic=30e9))
    return sim


def scored_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows the model is asked to score, per call, from now on."""
    rows: list[int] = []
    score = RcaModel.class_probs

    def counted(self: RcaModel, x: np.ndarray) -> np.ndarray:
        rows.append(len(x))
        return score(self, x)

    monkeypatch.setattr(RcaModel, "class_probs", counted)
    return rows


def run_engine(fault: FaultSpec | None = None, ticks: int = 22,
               withheld: Collection[str] = (), silent_from: int = 12,
               config: RcaConfig | None = None) -> tuple[RcaEngine, list[StepResult]]:
    """An engine fed ``ticks`` ticks of the busy fat-tree with ``fault`` (if any), without
    the frames of ``withheld`` devices from tick ``silent_from`` on (they forward on, but
    stop reporting); the engine and its steps."""
    sim = busy_fat_tree()
    if fault is not None:
        sim.add_fault(fault)
    engine = RcaEngine(sim.fabric.topology, RcaModel.load(DEFAULT_MODEL), config)
    steps = []
    for tick in range(ticks):
        sim.step()
        frames = sim.frames()
        engine.ingest_frames(f for f in frames if tick < silent_from or f.device not in withheld)
        steps.append(engine.step())
    return engine, steps
