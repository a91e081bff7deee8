"""Safety without a fabric: devices that do not answer, the load pre-check, the blast radius
and observe mode."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricops.core.actions import ActionKind, ActionMode, ActionState, Step, StepOp
from fabricops.core.faults import FaultType
from fabricops.core.records import Diagnosis
from fabricops.remediation.actuator import Actuators, RecordingActuator
from fabricops.remediation.engine import RemediationConfig, RemediationEngine
from fabricops.remediation.safety import BlastRadius, SafetyConfig, footprint
from fabricops.remediation.twin import LoadTwin
from fabricops.remediation.watch import FabricWatch
from tests.remediation.policy_fabric import (
    HOST_LINKS,
    NICS,
    PLACEMENT,
    SWITCH_LINKS,
    SWITCHES,
    TOPO,
    diagnosis,
    policy,
)


def auto_engine(actuator: RecordingActuator, **safety: object) -> RemediationEngine:
    """An engine in auto mode on the test fabric, acting through ``actuator``."""
    cfg = RemediationConfig(safety=SafetyConfig.model_validate({"mode": "auto", **safety}))
    return RemediationEngine(cfg, TOPO, Actuators.single(actuator), FabricWatch(TOPO),
                             PLACEMENT)


def test_a_drain_that_meets_a_device_that_does_not_answer_is_planned_again_without_it(
        ) -> None:
    """Before the RCA sees the switch fall silent, the drain goes to both ends; the far
    end's management does not answer when asked, before any step, so nothing is applied
    and the link is shut at once at the end that does."""
    link = TOPO.link_by_id[SWITCH_LINKS[0]]
    quiet = link.b.split(":")[0]
    actuator = RecordingActuator(unreachable=frozenset({quiet}))
    engine = auto_engine(actuator)
    a = engine.on_diagnosis(diagnosis("link_flap", link.id), 10)
    assert a is not None
    assert (a.kind, a.state, a.steps) == (ActionKind.SHUT_LINK, ActionState.APPLIED,
                                          (Step(op=StepOp.SHUT_PORT, target=link.a),))
    (drain,) = [x for x in engine.actions.values() if x.kind is ActionKind.DRAIN_LINK]
    assert drain.state is ActionState.REJECTED
    assert drain.audit[-1].actor == "precheck"
    assert drain.audit[-1].note.endswith("unreachable; nothing applied")
    assert [(s.op, s.target) for s in actuator.applied] == [(StepOp.SHUT_PORT, link.a)], \
        "the drain was never half applied at the end that answers"
    assert [s.target for s in actuator.checked] == [link.a, link.b, link.a]


def test_a_device_that_answers_and_then_fails_its_step_is_undone() -> None:
    """Asking ahead does not replace the undo: a far end that answers, then refuses its
    step, fails the drain and the near end's step is undone."""
    link = TOPO.link_by_id[SWITCH_LINKS[0]]
    actuator = RecordingActuator(fail=frozenset({link.b}))
    engine = auto_engine(actuator)
    engine.on_diagnosis(diagnosis("link_flap", link.id), 10)
    (drain,) = [x for x in engine.actions.values() if x.kind is ActionKind.DRAIN_LINK]
    assert drain.state is ActionState.FAILED
    assert "refused by the device; undid 1 step(s)" in drain.audit[-1].note
    assert [(s.op, s.target, s.params) for s in actuator.applied] == [
        (StepOp.SET_WEIGHT, link.a, {"weight": 0}), (StepOp.SET_WEIGHT, link.a, {"weight": 1})]


def test_a_remedy_is_planned_again_only_once_when_devices_do_not_answer() -> None:
    """Neither end answers: the drain is refused at the first, the shut at the second,
    nothing is applied and nothing more is tried (each ask may wait a whole timeout)."""
    link = TOPO.link_by_id[SWITCH_LINKS[0]]
    ends = frozenset(p.split(":")[0] for p in (link.a, link.b))
    actuator = RecordingActuator(unreachable=ends)
    engine = auto_engine(actuator)
    a = engine.on_diagnosis(diagnosis("link_flap", link.id), 10)
    assert a is not None
    assert (a.kind, a.state) == (ActionKind.SHUT_LINK, ActionState.REJECTED)
    assert sorted((x.kind.value, x.state.value) for x in engine.actions.values()) == [
        ("drain_link", "rejected"), ("shut_link", "rejected")]
    assert actuator.applied == []
    assert len(actuator.checked) == 2


def test_a_switch_drain_meeting_a_neighbour_that_does_not_answer_goes_on_without_it(
        ) -> None:
    spine = next(s for s in SWITCHES if s.startswith("spine"))
    facing = [TOPO.peer_of[f"{spine}:{p.name}"] for p in TOPO.node_by_id[spine].ports
              if f"{spine}:{p.name}" in TOPO.peer_of]
    quiet = facing[-1].split(":")[0]
    actuator = RecordingActuator(unreachable=frozenset({quiet}))
    engine = auto_engine(actuator, max_uplink_share=1.0)
    a = engine.on_diagnosis(diagnosis("switch_down", spine), 10)
    assert a is not None
    assert (a.kind, a.state) == (ActionKind.DRAIN_SWITCH, ActionState.APPLIED)
    assert [s.target for s in a.steps if s.op is StepOp.SET_WEIGHT] == [
        p for p in facing if not p.startswith(f"{quiet}:")]
    (first,) = [x for x in engine.actions.values() if x.id != a.id]
    assert (first.kind, first.state) == (ActionKind.DRAIN_SWITCH, ActionState.REJECTED)
    assert [s for s in actuator.applied if s.op is StepOp.SET_WEIGHT] == [
        s for s in a.steps if s.op is StepOp.SET_WEIGHT], "only the drain that went on"
    assert engine.on_diagnosis(diagnosis("switch_down", spine), 11) is None, "handled"


def test_the_precheck_spreads_a_polarized_switchs_uplinks_evenly() -> None:
    twin = LoadTwin(TOPO)
    leaf = next(s for s in SWITCHES if s.startswith("leaf-"))
    fix = policy().plan(diagnosis("hash_polarization", leaf), mode=ActionMode.AUTO, ts_ns=5)
    uplinks = [i for i, p in enumerate(twin.ports) if p.startswith(f"{leaf}:")
               and not TOPO.port_by_id[TOPO.peer_of[p]][0].is_host]
    util = np.zeros(len(twin.ports))
    util[uplinks[0]] = 1.0  # every flow of the leaf on one uplink
    pred = twin.predict(fix, util)
    assert pred is not None
    assert pred.port.startswith(f"{leaf}:")
    assert pred.utilization == pytest.approx(1.0 / len(uplinks))
    assert pred.moved_bps == pytest.approx(twin.speed_bps[uplinks[0]]
                                           * (1 - 1.0 / len(uplinks)))
    undo = fix.model_copy(update={"steps": (fix.steps[0].model_copy(
        update={"params": {"l4": False}}),)})
    assert twin.predict(undo, util) is None  # where L3-only hashing puts traffic is unknown


def test_the_engine_applies_a_hash_fix_and_records_its_undo() -> None:
    actuator = RecordingActuator()
    engine = auto_engine(actuator)
    leaf = next(s for s in SWITCHES if s.startswith("leaf-"))
    a = engine.on_diagnosis(diagnosis("hash_polarization", leaf), 10)
    assert a is not None
    assert a.state is ActionState.APPLIED
    assert [s.op for s in actuator.applied] == [StepOp.SET_HASH]
    # the recording actuator reports no previous hash: the undo restores the default, L3+L4
    assert [(s.op, s.target, s.params) for s in a.undo] == [
        (StepOp.SET_HASH, leaf, {"l4": True})]


def test_the_precheck_refuses_a_drain_that_overloads_the_remaining_uplinks() -> None:
    twin = LoadTwin(TOPO)
    link = TOPO.link_by_id[SWITCH_LINKS[0]]
    drain = policy().plan(diagnosis("gray_loss", link.id), mode=ActionMode.AUTO, ts_ns=5)
    leaf = link.a.split(":")[0]
    util = np.zeros(len(twin.ports))
    uplinks = [i for i, p in enumerate(twin.ports) if p.startswith(f"{leaf}:")
               and not TOPO.port_by_id[TOPO.peer_of[p]][0].is_host]
    util[uplinks] = 0.5
    light = twin.predict(drain, util)
    assert light is not None
    assert light.utilization < 0.9
    util[uplinks] = 0.85
    heavy = twin.predict(drain, util)
    assert heavy is not None
    assert heavy.utilization > 0.9
    assert heavy.port.startswith(f"{leaf}:")
    assert "would run at" in heavy.describe()


def test_the_engine_rejects_an_overloading_action_and_touches_nothing() -> None:
    actuator = RecordingActuator()
    cfg = RemediationConfig(safety=SafetyConfig(mode=ActionMode.AUTO, max_uplink_share=0.5))
    watch = FabricWatch(TOPO)
    engine = RemediationEngine(cfg, TOPO, Actuators.single(actuator), watch, PLACEMENT)
    watch.util_tx[:] = 0.8  # every port busy: nowhere to move a link's traffic
    a = engine.on_diagnosis(diagnosis("gray_loss", SWITCH_LINKS[0]), 10)
    assert a is not None
    assert a.state is ActionState.REJECTED
    assert a.audit[-1].actor == "precheck"
    assert "would run at" in a.audit[-1].note
    assert actuator.applied == []


def _links_of_switch_ports(ports: set[str]) -> dict[str, int]:
    per: dict[str, int] = {}
    for p in ports:
        per[p.split(":")[0]] = per.get(p.split(":")[0], 0) + 1
    return per


FAULTS = [t.value for t in FaultType]


@st.composite
def diagnoses(draw: st.DrawFn) -> list[Diagnosis]:
    out = []
    for i in range(50):
        fault = draw(st.sampled_from(FAULTS))
        pool = {"link": SWITCH_LINKS + HOST_LINKS, "switch": SWITCHES, "nic": NICS}
        kind = draw(st.sampled_from(sorted(pool)))
        root = draw(st.sampled_from(pool[kind]))
        conf = draw(st.floats(0.0, 1.0))
        out.append(diagnosis(fault, root, conf, did=f"dx-{i}"))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(storm=diagnoses(), share=st.sampled_from([0.25, 0.5]), hosts=st.integers(0, 3),
       per_window=st.integers(1, 8))
def test_a_storm_of_50_random_diagnoses_never_breaks_the_blast_radius(
        storm: list[Diagnosis], share: float, hosts: int, per_window: int) -> None:
    safety = SafetyConfig(mode=ActionMode.AUTO, confidence_floor=0.5, max_uplink_share=share,
                          max_hosts_drained=hosts, max_actions=per_window, window_s=60.0)
    actuator = RecordingActuator()
    engine = RemediationEngine(RemediationConfig(safety=safety), TOPO,
                               Actuators.single(actuator), FabricWatch(TOPO),
                               {k: list(v) for k, v in PLACEMENT.items()})
    fabric_ports = BlastRadius(safety, TOPO).fabric_ports
    applied_at: list[int] = []
    for k, d in enumerate(storm):
        now = k * 5 * 10**9  # one diagnosis every 5 s: 12 per window
        a = engine.on_diagnosis(d, now)
        if d.confidence < safety.confidence_floor:
            assert a is None
        live = [x for x in engine.actions.values()
                if x.state in (ActionState.APPLIED, ActionState.VERIFIED)]
        if a is not None and a.state is ActionState.APPLIED and a.kind is not ActionKind.TICKET:
            applied_at.append(now)
        drained = set().union(*(footprint(x, TOPO).ports for x in live))
        for switch, n in _links_of_switch_ports(drained).items():
            assert n <= share * fabric_ports[switch], (switch, n)
        out_hosts = set().union(*(footprint(x, TOPO).hosts for x in live))
        assert len(out_hosts) <= hosts
        recent = [t for t in applied_at if t > now - 60 * 10**9]
        assert len(recent) <= per_window
    assert all(x.state is not ActionState.APPROVED for x in engine.actions.values())


def test_actions_in_effect_before_a_restart_still_count_against_the_blast_radius() -> None:
    safety = SafetyConfig(mode=ActionMode.AUTO, max_uplink_share=0.25)
    leaf = TOPO.link_by_id[SWITCH_LINKS[0]].a.split(":")[0]
    mine = [lk for lk in SWITCH_LINKS if lk.startswith(f"{leaf}:")]
    first = RemediationEngine(RemediationConfig(safety=safety), TOPO,
                              Actuators.single(RecordingActuator()), FabricWatch(TOPO), PLACEMENT)
    applied = [first.on_diagnosis(diagnosis("gray_loss", lk, did=f"dx-{i}"), 10 + i)
               for i, lk in enumerate(mine[:2])]
    assert [a.state for a in applied if a] == [ActionState.APPLIED, ActionState.APPLIED]
    restarted = RemediationEngine(RemediationConfig(safety=safety), TOPO,
                                  Actuators.single(RecordingActuator()), FabricWatch(TOPO),
                                  PLACEMENT)
    restarted.resume([a for a in applied if a])
    third = restarted.on_diagnosis(diagnosis("gray_loss", mine[2], did="dx-9"), 20)
    assert third is not None
    assert third.state is ActionState.REJECTED
    assert "blast radius" in third.audit[-1].note


def test_observe_mode_never_applies_even_an_approved_action() -> None:
    actuator = RecordingActuator()
    engine = RemediationEngine(RemediationConfig(safety=SafetyConfig(mode=ActionMode.OBSERVE)),
                               TOPO, Actuators.single(actuator), FabricWatch(TOPO), PLACEMENT)
    a = engine.on_diagnosis(diagnosis("gray_loss", SWITCH_LINKS[0]), 10)
    assert a is not None
    engine.approve(a.id, 11, actor="operator:carol")
    engine.tick(12)
    assert engine.actions[a.id].state is ActionState.APPROVED
    assert actuator.applied == []
