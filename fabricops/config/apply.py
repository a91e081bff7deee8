"""Apply a plan through remediation's safety envelope, then verify it by reading back.

``ConfigApplier.apply(intended, now_ns)``:

1. reads the running settings of every device it can (``SettingsReader``);
2. computes what differs from the intent (``running.changes``); nothing differs:
   nothing is proposed;
3. proposes one ``apply_config`` action, one ``set_config`` step per device, and hands
   it to the remediation engine (``Envelope.submit``): the engine's mode decides (observe:
   proposed only; approve: waits for a person, ``fabricops actions approve``; auto:
   applied at once), its blast radius and pre-check may refuse it, a step that fails
   undoes the steps before it, and every move is in the action's audit trail;
4. once applied, reads the devices back: every written setting in effect makes the
   action *verified*; otherwise it is rolled back (the engine runs the undo steps
   built from the values the actuator saw before writing) and the mismatches are
   reported.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from fabricops.config.running import Settings, changes
from fabricops.core.actions import (
    Action,
    ActionKind,
    ActionMode,
    ActionState,
    AuditEntry,
    Step,
    StepOp,
)
from fabricops.core.roce_settings import SettingValue


class Envelope(Protocol):
    """The safety envelope actions go through (``fabricops.remediation.engine``)."""

    def submit(self, action: Action, now_ns: int) -> Action: ...

    def rollback(self, action_id: str, now_ns: int, actor: str, why: str) -> Action: ...

    def confirm(self, action_id: str, now_ns: int, actor: str, note: str) -> Action: ...


class SettingsReader(Protocol):
    """Reads devices' running settings: (device -> settings, device -> why unread)."""

    def __call__(self, devices: list[str]) -> tuple[dict[str, Settings], dict[str, str]]:
        ...


@dataclass
class ApplyOutcome:
    """What apply found, proposed and achieved."""

    changes: dict[str, Settings]
    unread: dict[str, str]
    action: Action | None = None
    mismatches: list[tuple[str, str, str, str]] = field(default_factory=list)

    @property
    def state(self) -> str:
        return "nothing to change" if self.action is None else self.action.state.value

    @property
    def settings_changed(self) -> int:
        return sum(len(v) for v in self.changes.values())

    def as_dict(self) -> dict[str, object]:
        return {"state": self.state, "devices": sorted(self.changes),
                "settings": self.settings_changed, "unread": self.unread,
                "mismatches": [dict(zip(("device", "setting", "found", "expected"), m,
                                        strict=True)) for m in self.mismatches],
                "action": None if self.action is None else self.action.model_dump(mode="json")}


def apply_action(diff: Mapping[str, Settings], *, fabric: str, mode: ActionMode,
                 ts_ns: int) -> Action:
    """The ``apply_config`` action writing ``diff``; its id derives from the changes."""
    digest = hashlib.blake2b(json.dumps(diff, sort_keys=True).encode(),
                             digest_size=8).hexdigest()
    n = sum(len(v) for v in diff.values())
    note = f"{n} setting(s) on {len(diff)} device(s) differ from the intent of {fabric}"
    steps = tuple(Step(op=StepOp.SET_CONFIG, target=device, params=dict(values))
                  for device, values in sorted(diff.items()))
    return Action(id=f"act-{digest}", diagnosis_id=f"cfg-{digest}", created_ns=ts_ns,
                  ts_ns=ts_ns, kind=ActionKind.APPLY_CONFIG, target=fabric[:255],
                  fault_type="config_drift", confidence=1.0, mode=mode, steps=steps,
                  reason=note, audit=(AuditEntry(ts_ns=ts_ns, actor="config",
                                                 state=ActionState.PROPOSED, note=note),))


def mismatches(diff: Mapping[str, Settings], running: Mapping[str, Mapping[str, SettingValue]]
               ) -> list[tuple[str, str, str, str]]:
    """(device, setting, found, expected) for every written setting not in effect."""
    out = []
    for device, values in sorted(diff.items()):
        have = running.get(device, {})
        for key, value in values.items():
            if have.get(key) != value:
                out.append((device, key, str(have.get(key, "unread")), str(value)))
    return out


class ConfigApplier:
    """Reads, diffs, applies through ``engine`` and verifies (see the module docstring)."""

    def __init__(self, engine: Envelope, read: SettingsReader, fabric: str,
                 mode: ActionMode) -> None:
        self.engine = engine
        self.read = read
        self.fabric = fabric
        self.mode = mode

    def apply(self, intended: Mapping[str, Settings], now_ns: int) -> ApplyOutcome:
        running, unread = self.read(sorted(intended))
        diff = changes(intended, running)
        out = ApplyOutcome(diff, unread)
        if not diff:
            return out
        action = apply_action(diff, fabric=self.fabric, mode=self.mode,
                              ts_ns=now_ns)
        action = self.engine.submit(action, now_ns)
        if action.state is ActionState.APPLIED:
            after, _ = self.read(sorted(diff))
            out.mismatches = mismatches(diff, after)
            if out.mismatches:
                device, key, found, expected = out.mismatches[0]
                action = self.engine.rollback(
                    action.id, now_ns, "verifier", f"{len(out.mismatches)} setting(s) not in "
                    f"effect after applying, e.g. {device} {key} is {found}, not {expected}")
            else:
                action = self.engine.confirm(action.id, now_ns, "verifier",
                                             f"read back: {out.settings_changed} setting(s) "
                                             "in effect")
        out.action = action
        return out


__all__ = ["ApplyOutcome", "ConfigApplier", "Envelope", "SettingsReader", "apply_action",
           "mismatches"]
