"""Policy (diagnosis -> steps): the remedy each fault is planned into, without a fabric."""

from __future__ import annotations

import pytest

from fabricops.core.actions import ActionKind, ActionMode, ActionState, Step, StepOp
from fabricops.core.faults import FaultType
from fabricops.remediation.actuator import inverse
from fabricops.remediation.policy import PlanError, Policy, PolicyConfig
from fabricops.remediation.safety import BlastRadius, SafetyConfig, footprint
from tests.remediation.policy_fabric import (
    HOST_LINKS,
    HOSTS,
    NICS,
    PLACEMENT,
    SWITCH_LINKS,
    SWITCHES,
    TOPO,
    diagnosis,
    policy,
)


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
