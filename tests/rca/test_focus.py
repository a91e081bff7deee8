"""What a step scores: a symptom's own candidate always; its context (the candidates
on its nodes) whole, or past ``context_rows`` in turns over the next steps."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.core.bus import Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.membus import MemoryBus
from fabricops.rca.detect import Symptom
from fabricops.rca.engine import RcaConfig, RcaEngine
from fabricops.rca.features import FEATURES
from fabricops.rca.focus import Focus
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.rca.service import RcaService, RcaServiceConfig
from fabricops.simulator.faults import FaultSpec, FaultType
from tests.rca.twin import busy_fat_tree, scored_rows

# 2 links (0: nodes 0-1, 1: nodes 1-2), then 10 NIC candidates 2..11, all on node 3
# (a host) and node 4 (its switch): a retransmitting NIC brings the other nine
NODES = np.array([[0, 1], [1, 2], *([[3, 4]] * 10)])
ENDS = np.array([[-1, -1, -1, -1], [-1, -1, -1, -1]])


def _retransmits(*candidates: int) -> list[Symptom]:
    return [Symptom(c, "retransmissions", "gray_loss", 1e-3, 2.0) for c in candidates]


def _x() -> np.ndarray:
    return np.zeros((len(NODES), len(FEATURES)))


def test_within_the_budget_the_whole_context_is_scored() -> None:
    focus = Focus(NODES, ENDS, 5, 0, context_rows=9)
    picked = focus.pick(_retransmits(2), _x())
    assert np.flatnonzero(picked).tolist() == list(range(2, 12))
    assert focus.deferred == 0


def test_past_the_budget_the_context_is_scored_in_turns() -> None:
    focus = Focus(NODES, ENDS, 5, 0, context_rows=4)
    seen: list[set[int]] = []
    for _ in range(3):
        picked = np.flatnonzero(focus.pick(_retransmits(5), _x())).tolist()
        assert 5 in picked, "the symptom's own candidate, every step"
        seen.append(set(picked) - {5})
        assert focus.deferred == 9 - 4
    assert seen == [{2, 3, 4, 6}, {7, 8, 9, 10}, {11, 2, 3, 4}], "in order, wrapping round"


def test_a_mass_failure_step_scores_the_budget_and_names_the_switch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On the k=4 fat-tree, a switch down makes NICs retransmit: with a budget of 8, the
    steps score fewer rows, say so, and the switch is still named."""
    rows = scored_rows(monkeypatch)
    sim = busy_fat_tree()
    sim.add_fault(FaultSpec(type=FaultType.SWITCH_DOWN, entity="agg-0-0", start_s=15.0))
    model = RcaModel.load(DEFAULT_MODEL)
    whole = RcaEngine(sim.fabric.topology, model)
    turns = RcaEngine(sim.fabric.topology, model, RcaConfig(context_rows=8))
    results = []
    for _ in range(22):
        sim.step()
        frames = sim.frames()
        whole.ingest_frames(frames)
        turns.ingest_frames(frames)
        n = len(rows)
        w = whole.step()
        m = len(rows)
        t = turns.step()
        results.append((w, t, sum(rows[n:m]), sum(rows[m:])))
    deferred = [(w, t, a, b) for w, t, a, b in results if t.context_deferred]
    assert deferred, "some step had more context than 8 candidates"
    assert all(b < a for _, _, a, b in deferred), "those steps scored fewer rows"
    assert all(w.context_deferred == 0 for w, _, _, _ in results)
    late = results[-1][1]
    assert [(d.root, d.fault_type) for d in late.diagnoses] == [("agg-0-0", "switch_down")]


def test_the_service_shows_how_many_context_candidates_wait() -> None:
    sim = busy_fat_tree()
    sim.add_fault(FaultSpec(type=FaultType.SWITCH_DOWN, entity="agg-0-0", start_s=15.0))
    bus = MemoryBus()
    bus.start()
    service = RcaService(RcaServiceConfig(engine=RcaConfig(context_rows=8)), bus,
                         sim.fabric.topology, RcaModel.load(DEFAULT_MODEL))
    sink = BusFrameSink(bus)
    consumer = bus.subscribe([topic_name(Topic.TELEMETRY)], "rca")
    shown = []
    for _ in range(18):
        sim.step()
        sink.publish_frames(sim.frames())
        service.process(consumer.poll(0.0, 10_000))
        shown.append(service.m_context_deferred._value.get())
    bus.stop()
    assert shown[:14] == [0.0] * 14, "nothing waits before the fault"
    assert max(shown) > 0
