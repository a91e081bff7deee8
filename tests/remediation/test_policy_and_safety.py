"""Policy (diagnosis -> steps), blast radius and the load pre-check, without a fabric."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricops.core.actions import ActionKind, ActionMode, ActionState, Step, StepOp
from fabricops.core.faults import FaultType
from fabricops.core.records import Diagnosis
from fabricops.core.topology import Topology
from fabricops.remediation.actuator import Actuators, RecordingActuator, inverse
from fabricops.remediation.engine import RemediationConfig, RemediationEngine
from fabricops.remediation.policy import PlanError, Policy, PolicyConfig
from fabricops.remediation.safety import BlastRadius, SafetyConfig, footprint
from fabricops.remediation.twin import LoadTwin
from fabricops.remediation.watch import FabricWatch
from fabricops.simulator.builders import build

TOPO: Topology = build("leaf_spine", gpus=64, nics_per_host=4, leaf_radix=16, spine_radix=16)
HOSTS = [n.id for n in TOPO.hosts()]
PLACEMENT = {"job-a": HOSTS[:-4]}
SWITCH_LINKS = [lk.id for lk in TOPO.links if not (TOPO.port_by_id[lk.a][0].is_host
                                                   or TOPO.port_by_id[lk.b][0].is_host)]
HOST_LINKS = [lk.id for lk in TOPO.links if lk.id not in SWITCH_LINKS]
NICS = list(TOPO.nics())
SWITCHES = [n.id for n in TOPO.switches()]


def diagnosis(fault: str, root: str, confidence: float = 0.95, did: str = "dx-1") -> Diagnosis:
    return Diagnosis(id=did, ts_ns=1, onset_ns=1, root=root, root_kind="link",
                     fault_type=fault, confidence=confidence, affected_jobs=("job-a",))


def policy() -> Policy:
    return Policy(PolicyConfig(), TOPO, {k: list(v) for k, v in PLACEMENT.items()})


def auto_engine(actuator: RecordingActuator, **safety: object) -> RemediationEngine:
    """An engine in auto mode on the test fabric, acting through ``actuator``."""
    cfg = RemediationConfig(safety=SafetyConfig.model_validate({"mode": "auto", **safety}))
    return RemediationEngine(cfg, TOPO, Actuators.single(actuator), FabricWatch(TOPO),
                             PLACEMENT)


def test_a_bad_fabric_link_is_drained_at_both_switch_ends() -> None:
    link = TOPO.link_by_id[SWITCH_LINKS[0]]
    a = policy().plan(diagnosis("gray_loss", link.id), mode=ActionMode.AUTO, ts_ns=5)
    assert a.kind is ActionKind.DRAIN_LINK
    assert a.state is ActionState.PROPOSED
    assert [(s.op, s.target, s.params) for s in a.steps] == [
        (StepOp.SET_WEIGHT, link.a, {"weight": 0}), (StepOp.SET_WEIGHT, link.b, {"weight": 0})]
    assert a.audit[0].actor == "policy"
    assert "gray_loss" in a.reason


@pytest.mark.parametrize("fault", ["link_down", "link_flap", "gray_loss", "pfc_deadlock"])
def test_a_link_whose_one_switch_does_not_report_is_shut_at_the_end_that_does(
        fault: str) -> None:
    link = TOPO.link_by_id[SWITCH_LINKS[0]]
    quiet, end = link.b.split(":")[0], link.a
    d = diagnosis(fault, link.id).model_copy(update={"missing": ("leaf-x", quiet)})
    a = policy().plan(d, mode=ActionMode.AUTO, ts_ns=5)
    assert (a.kind, a.target) == (ActionKind.SHUT_LINK, link.id)
    assert [(s.op, s.target) for s in a.steps] == [(StepOp.SHUT_PORT, end)]
    assert f"{quiet} does not report" in a.reason
    assert inverse(a.steps[0], {}) == (Step(op=StepOp.NO_SHUT_PORT, target=end),)


def test_a_link_neither_of_whose_switches_reports_gets_a_ticket() -> None:
    link = TOPO.link_by_id[SWITCH_LINKS[0]]
    ends = tuple(p.split(":")[0] for p in (link.a, link.b))
    a = policy().plan(diagnosis("link_flap", link.id).model_copy(update={"missing": ends}),
                      mode=ActionMode.AUTO, ts_ns=5)
    assert a.kind is ActionKind.TICKET
    assert [s.op for s in a.steps] == [StepOp.TICKET]
    assert "neither end" in a.reason


def test_a_down_switch_is_drained_only_at_the_neighbours_that_report() -> None:
    spine = next(s for s in SWITCHES if s.startswith("spine"))
    facing = [TOPO.peer_of[f"{spine}:{p.name}"] for p in TOPO.node_by_id[spine].ports
              if f"{spine}:{p.name}" in TOPO.peer_of]
    quiet = facing[0].split(":")[0]
    d = diagnosis("switch_down", spine).model_copy(update={"missing": (quiet,)})
    a = policy().plan(d, mode=ActionMode.AUTO, ts_ns=5)
    drained = [s.target for s in a.steps if s.op is StepOp.SET_WEIGHT]
    assert drained == [p for p in facing if not p.startswith(f"{quiet}:")]
    on_quiet = sum(p.startswith(f"{quiet}:") for p in facing)
    assert on_quiet >= 1
    assert len(drained) == len(facing) - on_quiet
    assert f"{on_quiet} more on neighbours that do not report" in a.reason


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


def test_a_bad_host_link_replaces_the_host_instead() -> None:
    link = TOPO.link_by_id[HOST_LINKS[0]]
    host = next(p for p in (link.a, link.b) if TOPO.port_by_id[p][0].is_host).split(":")[0]
    a = policy().plan(diagnosis("link_flap", link.id), mode=ActionMode.AUTO, ts_ns=5)
    assert a.kind is ActionKind.REPLACE_NODE
    assert a.target == host
    assert [s.op for s in a.steps] == [StepOp.DRAIN_HOST, StepOp.ATTACH_SPARE]


def test_a_pfc_storm_isolates_the_port_then_replaces_the_node() -> None:
    nic = f"{HOSTS[0]}:{TOPO.node_by_id[HOSTS[0]].ports[0].name}"
    a = policy().plan(diagnosis("pfc_storm", nic), mode=ActionMode.AUTO, ts_ns=5)
    assert a.kind is ActionKind.ISOLATE_PORT
    assert [s.op for s in a.steps] == [StepOp.SHUT_PORT, StepOp.DRAIN_HOST, StepOp.ATTACH_SPARE]
    assert a.steps[0].target == TOPO.attachment(nic)


def test_hash_polarization_hashes_the_switch_on_l4_again_and_drains_nothing() -> None:
    leaf = next(s for s in SWITCHES if s.startswith("leaf-"))
    a = policy().plan(diagnosis("hash_polarization", leaf), mode=ActionMode.AUTO, ts_ns=5)
    assert (a.kind, a.target) == (ActionKind.FIX_HASH, leaf)
    assert [(s.op, s.target, s.params) for s in a.steps] == [
        (StepOp.SET_HASH, leaf, {"l4": True})]
    assert "L3+L4" in a.reason
    assert footprint(a, TOPO).empty
    assert BlastRadius(SafetyConfig(max_uplink_share=0.0, max_hosts_drained=0),
                       TOPO).admit(a, 5) is None
    with pytest.raises(PlanError, match="fix_hash needs a switch; the root 'host-"):
        policy().plan(diagnosis("hash_polarization", NICS[0]), mode=ActionMode.AUTO, ts_ns=5)


def test_relabelling_stays_available_for_hash_polarization_through_config() -> None:
    config = PolicyConfig(remedies={FaultType.HASH_POLARIZATION: ActionKind.RELABEL_FLOWS})
    p = Policy(config, TOPO, {k: list(v) for k, v in PLACEMENT.items()})
    a = p.plan(diagnosis("hash_polarization", SWITCHES[0]), mode=ActionMode.AUTO, ts_ns=5)
    assert a.kind is ActionKind.RELABEL_FLOWS
    assert [(s.op, s.target) for s in a.steps] == [(StepOp.RELABEL_FLOWS, "job-a")]


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


def test_an_incast_paces_the_traffic_into_the_victim_from_outside_its_job() -> None:
    nic = next(n for n in NICS if n.split(":")[0] in PLACEMENT["job-a"])
    a = policy().plan(diagnosis("incast", nic), mode=ActionMode.AUTO, ts_ns=5)
    assert (a.kind, a.target) == (ActionKind.LIMIT_INCAST, nic)
    assert [(s.op, s.target, s.params) for s in a.steps] == [
        (StepOp.LIMIT_INGRESS, nic, {"share": 0.1, "job": "job-a"})]
    assert footprint(a, TOPO).empty  # nothing leaves service


def test_an_incast_on_a_host_in_no_known_job_gets_a_ticket_and_on_a_switch_no_plan() -> None:
    spare = next(n for n in NICS if n.split(":")[0] not in PLACEMENT["job-a"])
    a = policy().plan(diagnosis("incast", spare), mode=ActionMode.AUTO, ts_ns=5)
    assert a.kind is ActionKind.TICKET
    assert "runs no known job" in a.reason
    with pytest.raises(PlanError, match="needs a NIC"):
        policy().plan(diagnosis("incast", SWITCHES[0]), mode=ActionMode.AUTO, ts_ns=5)


def test_a_limited_ingress_is_undone_to_the_share_in_force_before() -> None:
    nic = NICS[0]
    step = Step(op=StepOp.LIMIT_INGRESS, target=nic, params={"share": 0.1, "job": "job-a"})
    assert inverse(step, {"previous": 0.5}) == (Step(
        op=StepOp.LIMIT_INGRESS, target=nic, params={"share": 0.5, "job": "job-a"}),)
    assert inverse(step, {})[0].params["share"] == 1.0  # no limit before: lifted


def test_types_without_a_remedy_and_unknown_types_get_a_ticket() -> None:
    for fault in ("ecn_misconfig", "cosmic_rays"):
        a = policy().plan(diagnosis(fault, SWITCHES[0]), mode=ActionMode.AUTO, ts_ns=5)
        assert a.kind is ActionKind.TICKET
        assert [s.op for s in a.steps] == [StepOp.TICKET]


def test_a_remedy_that_does_not_fit_the_root_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="needs a link"):
        policy().plan(diagnosis("gray_loss", SWITCHES[0]), mode=ActionMode.AUTO, ts_ns=5)


def test_the_same_incident_gets_the_same_action_id() -> None:
    p = policy()
    one = p.plan(diagnosis("gray_loss", SWITCH_LINKS[0]), mode=ActionMode.AUTO, ts_ns=5)
    two = p.plan(diagnosis("gray_loss", SWITCH_LINKS[0], 0.99), mode=ActionMode.AUTO, ts_ns=9)
    other = p.plan(diagnosis("gray_loss", SWITCH_LINKS[0], did="dx-2"), mode=ActionMode.AUTO,
                   ts_ns=9)
    assert one.id == two.id != other.id


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
