"""Scoring what an operator would: every concurrent root must be named, unseen faults apart."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fabricops.core.records import Diagnosis, RankedEntity
from fabricops.evaluation.replay import ReplayResult, TickOutcome
from fabricops.evaluation.scenarios import LabelledScenario
from fabricops.evaluation.scoring import score
from fabricops.evaluation.summary import reliability, share, summary
from fabricops.rca.features import Candidates
from fabricops.rca.view import PortIndex
from fabricops.simulator.builders import fat_tree

TOPO = fat_tree(k=4)
CAND = Candidates.of(PortIndex(TOPO))
POS = {name: i for i, name in enumerate(CAND.names)}
LINK_A = CAND.names[0]
LINK_B = CAND.names[5]
NIC = "host-003:nic0"
ONSET = 20.0


def diag(root: str, ftype: str, t_s: float, conf: float = 0.9,
         alternatives: tuple[str, ...] = ()) -> Diagnosis:
    ranked = tuple(RankedEntity(entity=e, kind="link", probability=0.1, fault_type=ftype)
                   for e in (root, *alternatives))
    return Diagnosis(id=f"dx-{root}", ts_ns=int(t_s * 1e9), onset_ns=0, root=root,
                     root_kind="link", fault_type=ftype, confidence=conf, ranked=ranked)


def result(faults: list[tuple[str, str]], per_tick: dict[float, list[Diagnosis]],
           seen: list[float | None] | None = None, end: float = 32.0) -> ReplayResult:
    docs = tuple({"type": t, "entity": e, "start_s": ONSET, "params": {}} for e, t in faults)
    ls = LabelledScenario(0, 1, ("fat_tree", {"k": 4}), {}, docs, "fat_tree k=4 1:1")
    truth = [({POS[e]}, t, ONSET) for e, t in faults]
    r = ReplayResult(ls, CAND, truth, seen_s=seen if seen is not None else [ONSET] * len(faults))
    for k in range(1, int(end) + 1):
        ds = tuple(per_tick.get(float(k), []))
        r.ticks.append(TickOutcome(float(k), ds[0] if ds else None, [], [], ds))
    return r


def test_naming_one_of_two_concurrent_faults_is_a_miss() -> None:
    both = {t: [diag(LINK_A, "gray_loss", t), diag(NIC, "pfc_storm", t)]
            for t in (30.0, 31.0, 32.0)}
    one = {t: [diag(LINK_A, "gray_loss", t)] for t in (30.0, 31.0, 32.0)}
    faults = [(LINK_A, "gray_loss"), (NIC, "pfc_storm")]
    assert score(result(faults, both)).methods["model"].all_top1
    missed = score(result(faults, one)).methods["model"]
    assert not missed.all_top1
    assert [f.top1 for f in missed.faults] == [True, False]


def test_a_fault_no_telemetry_could_see_is_set_aside_and_counted() -> None:
    per_tick = {t: [diag(LINK_A, "gray_loss", t)] for t in (30.0, 31.0, 32.0)}
    s = score(result([(LINK_A, "gray_loss"), (LINK_B, "gray_loss")], per_tick,
                     seen=[ONSET + 1, None]))
    assert s.methods["model"].all_top1  # the unobservable one is not required
    unseen = score(result([(LINK_B, "gray_loss")], {}, seen=[None]))
    out = summary([s, unseen])
    assert (out["faults"], out["unobservable"], out["counted"]) == (3, 2, 1)
    assert out["methods"]["model"]["top1"]["rate"] == 1.0


def test_a_root_named_elsewhere_is_an_extra_and_a_false_positive_of_its_type() -> None:
    per_tick = {t: [diag(LINK_A, "gray_loss", t), diag(LINK_B, "link_flap", t, 0.6)]
                for t in (30.0, 31.0, 32.0)}
    s = score(result([(LINK_A, "gray_loss")], per_tick))
    m = s.methods["model"]
    assert m.extra == ["link_flap"]
    assert sorted(m.calibration) == [(0.6, False), (0.9, True)]
    out = summary([s])["methods"]["model"]
    assert out["per_type"]["link_flap"]["precision"] == 0.0
    assert out["extra_roots"] == 1


def test_top3_counts_a_root_among_the_alternatives() -> None:
    per_tick = {t: [diag(LINK_B, "gray_loss", t, alternatives=(LINK_A,))]
                for t in (30.0, 31.0, 32.0)}
    f = score(result([(LINK_A, "gray_loss")], per_tick)).methods["model"].faults[0]
    assert (f.top1, f.top3, f.pred_type) == (False, True, "none")


def test_an_answer_that_stopped_before_the_window_closed_does_not_count() -> None:
    early = {21.0: [diag(LINK_A, "gray_loss", 21.0)]}
    f = score(result([(LINK_A, "gray_loss")], early)).methods["model"].faults[0]
    assert not f.top1
    assert f.ttd_s == pytest.approx(1.0)


def test_incidents_before_the_onset_are_false_diagnoses() -> None:
    per_tick = {5.0: [diag(LINK_B, "gray_loss", 5.0)], 32.0: [diag(LINK_A, "gray_loss", 32.0)]}
    assert score(result([(LINK_A, "gray_loss")], per_tick)).methods["model"].false_incidents == 1


def test_wilson_interval_of_a_small_count() -> None:
    s = share([True] * 7 + [False] * 5)
    assert (s["n"], s["k"]) == (12, 7)
    assert s["low"] == pytest.approx(0.3195, abs=1e-3)
    assert s["high"] == pytest.approx(0.8067, abs=1e-3)
    assert share([])["rate"] is None
    edge = share([True] * 3)
    assert edge["high"] == pytest.approx(1.0)
    assert 0.0 < edge["low"] < 1.0


def test_reliability_table_bins_confidence_and_ignores_out_of_range_values() -> None:
    rows = reliability([(0.55, False), (0.97, True), (0.99, True), (1.0, True),
                        (0.2, True), (math.nan, True), (1.5, False)])
    by_bin = {r["bin"]: r for r in rows}
    assert by_bin["0.50-0.60"]["n"] == 1
    assert by_bin["0.50-0.60"]["right"]["rate"] == 0.0
    assert by_bin["0.95-1.00"]["n"] == 3
    assert sum(r["n"] for r in rows) == 4  # below the floor, NaN and > 1 fall in no bin
    assert np.isclose(by_bin["0.95-1.00"]["confidence"], (0.97 + 0.99 + 1.0) / 3)


def test_a_run_of_soaks_alone_scores_no_accuracy_and_lists_each_soak() -> None:
    from fabricops.cli.rca_report import targets_met

    healthy = result([], {})
    false_one = result([], {12.0: [diag(LINK_A, "link_down", 12.0)]})
    out = summary([score(healthy), score(false_one)])
    assert out["methods"]["model"]["macro_f1"] is None, "no faulty scenario: no F1"
    assert [s["false"] for s in out["soaks"]] == [0, 1]
    met, missed = targets_met(out)
    assert "macro_f1" not in met + missed
    assert missed == ["false_total"]
