"""The hard cases of root-cause analysis, each on a busy simulated fabric, through the bus.

The RCA sees only the telemetry the simulator's devices export (frames and INT
reports on an in-process bus); the fault labels are used here to check it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fabricops.core.frame import Frame
from fabricops.core.records import Diagnosis
from fabricops.evaluation.replay import ReplayResult, replay
from fabricops.evaluation.scenarios import TOPOLOGIES, LabelledScenario, topology_of
from fabricops.rca.detect import STOPPED
from fabricops.rca.model import DEFAULT_MODEL, RcaModel

LEAF_SPINE = 0  # leaf-spine, 128 GPUs, 16 hosts of 8 NICs
ONSET = 22.0


@pytest.fixture(scope="module")
def model() -> RcaModel:
    if not DEFAULT_MODEL.exists():
        pytest.fail(f"the packaged RCA model {DEFAULT_MODEL} is missing; run fabricops rca train")
    return RcaModel.load(DEFAULT_MODEL)


def scenario(faults: list[dict[str, Any]], *, seed: int = 7, duration: float = 36.0,
             topo: int = LEAF_SPINE, job: dict[str, Any] | None = None) -> LabelledScenario:
    hosts = sum(1 for _ in topology_of(topo).hosts())
    jobs = [job or {"name": "job-llm-01", "hosts": hosts, "placement": "random",
                    "compute_s": 0.5, "comm_bytes_per_nic": 40e9}]
    doc = {"name": "hard-case", "seed": seed, "duration_s": duration, "tick_s": 1.0,
           "topology": {"builder": TOPOLOGIES[topo][0], "params": TOPOLOGIES[topo][1]},
           "jobs": jobs, "faults": faults}
    return LabelledScenario(0, seed, TOPOLOGIES[topo], doc, tuple(faults))


def final(r: ReplayResult) -> Diagnosis:
    got = [t.diagnosis for t in r.ticks if t.diagnosis is not None]
    assert got, "no diagnosis at all"
    return got[-1]


def first_right(r: ReplayResult, root: str) -> float:
    for t in r.ticks:
        if t.diagnosis is not None and t.diagnosis.root == root:
            return t.t_s - ONSET
    raise AssertionError(f"{root} was never named")


def no_diagnosis_before_onset(r: ReplayResult) -> None:
    early = [t.diagnosis for t in r.ticks if t.t_s <= ONSET and t.diagnosis is not None]
    assert early == [], f"diagnosed before the fault: {early[0].root}"


def test_gray_loss_1e4_on_one_link_of_a_busy_fabric(model: RcaModel) -> None:
    link = "leaf-1:eth22~spine-1:eth6"
    r = replay(scenario([{"type": "gray_loss", "entity": link, "start_s": ONSET,
                          "params": {"loss_rate": 1e-4}}]), model)
    no_diagnosis_before_onset(r)
    d = final(r)
    assert (d.root, d.fault_type) == (link, "gray_loss")
    assert first_right(r, link) <= 3.0
    assert any(e.signal == "fcs_error_ratio" for e in d.evidence)


def test_pfc_storm_found_at_its_origin_not_where_the_pauses_spread(model: RcaModel) -> None:
    nic = "host-005:nic2"
    r = replay(scenario([{"type": "pfc_storm", "entity": nic, "start_s": ONSET}]), model,
               keep_steps=True)
    ix = topology_of(LEAF_SPINE)
    step = r.steps[-1]
    # the premise: the pause has spread past the ToR to a device two hops from the NIC
    near = {nic.split(":")[0], ix.peer_of[nic].split(":")[0]}
    port_node = [n.id for n in ix.nodes for _ in n.ports]
    paused = [port_node[p] for p, share in enumerate(step.signals.pause_rx.tolist())
              if share > 0.01]
    far = [n for n in paused if n not in near]
    assert far, f"premise: paused ports {paused}"
    d = final(r)
    assert (d.root, d.fault_type) == (nic, "pfc_storm")
    assert first_right(r, nic) <= 3.0


@pytest.mark.parametrize(("topo", "switch"), [
    (LEAF_SPINE, "leaf-2"),
    (2, "agg-0-1"),  # a k=4 fat-tree aggregation switch: two uplinks, a handful of QP pairs
    (3, "leaf-2-2"),  # a rail-optimized leaf
])
def test_hash_polarization_with_no_errors_anywhere(model: RcaModel, topo: int,
                                                   switch: str) -> None:
    r = replay(scenario([{"type": "hash_polarization", "entity": switch, "start_s": ONSET}],
                        seed=11, topo=topo), model, keep_steps=True)
    for step in r.steps:
        assert float(step.signals.fcs_rate.sum()) == 0.0
        assert float(step.signals.discards.sum()) == 0.0
        assert not step.signals.oper_down.any()
    no_diagnosis_before_onset(r)
    d = final(r)
    assert (d.root, d.fault_type) == (switch, "hash_polarization")
    assert first_right(r, switch) <= 3.0


@pytest.mark.parametrize(("fault", "params"), [
    ("slow_receiver", {"drain_share": 0.2}),
    ("incast", {"fan_in": 8, "rate_share": 0.9}),
])
def test_slow_receiver_and_incast_on_the_same_nic_are_told_apart(
        model: RcaModel, fault: str, params: dict[str, Any]) -> None:
    nic = "host-009:nic4"
    r = replay(scenario([{"type": fault, "entity": nic, "start_s": ONSET, "params": params}]),
               model)
    d = final(r)
    assert (d.root, d.fault_type) == (nic, fault)


def test_an_incast_is_named_as_soon_as_its_queue_stands_not_once_it_has_lasted(
        model: RcaModel) -> None:
    nic = "host-009:nic4"
    r = replay(scenario([{"type": "incast", "entity": nic, "start_s": ONSET,
                          "params": {"fan_in": 8, "rate_share": 0.9}}]), model)
    no_diagnosis_before_onset(r)
    assert first_right(r, nic) <= 3.0
    assert final(r).fault_type == "incast"


def test_a_switch_that_stops_reporting_is_named_with_its_silence_as_evidence(
        model: RcaModel) -> None:
    """Its silence is what shows it down: evidence of the diagnosis, not a blind spot
    that lowers its confidence (as the silence of an unrelated device does, below)."""
    r = replay(scenario([{"type": "switch_down", "entity": "spine-1", "start_s": ONSET}]),
               model)
    d = final(r)
    assert (d.root, d.fault_type) == ("spine-1", "switch_down")
    assert any(e.signal == STOPPED and e.entity == "spine-1" for e in d.evidence)
    assert "spine-1" not in d.missing
    assert not any(e.signal == "missing" and e.entity == "spine-1" for e in d.evidence)
    assert d.confidence >= 0.95


def test_a_gap_in_an_unrelated_device_lowers_confidence_and_is_named(model: RcaModel) -> None:
    link = "leaf-2:eth20~spine-0:eth12"
    faults = [{"type": "gray_loss", "entity": link, "start_s": ONSET,
               "params": {"loss_rate": 1e-3}}]
    whole = final(replay(scenario(faults), model))

    def gap(frame: Frame) -> bool:  # leaf-6 goes quiet from the fault's onset on
        return frame.device == "leaf-6" and frame.ts_ns > 1_767_225_600_000_000_000 + 24e9

    gapped = final(replay(scenario(faults), model, drop=gap))
    assert (gapped.root, gapped.fault_type) == (link, "gray_loss")
    assert "leaf-6" in gapped.missing
    assert gapped.confidence < whole.confidence
    assert np.isfinite(gapped.confidence)


def test_loss_on_a_direction_no_packet_crosses_is_scored_as_untouched() -> None:
    """Evaluation tells faults no telemetry can show (loss where nothing flows) apart."""
    import dataclasses

    link = "leaf-1:eth22~spine-1:eth6"  # this job sends nothing leaf -> spine on it
    fault = {"type": "gray_loss", "entity": link, "start_s": 22.321,
             "params": {"loss_rate": 0.0038, "direction": "a_to_b"}}
    job = {"name": "job-train-a", "hosts": 16, "placement": "random",
           "compute_s": 1.1845204871419928, "comm_bytes_per_nic": 43105214628.7239}
    idle = scenario([fault], seed=2000014, duration=34.0, job=job)
    r = replay(idle, None)
    assert r.touched is False
    assert r.seen_s == [None]
    busy_fault = {**fault, "params": {**fault["params"], "direction": "b_to_a"}}
    busy = dataclasses.replace(idle, doc={**idle.doc, "faults": [busy_fault]},
                               faults=(busy_fault,))
    r = replay(busy, None)
    assert r.touched is True
    assert r.seen_s[0] is not None
    assert r.seen_s[0] > 22.321


def _switch_link(leaf: str) -> str:
    topo = topology_of(LEAF_SPINE)
    return next(lk.id for lk in topo.links if lk.id.startswith(f"{leaf}:")
                and "spine" in lk.id)


def named_at_end(r: ReplayResult) -> set[tuple[str, str]]:
    """(root, type) of every incident open when the scenario ends."""
    from fabricops.evaluation.scoring import answers, final_answers

    return {(a.ranked[0], a.fault_type)
            for a in final_answers(answers(r, "model"), r.ticks[-1].t_s)}


def test_two_faults_at_once_are_each_named_in_their_own_incident(model: RcaModel) -> None:
    link, down = _switch_link("leaf-1"), _switch_link("leaf-6")
    r = replay(scenario([
        {"type": "gray_loss", "entity": link, "start_s": ONSET, "params": {"loss_rate": 1e-3}},
        {"type": "link_down", "entity": down, "start_s": ONSET + 3.0}],
        duration=40.0), model)
    no_diagnosis_before_onset(r)
    assert {(link, "gray_loss"), (down, "link_down")} <= named_at_end(r)
    both = next(t.diagnoses for t in r.ticks if len(t.diagnoses) >= 2)
    assert len({d.id for d in both}) == len(both)


def test_a_lossy_link_stays_named_while_another_fault_stalls_the_job(model: RcaModel) -> None:
    topo = topology_of(LEAF_SPINE)
    lossy = topo.link_of_port("host-003:nic2")
    dead = "host-012:nic5"  # the collective waits for it: no traffic crosses anything
    r = replay(scenario([
        {"type": "gray_loss", "entity": lossy, "start_s": ONSET, "params": {"loss_rate": 1e-3}},
        {"type": "nic_down", "entity": dead, "start_s": ONSET + 4.0}], duration=ONSET + 20.0),
        model)
    assert first_right(r, lossy) <= 3.0
    assert {(lossy, "gray_loss"), (dead, "nic_down")} <= named_at_end(r)
    last = next(d for d in r.ticks[-1].diagnoses if d.root == lossy)
    assert last.evidence[0].signal == "no_traffic"  # held on its last evidence, and says so


def test_a_fault_during_a_flap_is_named_beside_the_flap(model: RcaModel) -> None:
    flap = _switch_link("leaf-2")  # ECMP routes around it: the job keeps running
    lossy = _switch_link("leaf-5")
    r = replay(scenario([
        {"type": "link_flap", "entity": flap, "start_s": ONSET,
         "params": {"down_s": 1.5, "period_s": 4.0}},
        {"type": "gray_loss", "entity": lossy, "start_s": ONSET + 3.0,
         "params": {"loss_rate": 1e-3}}], duration=40.0), model)
    assert {(flap, "link_flap"), (lossy, "gray_loss")} <= named_at_end(r)


def test_polarization_is_found_while_another_link_flaps(model: RcaModel) -> None:
    flap = _switch_link("leaf-2")
    r = replay(scenario([
        {"type": "link_flap", "entity": flap, "start_s": ONSET,
         "params": {"down_s": 1.5, "period_s": 4.0}},
        {"type": "hash_polarization", "entity": "leaf-6", "start_s": ONSET + 3.0}],
        duration=40.0), model)
    assert {(flap, "link_flap"), ("leaf-6", "hash_polarization")} <= named_at_end(r)


def test_a_slow_host_keeps_one_named_nic_while_its_incident_lasts(model: RcaModel) -> None:
    """Every NIC of a slow host pauses alike; revisions do not hop from one to another."""
    r = replay(scenario([{"type": "slow_receiver", "entity": "host-013", "start_s": ONSET}],
                        duration=40.0), model)
    named = [t.diagnosis for t in r.ticks if t.diagnosis is not None]
    assert len(named) >= 10
    assert {d.root for d in named} == {named[0].root}
    assert named[0].root.startswith("host-013:")
    assert {d.fault_type for d in named} == {"slow_receiver"}
    assert {d.id for d in named} == {named[0].id}
