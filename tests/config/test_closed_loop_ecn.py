"""The closed loop on the twin recovers an ECN misconfiguration by restoring the setting
its diagnosis names."""

from __future__ import annotations

from fabricops.core.actions import ActionKind, ActionMode, ActionState, StepOp
from fabricops.core.faults import FaultType
from fabricops.evaluation.closedloop import fault_for, run_loop
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.remediation.engine import RemediationConfig
from fabricops.remediation.safety import SafetyConfig


def test_ecn_misconfig_is_named_restored_and_the_job_recovers() -> None:
    fault = fault_for(FaultType.ECN_MISCONFIG, seed=7)
    result = run_loop(fault, RcaModel.load(DEFAULT_MODEL),
                      RemediationConfig(safety=SafetyConfig(mode=ActionMode.AUTO)), seed=7)
    named = [d for d in result.diagnoses if d.root == fault["entity"]]
    assert named
    assert named[0].fault_type == "ecn_misconfig"
    assert "ecn.min_threshold_bytes" in named[0].action
    assert any("setting ecn.min_threshold_bytes" in e.note for e in named[0].evidence)
    (action,) = result.actions
    assert action.kind is ActionKind.RESTORE_CONFIG
    assert action.state is ActionState.VERIFIED
    (step,) = action.steps
    assert step.op is StepOp.SET_CONFIG
    assert step.target == fault["entity"]
    assert step.params["ports.eth1.ecn.min_threshold_bytes"] == 100_000
    assert result.recover_s is not None
    assert result.throughput_share > 0.95
