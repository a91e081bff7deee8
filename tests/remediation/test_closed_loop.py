"""The closed loop on the simulated fabric: fault -> diagnosis -> action -> recovery.

The RCA and remediation see only the bus; the job's throughput is scored
against a fault-free run with the same steps applied at the same ticks.
"""

from __future__ import annotations

import functools

import pytest

from fabricops.core.actions import ActionKind, ActionMode, ActionState, Step, StepOp
from fabricops.core.faults import FaultType
from fabricops.core.records import Diagnosis
from fabricops.evaluation.closedloop import fault_for, run_loop
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.remediation.engine import RemediationConfig, RemediationEngine
from fabricops.remediation.safety import SafetyConfig

pytestmark = pytest.mark.slow
REMEDIED = [FaultType.LINK_DOWN, FaultType.LINK_FLAP, FaultType.GRAY_LOSS,
            FaultType.OPTIC_DEGRADATION, FaultType.PFC_DEADLOCK, FaultType.PFC_STORM,
            FaultType.SLOW_RECEIVER, FaultType.NIC_DOWN, FaultType.SWITCH_DOWN,
            FaultType.HASH_POLARIZATION]


@functools.cache
def model() -> RcaModel:
    return RcaModel.load(DEFAULT_MODEL)


def auto(**safety: object) -> RemediationConfig:
    return RemediationConfig(safety=SafetyConfig.model_validate({"mode": "auto", **safety}))


@pytest.mark.parametrize("fault", REMEDIED, ids=lambda f: f.value)
def test_auto_mode_heals_the_fault_and_the_job_gets_its_throughput_back(
        fault: FaultType) -> None:
    r = run_loop(fault_for(fault), model(), auto())
    assert r.detect_s is not None
    assert r.detect_s <= 2.0
    assert r.locate_s is not None
    assert r.locate_s <= 3.0
    assert r.recover_s is not None, r.relative
    assert r.recover_s <= 5.0, r.relative
    assert r.throughput_share >= 0.95
    applied = [a for a in r.actions if a.state is ActionState.VERIFIED]
    assert len(applied) == 1
    assert applied[0].kind is not ActionKind.TICKET
    trail = [e.state for e in applied[0].audit]
    assert trail == [ActionState.PROPOSED, ActionState.APPROVED, ActionState.APPLIED,
                     ActionState.VERIFIED]


def test_a_polarized_switch_gets_its_hash_back_on_l4_and_the_job_recovers() -> None:
    fault = fault_for(FaultType.HASH_POLARIZATION)
    r = run_loop(fault, model(), auto())
    (a,) = r.actions
    assert (a.kind, a.target, a.state) == (ActionKind.FIX_HASH, fault["entity"],
                                           ActionState.VERIFIED)
    assert a.steps == (Step(op=StepOp.SET_HASH, target=fault["entity"], params={"l4": True}),)
    assert a.undo == (Step(op=StepOp.SET_HASH, target=fault["entity"], params={"l4": False}),)
    assert r.act_s is not None
    assert r.recover_s is not None, r.relative  # and from then on the job ran at >= 95 %


def test_an_incast_is_paced_at_the_victim_and_the_job_recovers() -> None:
    fault = fault_for(FaultType.INCAST)
    r = run_loop(fault, model(), auto())
    (a,) = r.actions
    assert (a.kind, a.target, a.state) == (ActionKind.LIMIT_INCAST, fault["entity"],
                                           ActionState.VERIFIED)
    (step,) = a.steps
    assert (step.op, step.params["job"]) == (StepOp.LIMIT_INGRESS, "job-llm-01")
    assert r.recover_s is not None, r.relative  # and from then on the job ran at >= 95 %
    assert min(r.relative[int(fault["start_s"]):int(fault["start_s"]) + 6]) < 0.5  # it hurt
    assert r.throughput_share >= 0.95


@pytest.mark.parametrize("fault", [FaultType.LINK_DOWN, FaultType.LINK_FLAP],
                         ids=lambda f: f.value)
def test_a_link_at_a_switch_whose_agent_is_gone_is_shut_at_its_other_end(
        fault: FaultType) -> None:
    """The spine stops reporting as the fault starts, forwards on, and refuses every
    configuration step: the link is shut at the leaf, and stays so (its silence is not
    what the action was to clear)."""
    spec = fault_for(fault)
    leaf_end, spine_end = sorted(spec["entity"].split("~"))
    spine = spine_end.split(":")[0]
    assert spine.startswith("spine")
    r = run_loop(spec, model(), auto(), withheld=(spine,))
    assert r.locate_s is not None
    assert any(spine in d.missing for d in r.diagnoses)
    (shut,) = [a for a in r.actions if a.state is ActionState.VERIFIED]
    assert (shut.kind, shut.target) == (ActionKind.SHUT_LINK, spec["entity"])
    assert shut.steps == (Step(op=StepOp.SHUT_PORT, target=leaf_end),)
    refused = [a for a in r.actions if a is not shut]  # before the spine's silence showed
    assert all(a.state is ActionState.REJECTED and a.audit[-1].note.endswith(
        "unreachable; nothing applied") for a in refused)
    assert [step for _, step in r.applied] == [shut.steps[0]], "nothing half applied"
    assert r.throughput_share >= 0.95


def test_a_deadlock_through_a_switch_whose_agent_is_gone_is_broken_and_no_host_moves(
        ) -> None:
    """The cycle through the silent spine still closes (its channels paused by the
    receivers' account): a link of it is shut, and no host is replaced (before, host
    links were named and their hosts replaced, and the job stayed stopped)."""
    spec = fault_for(FaultType.PFC_DEADLOCK)
    spine = next(p.split(":")[0] for p in spec["entity"].split("~") if p.startswith("spine"))
    r = run_loop(spec, model(), auto(), withheld=(spine,))
    verified = [a for a in r.actions if a.state is ActionState.VERIFIED]
    assert verified
    assert {a.kind for a in verified} == {ActionKind.SHUT_LINK}
    assert {d.fault_type for d in r.diagnoses} <= {"pfc_deadlock", "link_down"}
    assert not [a for a in r.actions if a.kind is ActionKind.REPLACE_NODE]
    assert r.recover_s is not None, r.relative
    assert r.throughput_share >= 0.95


def test_a_fault_free_run_gets_no_action() -> None:
    r = run_loop(None, model(), auto(), duration_s=90)
    assert r.diagnoses == []
    assert r.actions == []


def test_no_action_below_the_confidence_floor() -> None:
    seen: list[float] = []

    def doubtful(d: Diagnosis) -> Diagnosis:
        seen.append(round(d.confidence * 0.7, 4))
        return d.model_copy(update={"confidence": seen[-1]})

    r = run_loop(fault_for(FaultType.GRAY_LOSS), model(), auto(confidence_floor=0.8),
                 diagnosis_filter=doubtful)
    assert seen
    assert max(seen) < 0.8
    assert r.actions == []
    assert r.applied == []


def test_observe_mode_proposes_and_changes_nothing() -> None:
    r = run_loop(fault_for(FaultType.GRAY_LOSS), model(),
                 RemediationConfig(safety=SafetyConfig(mode=ActionMode.OBSERVE)))
    assert [a.state for a in r.actions] == [ActionState.PROPOSED]
    assert r.applied == []


def test_approve_mode_waits_for_a_person_and_applies_nothing_before() -> None:
    fault = fault_for(FaultType.GRAY_LOSS)
    approve_at_s = 30.0
    seen_before: list[ActionState] = []

    def person(engine: RemediationEngine, now_ns: int) -> None:
        t = (now_ns - START_NS) / 1e9
        for a in list(engine.actions.values()):
            if t < approve_at_s:
                seen_before.append(a.state)
            elif a.state is ActionState.PROPOSED:
                engine.approve(a.id, now_ns, actor="operator:alice")

    r = run_loop(fault, model(), RemediationConfig(safety=SafetyConfig(mode=ActionMode.APPROVE)),
                 on_tick=person)
    assert seen_before
    assert set(seen_before) == {ActionState.PROPOSED}
    (a,) = r.actions
    assert a.state is ActionState.VERIFIED
    assert [e.actor for e in a.audit][:2] == ["policy", "operator:alice"]
    first_tick = min(tick for tick, _ in r.applied)
    assert first_tick >= approve_at_s
    assert r.recover_s is not None
    assert r.recover_s >= approve_at_s - fault["start_s"]


START_NS = 1_767_225_600_000_000_000


def test_an_action_that_does_not_help_is_rolled_back_and_reported() -> None:
    fault = fault_for(FaultType.SLOW_RECEIVER)
    uplink = fault_for(FaultType.GRAY_LOSS)["entity"]

    def misdiagnose(d: Diagnosis) -> Diagnosis:
        # the fabric link of the slow host's leaf is blamed: draining it cannot help
        return d.model_copy(update={"fault_type": "gray_loss", "root": uplink})

    wrong = run_loop(fault, model(), auto(), diagnosis_filter=misdiagnose, duration_s=60)
    (a,) = [x for x in wrong.actions if x.kind is ActionKind.DRAIN_LINK]
    assert a.state is ActionState.ROLLED_BACK
    last = a.audit[-1]
    assert last.actor == "verifier"
    assert "did not help" in last.note
    assert "undid 2 step(s)" in last.note
    assert wrong.throughput_share < 0.95  # still slow: the real fault was never remedied


def test_the_precheck_on_measured_loads_refuses_a_drain_that_would_overload() -> None:
    # moving the bad link's measured traffic onto the leaf's other uplinks would take one
    # of them to about 70 %: past a 60 % limit, so the drain is refused, nothing applied
    r = run_loop(fault_for(FaultType.GRAY_LOSS), model(), auto(max_link_load=0.6))
    (a,) = r.actions
    assert a.state is ActionState.REJECTED
    assert a.audit[-1].actor == "precheck"
    assert "would run at" in a.audit[-1].note
    assert r.applied == []


def test_the_meter_marks_where_each_collective_starts_so_runs_compare_by_collective() -> None:
    """A run that fell a tick behind is compared at its own point of the collective."""
    from fabricops.evaluation.closedloop import JobMeter, scenario_doc
    from fabricops.simulator.scenario import build_simulator, scenario_from_dict

    sim = build_simulator(scenario_from_dict(scenario_doc(None, seed=7, duration_s=40.0), "m"))
    meter = JobMeter(sim)
    phases = [meter.step()[1] for _ in range(40)]
    starts = sorted({start for start, _ in phases})
    assert len(starts) >= 2, f"one collective in 40 s: {phases}"
    for start in starts:
        offsets = [since for s, since in phases if s == start]
        assert offsets == list(range(len(offsets)))  # 0, 1, 2, ... within a collective
