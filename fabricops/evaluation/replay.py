"""Replay a labelled scenario: simulator -> bus -> RCA, tick by tick.

Each tick the simulator's frames and its INT exporter's reports are published
on an in-process bus (``telemetry.v2``, ``int.v2``), as the collectors would;
the RCA's consumer polls the bus, decodes, and steps its engine. The RCA sees
nothing else. The ground truth is read from the simulator only to label
training rows and to score the outcome; it never reaches the engine. A fault
is labelled (for training) and required (for scoring) only from the first tick
its effect reached traffic: before that no telemetry can show it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from fabricops.core.bus import Topic, topic_name
from fabricops.core.busio import BusFrameSink, BusIntSink, frames_from_messages
from fabricops.core.frame import Frame
from fabricops.core.intreport import IntBatch
from fabricops.core.membus import MemoryBus
from fabricops.core.records import Diagnosis
from fabricops.evaluation.scenarios import LabelledScenario, topology_for
from fabricops.rca.detect import rules_diagnosis
from fabricops.rca.engine import RcaConfig, RcaEngine, StepResult
from fabricops.rca.features import FCOL, OWN, Candidates
from fabricops.rca.model import CLASSES, RcaModel, one_thread
from fabricops.simulator.agents.int_exporter import IntExporter, IntExporterConfig, ListSender
from fabricops.simulator.scenario import build_simulator, scenario_from_dict

F64 = npt.NDArray[np.float64]
J = TypeVar("J")
R = TypeVar("R")
FIRST_LABEL_S = 8.0  # baselines settle before rows are kept for training


@dataclass
class TickOutcome:
    """What each method concluded at one tick (candidate indices; -1 = nothing)."""

    t_s: float
    diagnosis: Diagnosis | None
    rules: list[tuple[int, str]]
    votes: list[int]
    diagnoses: tuple[Diagnosis, ...] = ()  # every root of the step, ``diagnosis`` first


@dataclass
class ReplayResult:
    scenario: LabelledScenario
    candidates: Candidates
    truth: list[tuple[set[int], str, float]]  # (root candidates, type, start_s)
    touched: bool = True  # every fault reached traffic (scoring only; see fault_touched)
    seen_s: list[float | None] = field(default_factory=list)  # per fault: first traffic met
    ticks: list[TickOutcome] = field(default_factory=list)
    rows: list[F64] = field(default_factory=list)
    labels: list[npt.NDArray[np.int64]] = field(default_factory=list)
    steps: list[StepResult] = field(default_factory=list)


def map_scenarios(fn: Callable[[J], R], jobs: Sequence[J], *, workers: int,
                  progress: Callable[[int, int], None] | None = None) -> Iterator[R]:
    """``fn`` over ``jobs`` in ``workers`` processes (one native thread each), in order."""
    with ProcessPoolExecutor(initializer=one_thread, max_workers=max(1, workers)) as pool:
        for done, out in enumerate(pool.map(fn, jobs), start=1):
            if progress is not None:
                progress(done, len(jobs))
            yield out


def truth_of(sim: Any, cand: Candidates) -> list[tuple[set[int], str, float]]:
    """Root candidates per injected fault; a deadlock's root is any link of its cycle."""
    pos = {name: i for i, name in enumerate(cand.names)}
    out = []
    for r in sim.faults.faults:
        spec = r.spec
        roots = {pos[spec.entity]} if spec.entity in pos else set()
        if spec.type.value == "pfc_deadlock":
            links = sim.fabric.topology.links
            roots |= {pos[links[int(ch) // 2].id] for ch in r.channels.tolist()}
        if spec.type.value == "slow_receiver" and spec.entity in sim.fabric.topology.node_by_id:
            node = sim.fabric.topology.node_by_id[spec.entity]
            roots |= {pos[f"{node.id}:{p.name}"] for p in node.ports}
        out.append((roots, spec.type.value, spec.start_s))
    return out


def replay(ls: LabelledScenario, model: RcaModel | None, *, collect: bool = False,
           config: RcaConfig | None = None, negatives: int = 10,
           drop: Callable[[Frame], bool] | None = None,
           keep_steps: bool = False) -> ReplayResult:
    """Run one scenario through the bus and the RCA (see module docstring).

    ``drop`` loses frames on their way to the bus (a device that stops
    reporting, a gap in a series), to test the RCA under missing data.
    """
    scenario = scenario_from_dict(ls.doc, ls.doc["name"])
    topo = topology_for(*ls.topology)
    sim = build_simulator(scenario, topo)
    int_config = IntExporterConfig(seed=ls.seed % 2**31, sample_flows_per_tick=64)
    exporter = IntExporter(int_config, sim, ListSender())
    bus = MemoryBus()
    bus.start()
    frames_out, int_out = BusFrameSink(bus), BusIntSink(bus)
    consumer = bus.subscribe([topic_name(Topic.TELEMETRY), topic_name(Topic.INT)], "rca")
    engine = RcaEngine(topo, model, config, sim.placement())
    cand = engine.candidates
    result = ReplayResult(ls, cand, truth_of(sim, cand))
    rng = np.random.default_rng(ls.seed)
    int_topic = topic_name(Topic.INT)
    seen: list[float | None] = [None] * len(sim.faults.faults)
    for _ in range(scenario.ticks):
        before = sim.paths.copy() if None in seen else sim.paths
        sim.step()
        seen = [t if t is not None or not fault_touched(sim, r, before) else sim.time_s
                for t, r in zip(seen, sim.faults.faults, strict=True)]
        result.seen_s = seen
        frames = sim.frames()
        frames_out.publish_frames([f for f in frames if not drop(f)] if drop else frames)
        int_out.publish_int(exporter.build_batch(sim))
        while msgs := consumer.poll(0.0, 100_000):
            engine.ingest_frames(frames_from_messages(m for m in msgs if m.topic != int_topic))
            for m in msgs:
                if m.topic == int_topic:
                    engine.ingest_int(IntBatch.decode(m.value))
        consumer.commit()
        t_s = sim.tick * scenario.tick_s
        step = engine.step(keep_features=collect)
        rules = [(c, ft) for c, ft, _ in rules_diagnosis(step.symptoms)]
        votes: list[int] = []
        if step.x is not None:
            v = step.x[: cand.n_links, FCOL["l_vote_rel"]]
            votes = [int(i) for i in np.argsort(-v)[:3] if v[i] > 0]
        result.ticks.append(TickOutcome(t_s, step.diagnosis, rules, votes, step.diagnoses))
        if keep_steps:  # without keep_features, the engine fills x again next step
            x = step.x
            result.steps.append(replace(step, x=x.copy()) if x is not None and not collect
                                else step)
        if collect and step.x is not None and t_s >= FIRST_LABEL_S:
            _collect(result, step.x, {s.candidate for s in step.symptoms}, t_s, rng, negatives)
    bus.stop()
    result.touched = None not in seen
    return result


def fault_touched(sim: Any, fault: Any, paths_before: npt.NDArray[np.int32]) -> bool:
    """Ground truth, for scoring only: could telemetry show this active fault this tick?

    Loss shows only where it is expected to drop a packet (served packets x loss
    rate >= 1 in the tick); a slow receiver only when it pauses traffic it cannot
    drain; an ECN profile only where traffic leaves; a hash change only where
    some flow's path changed. Other faults always show (a port goes down, a
    device goes silent, a NIC pauses, receive power falls).
    """
    spec = fault.spec
    if sim.time_s <= spec.start_s:
        return False
    kind = spec.type.value
    served = sim.last.served_bps[fault.channels]
    if kind == "gray_loss":
        pkts = served * sim.config.tick_s / 8.0 / sim.config.physics.packet_bytes
        return bool((pkts * spec.typed_params().loss_rate).sum() >= 1.0)
    if kind == "slow_receiver":  # it shows only by pausing traffic it cannot drain
        return bool(sim.last.pause_share[fault.channels].max(initial=0.0) > 0)
    if kind == "ecn_misconfig":
        return bool(served.sum() > 0)
    if kind == "hash_polarization":
        active = sim.workload.flows.active
        n = min(len(paths_before), len(sim.paths))
        return bool((_moved(paths_before[:n], sim.paths[:n]) & active[:n]).any())
    return True


def _moved(before: npt.NDArray[np.int32], after: npt.NDArray[np.int32]) -> npt.NDArray[np.bool_]:
    """Per flow: its path changed (the hop arrays may differ in width when a longest
    path appears or goes; the extra hops of the wider one are padding unless they
    differ from its padding value)."""
    w = min(before.shape[1], after.shape[1])
    out: npt.NDArray[np.bool_] = (before[:, :w] != after[:, :w]).any(axis=1)
    wide = before if before.shape[1] > w else after
    if wide.shape[1] > w and wide.size:
        extra = wide[:, w:]
        pad = np.bincount(extra.ravel() - extra.min()).argmax() + extra.min()
        out |= (extra != pad).any(axis=1)
    return out


def _collect(result: ReplayResult, x: F64, suspects: set[int], t_s: float,
             rng: np.random.Generator, negatives: int) -> None:
    n = len(x)
    label = np.zeros(n, np.int64)
    for (roots, ftype, _), seen in zip(result.truth, result.seen_s, strict=True):
        if seen is not None and t_s >= seen + 1.0:
            label[list(roots)] = CLASSES.index(ftype)
    activity = np.abs(x[:, OWN]).sum(axis=1)
    loud = np.argsort(-activity)[:negatives]
    pick = set(np.flatnonzero(label).tolist()) | suspects | set(loud.tolist())
    pick |= set(rng.choice(n, size=min(negatives, n), replace=False).tolist())
    idx = np.array(sorted(pick), np.int64)
    result.rows.append(x[idx])
    result.labels.append(label[idx])

