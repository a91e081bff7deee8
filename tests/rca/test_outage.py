"""A collection outage (many switches silent at once) is not analysed as that many
switch faults; one switch falling silent still is."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from fabricops.core.bus import Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.membus import MemoryBus
from fabricops.rca.detect import STOPPED, RuleConfig, Symptom, set_aside_outage
from fabricops.rca.engine import RcaEngine, StepResult
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.rca.service import RcaService, RcaServiceConfig
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.faults import FaultSpec, FaultType
from tests.rca.twin import busy_fat_tree, run_engine, scored_rows

AGG_DOWN = FaultSpec(type=FaultType.SWITCH_DOWN, entity="agg-0-0", start_s=15.0)


def _silent(*candidates: int) -> list[Symptom]:
    return [Symptom(c, STOPPED, "switch_down", 1.0, 9.0) for c in candidates for _ in range(4)]


def test_more_switches_silent_than_share_and_minimum_are_set_aside() -> None:
    other = Symptom(3, "fcs_errors", "gray_loss", 1e-5, 6.0)
    cfg = RuleConfig(outage_share=0.2, outage_min=8)
    kept, n = set_aside_outage([other, *_silent(*range(100, 109))], 20, cfg)
    assert (kept, n) == ([other], 9), "9 of 20 switches: more than 8 and than 4"
    eight = [other, *_silent(*range(100, 108))]
    assert set_aside_outage(eight, 20, cfg) == (eight, 0), "8: not more than the minimum"
    many = _silent(*range(100, 150))
    assert set_aside_outage(many, 400, cfg) == (many, 0), "50 of 400: not more than 20 %"
    assert set_aside_outage(_silent(*range(100, 181)), 400, cfg)[1] == 81


def _run(withheld: set[str], ticks: int = 18, silent_from: int = 12) -> list[StepResult]:
    """Steps of an engine fed a healthy fat-tree's frames, without those of
    ``withheld`` devices from tick ``silent_from`` on."""
    return run_engine(None, ticks, withheld, silent_from)[1]


def test_every_switch_silent_at_once_is_an_outage_not_twenty_switch_faults() -> None:
    switches = {n.id for n in fat_tree(k=4).nodes if not n.is_host}
    steps = _run(switches)
    late = steps[-1]
    assert late.outage_switches == len(switches) == 20
    assert not [s for s in late.symptoms if s.rule == STOPPED]
    assert late.root_score is None, "nothing scored for the outage"
    assert not [d for s in steps for d in s.diagnoses if d.fault_type == "switch_down"]


def test_one_switch_falling_silent_is_still_a_symptom_of_that_switch() -> None:
    steps = _run({"agg-0-0"})
    late = steps[-1]
    assert late.outage_switches == 0
    stopped = [s for s in late.symptoms if s.rule == STOPPED]
    assert len(stopped) == 1, "one symptom for the switch, not one for each of its ports"
    assert late.root_score is not None, "analysed: the switch was scored"


def test_a_silent_switch_whose_links_carry_on_brings_only_itself_to_scoring(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two switches' telemetry stops while they forward on: nothing around them
    says they are down, so only they are scored, not the links and NICs around
    them (a hundred candidates a switch on a large fabric)."""
    rows = scored_rows(monkeypatch)
    late = _run({"agg-0-0", "agg-1-0"})[-1]
    assert len([s for s in late.symptoms if s.rule == STOPPED]) == 2
    assert rows[-1] == 2, rows
    assert not late.diagnoses


def _focused(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The candidates the model is asked to score, per call, from now on."""
    focused: list[list[int]] = []
    scores = RcaModel.scores

    def seen(self: RcaModel, x: np.ndarray, kind: np.ndarray,
             focus: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        assert focus is not None
        focused.append(np.flatnonzero(focus).tolist())
        return scores(self, x, kind, focus)

    monkeypatch.setattr(RcaModel, "scores", seen)
    return focused


def _names(engine: RcaEngine, candidates: list[int]) -> set[str]:
    return {engine.candidates.names[i] for i in candidates}


def test_a_switch_that_goes_down_is_scored_alone_not_its_links(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its peers see all its links down: from the first step it alone is scored, not
    those links and the switches at their other ends (a leaf going down on a large
    fabric would bring every spine it was on; 100 switches of a 100k-GPU fabric,
    12,800 links), and it is named at once."""
    focused = _focused(monkeypatch)
    engine, steps = run_engine(AGG_DOWN)
    named = [[(d.root, d.fault_type) for d in s.diagnoses] for s in steps]
    assert _names(engine, focused[0]) == _names(engine, focused[-1]) == {"agg-0-0"}
    first = next(i for i, n in enumerate(named) if n)
    assert named[first:] == [[("agg-0-0", "switch_down")]] * (len(named) - first)


def test_a_switch_with_one_link_down_has_that_link_and_its_ends_scored(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One of its four neighbours sees it down: the link is the likelier root."""
    focused = _focused(monkeypatch)
    link = "agg-0-0:eth3~core-0:eth1"
    engine, steps = run_engine(FaultSpec(type=FaultType.LINK_DOWN, entity=link, start_s=15.0),
                               20)
    result = steps[-1]
    assert {link, "agg-0-0", "core-0"} <= _names(engine, focused[0])
    assert [(d.root, d.fault_type) for d in result.diagnoses] == [(link, "link_down")]


def test_the_service_says_so_once_and_shows_how_many_switches(
        caplog: pytest.LogCaptureFixture) -> None:
    sim = busy_fat_tree()
    topo = sim.fabric.topology
    switches = {n.id for n in topo.nodes if not n.is_host}
    bus = MemoryBus()
    bus.start()
    service = RcaService(RcaServiceConfig(), bus, topo, RcaModel.load(DEFAULT_MODEL))
    sink = BusFrameSink(bus)
    consumer = bus.subscribe([topic_name(Topic.TELEMETRY), topic_name(Topic.INT)], "rca")
    with caplog.at_level(logging.WARNING, logger="fabricops.rca.service"):
        for tick in range(20):
            sim.step()
            sink.publish_frames([f for f in sim.frames()
                                 if tick < 12 or f.device not in switches])
            service.process(consumer.poll(0.0, 10_000))
    said = [r.getMessage() for r in caplog.records if "collection outage" in r.getMessage()]
    assert len(said) == 1, "said once, not once a step"
    assert said[0].startswith("rca: 20 switches stopped reporting")
    assert service.m_outage._value.get() == 20
    assert not service.diagnoses
    bus.stop()


def test_a_switch_that_goes_down_is_named_with_its_silence_told_once() -> None:
    d = run_engine(AGG_DOWN)[1][-1].diagnosis
    assert d is not None
    assert (d.root, d.fault_type) == ("agg-0-0", "switch_down")
    told = [(e.entity, e.signal) for e in d.evidence]
    assert told.count(("agg-0-0", STOPPED)) == 1, told
