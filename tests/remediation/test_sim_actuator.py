"""The simulator actuator: every step and its inverse on a running simulation."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fabricops.core.actions import Action, ActionKind, Step, StepOp
from fabricops.evaluation.sim_actuator import SimulatorActuator, direct
from fabricops.remediation.actuator import ActuatorError, inverse
from fabricops.simulator.builders import build
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.workload import JobSpec


def _sim() -> Simulator:
    sim = Simulator(build("leaf_spine", gpus=64, nics_per_host=4, leaf_radix=16,
                          spine_radix=16), SimConfig(seed=2))
    sim.add_job(JobSpec(name="job-a", hosts=12, placement="packed"))
    sim.run(3)
    return sim


def _undo(act: SimulatorActuator, action: Action, steps: list[Step]) -> None:
    undo: list[Step] = []
    for step in steps:
        undo = [*inverse(step, act.apply(step, action)), *undo]
    for step in undo:
        act.apply(step, action)


def test_node_replacement_and_its_rollback_restore_the_job(
        make_action: Callable[..., Action]) -> None:
    sim = _sim()
    act = SimulatorActuator(direct(sim))
    before = sorted(sim.workload.hosts[0])
    host = sim.fabric.node_ids[before[3]]
    action = make_action(ActionKind.REPLACE_NODE, host)
    drain = Step(op=StepOp.DRAIN_HOST, target=host, params={"job": "job-a"})
    attach = Step(op=StepOp.ATTACH_SPARE, target="job-a")
    facts = act.apply(drain, action)
    assert facts == {"job": "job-a"}
    spare = act.apply(attach, action)["host"]
    assert spare != host
    now = {sim.fabric.node_ids[h] for h in sim.workload.hosts[0]}
    assert host not in now
    assert spare in now
    sim.run(2)
    for step in [*inverse(attach, {"host": spare}), *inverse(drain, facts)]:
        act.apply(step, action)
    assert sorted(sim.workload.hosts[0]) == before
    assert sim.fabric.node_index(str(spare)) in sim.workload.free_hosts()
    sim.run(2)


def test_a_drained_port_gets_its_previous_weight_back(make_action: Callable[..., Action]) -> None:
    sim = _sim()
    act = SimulatorActuator(direct(sim))
    port = "leaf-0:eth9"
    action = make_action(ActionKind.DRAIN_LINK, port)
    _undo(act, action, [Step(op=StepOp.SET_WEIGHT, target=port, params={"weight": 0})])
    assert sim.control.wcmp_weight(port) == 1


def test_a_hash_fix_on_a_polarized_switch_and_its_undo(
        make_action: Callable[..., Action]) -> None:
    sim = _sim()
    sim.add_fault(FaultSpec(type="hash_polarization", entity="leaf-0", start_s=sim.time_s))
    sim.run(1)
    act = SimulatorActuator(direct(sim))
    fix = Step(op=StepOp.SET_HASH, target="leaf-0", params={"l4": True})
    action = make_action(ActionKind.FIX_HASH, "leaf-0", fix)
    facts = act.apply(fix, action)
    assert facts == {"previous": False}
    sim.run(2)
    assert sim.control.ecmp_hash_l4("leaf-0")  # while the fault lasts
    (undo,) = inverse(fix, facts)
    assert undo == Step(op=StepOp.SET_HASH, target="leaf-0", params={"l4": False})
    act.apply(undo, action)
    sim.run(1)
    assert not sim.control.ecmp_hash_l4("leaf-0")


def test_a_step_on_something_that_does_not_exist_names_it(
        make_action: Callable[..., Action]) -> None:
    act = SimulatorActuator(direct(_sim()))
    action = make_action(ActionKind.SHUT_LINK, "leaf-0:eth99")
    with pytest.raises(ActuatorError, match="leaf-0:eth99"):
        act.apply(Step(op=StepOp.SHUT_PORT, target="leaf-0:eth99"), action)
    unknown = Step(op=StepOp.SET_HASH, target="leaf-99", params={"l4": True})
    with pytest.raises(ActuatorError, match=r"set_hash leaf-99 .*'leaf-99' is not a switch"):
        act.apply(unknown, make_action(ActionKind.FIX_HASH, "leaf-99", unknown))
