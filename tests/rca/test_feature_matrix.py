"""The engine fills one feature matrix step after step; features kept for training stay
as they were."""

from __future__ import annotations

import numpy as np

from fabricops.rca.engine import RcaConfig, RcaEngine, StepResult
from fabricops.rca.features import PathStats, features
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.workload import JobSpec


def _fabric_with_a_dead_link() -> tuple[Simulator, RcaEngine]:
    topo = fat_tree(k=4)
    sim = Simulator(topo, SimConfig(seed=2))
    sim.add_job(JobSpec(hosts=8, placement="random", compute_s=0.5))
    link = next(lk.id for lk in topo.links if not lk.a.startswith("host"))
    sim.add_fault(FaultSpec(type="link_down", entity=link, start_s=2))
    engine = RcaEngine(topo, RcaModel.load(DEFAULT_MODEL), RcaConfig(warmup_steps=0))
    return sim, engine


def _step(sim: Simulator, engine: RcaEngine, keep: bool) -> StepResult:
    sim.step()
    engine.ingest_frames(sim.frames())
    return engine.step(keep_features=keep)


def test_steps_refill_the_engines_matrix_with_what_a_new_one_would_hold() -> None:
    sim, engine = _fabric_with_a_dead_link()
    steps = [_step(sim, engine, keep=False) for _ in range(8)]
    scored = [s for s in steps if s.x is not None]
    assert len(scored) >= 2, "the dead link must give symptoms to score"
    assert all(s.x is scored[0].x for s in scored), "one matrix, filled again"
    last = scored[-1].x
    assert last is not None
    sig = engine.signals.update(engine.view.snapshot(scored[-1].ts_ns))
    nodes, nics = np.zeros(engine.index.n_nodes), np.zeros(len(engine.index.nic_ports))
    stats = PathStats((), nodes, nodes, nodes, nics, nodes)
    fresh = features(engine.index, engine.candidates, sig, stats)
    dirty = np.full_like(fresh, np.nan, order="F")
    refilled = features(engine.index, engine.candidates, sig, stats, out=dirty)
    assert refilled is dirty
    assert np.array_equal(refilled, fresh), "nothing of the matrix's last contents is left"


def test_features_kept_for_training_are_not_overwritten_by_later_steps() -> None:
    sim, engine = _fabric_with_a_dead_link()
    first = _step(sim, engine, keep=True)
    assert first.x is not None
    before = first.x.copy()
    later = [_step(sim, engine, keep=flag) for flag in (True, False, False, True, False)]
    assert all(s.x is not first.x for s in later)
    assert np.array_equal(first.x, before)
    assert any(not np.array_equal(s.x, before) for s in later if s.x is not None), \
        "later steps see the fault: their features differ from the first step's"
