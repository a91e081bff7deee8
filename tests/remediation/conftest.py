"""Shared records for actuator tests: actions as the remediation service would hand them over."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fabricops.core.actions import Action, ActionKind, ActionMode, ActionState, Step
from tests.remediation.http_receiver import receiver


def _action(kind: ActionKind, target: str, *steps: Step) -> Action:
    return Action(id=f"act-{kind.value}-1", diagnosis_id="diag-7", created_ns=1,
                  ts_ns=1, kind=kind, target=target, fault_type="link_flap",
                  confidence=0.93, mode=ActionMode.AUTO, state=ActionState.APPROVED,
                  steps=steps, reason="port flaps every 30 s; traffic moved away")


@pytest.fixture
def make_action() -> Callable[..., Action]:
    """``make_action(kind, target, *steps)``: an approved action of diagnosis ``diag-7``."""
    return _action


__all__ = ["make_action", "receiver"]
