"""Drift: a setting leaving its intent raises an event and a diagnosis naming it, whose
remedy restores it; a device that cannot be read is never taken for drift."""

from __future__ import annotations

from fabricops.config.drift import DRIFT, DriftConfig, DriftResult, DriftWatch
from fabricops.config.running import Settings, intended_settings
from fabricops.core.actions import ActionKind, ActionState, StepOp
from fabricops.core.records import EventKind
from fabricops.simulator.faults import FaultSpec
from tests.config.twin import engine_for, leaf_spine_32, provisioned, read


def _watch(sim, plan, published: list[DriftResult]) -> DriftWatch:  # type: ignore[no-untyped-def]
    switches = {s.device: intended_settings(plan)[s.device] for s in plan.switches}
    return DriftWatch(DriftConfig(interval_s=1), switches, read(sim), published.append,
                      clock_ns=lambda: sim.ts_ns)


def test_drift_is_an_event_per_setting_and_a_diagnosis_whose_remedy_restores_it() -> None:
    sim, plan = provisioned(leaf_spine_32())
    published: list[DriftResult] = []
    watch = _watch(sim, plan, published)
    assert not watch.check_once().events
    sim.add_fault(FaultSpec(type="ecn_threshold", entity="leaf-1", start_s=sim.time_s))
    sim.step()
    result = watch.check_once()
    assert {e.metric for e in result.events} == {"config.ecn.min_threshold_bytes",
                                                 "config.ecn.max_threshold_bytes"}
    assert {e.device for e in result.events} == {"leaf-1"}
    assert all(e.kind is EventKind.STATE_CHANGE for e in result.events)
    (d,) = result.diagnoses
    assert d.fault_type == DRIFT
    assert d.root == "leaf-1"
    assert "ecn.min_threshold_bytes" in d.action
    assert any(e.signal == "setting ports.eth1.ecn.min_threshold_bytes"
               and "4000000" in e.note for e in d.evidence)
    assert not watch.check_once().diagnoses  # the same drift is not reported twice

    switches = {s.device: intended_settings(plan)[s.device] for s in plan.switches}
    engine = engine_for(sim, intent=switches)
    action = engine.on_diagnosis(d, sim.ts_ns)
    assert action is not None
    assert action.kind is ActionKind.RESTORE_CONFIG
    assert action.state is ActionState.APPLIED
    assert action.steps[0].op is StepOp.SET_CONFIG
    cleared = watch.check_once()
    assert cleared.events
    assert all(e.kind is EventKind.CLEARED for e in cleared.events)
    assert not cleared.diagnoses
    assert watch.m_drifted._value.get() == 0  # type: ignore[attr-defined]


def test_a_device_that_cannot_be_read_is_counted_not_drifted() -> None:
    sim, plan = provisioned(leaf_spine_32())

    def half(devices: list[str]) -> tuple[dict[str, Settings], dict[str, str]]:
        got, _ = read(sim)(devices)
        return {d: v for d, v in got.items() if d != "spine-0"}, {"spine-0": "timeout"}

    switches = {s.device: intended_settings(plan)[s.device] for s in plan.switches}
    watch = DriftWatch(DriftConfig(), switches, half, lambda r: None, lambda: 1)
    result = watch.check_once()
    assert result.unread == {"spine-0": "timeout"}
    assert not result.events
    assert watch.m_unread._value.get() == 1  # type: ignore[attr-defined]


def test_a_restore_without_a_known_intent_is_a_ticket() -> None:
    sim, plan = provisioned(leaf_spine_32())
    sim.add_fault(FaultSpec(type="mtu_mismatch", entity="leaf-0:eth9~spine-0:eth1"))
    sim.step()
    published: list[DriftResult] = []
    (d,) = _watch(sim, plan, published).check_once().diagnoses
    engine = engine_for(sim)  # no intent given
    action = engine.on_diagnosis(d, sim.ts_ns)
    assert action is not None
    assert action.kind is ActionKind.TICKET
