"""Remediation actions: what fabricops does (or proposes) about a diagnosis.

An ``Action`` is one remedy for one diagnosis, made of ``Step``s that an
actuator carries out in order. Its ``state`` moves

    proposed -> approved -> applied -> verified | rolled_back | failed
    proposed -> rejected            (a person, or a safety check, said no)

and every move appends an ``AuditEntry``. ``undo`` holds the steps that
revert what was applied (filled as steps are applied), so a rollback needs
nothing but the record. On the bus (``actions.v2``) and in the store it is the
protobuf message ``SCHEMA`` names (:mod:`fabricops.core.wire_records`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.bus import Topic
from fabricops.core.entities import PORT_SEP
from fabricops.core.wire_records import WireModel


class ActionMode(StrEnum):
    OBSERVE = "observe"  # propose only, never apply
    APPROVE = "approve"  # apply once a person approves
    AUTO = "auto"  # apply at once, if every safety check passes


class ActionState(StrEnum):
    PROPOSED = "proposed"
    APPROVED = "approved"
    APPLIED = "applied"
    VERIFIED = "verified"
    ROLLED_BACK = "rolled_back"
    FAILED = "failed"
    REJECTED = "rejected"


FINAL_STATES = frozenset({ActionState.VERIFIED, ActionState.ROLLED_BACK, ActionState.FAILED,
                          ActionState.REJECTED})
"""States an action never leaves (a verified action can still be rolled back by request)."""

TRANSITIONS: dict[ActionState, frozenset[ActionState]] = {
    ActionState.PROPOSED: frozenset({ActionState.APPROVED, ActionState.REJECTED}),
    ActionState.APPROVED: frozenset({ActionState.APPLIED, ActionState.FAILED,
                                     ActionState.REJECTED}),
    ActionState.APPLIED: frozenset({ActionState.VERIFIED, ActionState.ROLLED_BACK,
                                    ActionState.FAILED}),
    ActionState.VERIFIED: frozenset({ActionState.ROLLED_BACK}),
    ActionState.ROLLED_BACK: frozenset(),
    ActionState.FAILED: frozenset(),
    ActionState.REJECTED: frozenset(),
}
"""The moves an action's state may make."""


class ActionKind(StrEnum):
    """What a remedy does, in an operator's words."""

    DRAIN_LINK = "drain_link"  # WCMP weight 0 at both ends: traffic moves, the link stays up
    SHUT_LINK = "shut_link"  # administratively down at both ends
    DRAIN_SWITCH = "drain_switch"  # WCMP weight 0 on every neighbour port facing a switch
    ISOLATE_PORT = "isolate_port"  # shut the switch port facing a misbehaving NIC
    RELABEL_FLOWS = "relabel_flows"  # new UDP source ports, so ECMP re-hashes the flows
    FIX_HASH = "fix_hash"  # a switch's ECMP hash back on L3+L4 (the UDP source port too)
    REPLACE_NODE = "replace_node"  # drain a host from its job, attach a spare
    RESTORE_CONFIG = "restore_config"  # settings a diagnosis names back to their intent
    APPLY_CONFIG = "apply_config"  # a device's running configuration made to match its intent
    LIMIT_INCAST = "limit_incast"  # traffic into a NIC from outside its job paced to a share
    TICKET = "ticket"  # nothing to change automatically: tell a person


class StepOp(StrEnum):
    """The primitive operations actuators carry out."""

    SHUT_PORT = "shut_port"  # target: port
    NO_SHUT_PORT = "no_shut_port"  # target: port
    SET_WEIGHT = "set_weight"  # target: port (egress of a switch); params: weight
    RELABEL_FLOWS = "relabel_flows"  # target: NIC, link or job
    SET_HASH = "set_hash"  # target: switch; params: l4 (true: hash L3+L4, false: L3 only)
    DRAIN_HOST = "drain_host"  # target: host; result: job
    RESTORE_HOST = "restore_host"  # target: host; params: job
    ATTACH_SPARE = "attach_spare"  # target: job; result: host
    RELEASE_SPARE = "release_spare"  # target: host; params: job
    TICKET = "ticket"  # target: entity; params: summary
    SET_CONFIG = "set_config"  # target: device; params: setting key -> value (roce_settings)
    # target: NIC; params: share (of its line rate, 1 lifts the limit), job (whose own
    # traffic keeps its rate, "" for none); result: previous (the share before)
    LIMIT_INGRESS = "limit_ingress"


Param = str | int | float | bool
ON_DEVICE: frozenset[StepOp] = frozenset({StepOp.SHUT_PORT, StepOp.NO_SHUT_PORT,
                                          StepOp.SET_WEIGHT, StepOp.SET_HASH,
                                          StepOp.SET_CONFIG})
"""The steps a switch's own management carries out (target: its port or itself), not a
scheduler, a host's rate limiter or a ticket."""


class Step(BaseModel):
    """One primitive operation on one target."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: StepOp
    target: str = Field(min_length=1, max_length=255)
    params: dict[str, Param] = Field(default_factory=dict)

    @property
    def device(self) -> str:
        """The node the step acts on: a port's node, or the target itself."""
        return self.target.partition(PORT_SEP)[0]

    def describe(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.op.value} {self.target}" + (f" ({extra})" if extra else "")


class AuditEntry(BaseModel):
    """One thing that happened to an action: who, when, the state after, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ts_ns: int = Field(ge=0)
    actor: str = Field(min_length=1, max_length=128,
                       description="policy, safety, precheck, actuator:NAME, verifier, "
                                   "operator:NAME")
    state: ActionState
    note: str = ""


class Action(WireModel):
    """One remedy for one diagnosis, with its full history.

    ``id`` is derived from the diagnosis id, the kind and the target, so the
    same remedy for the same incident is one action however often the
    diagnosis is revised (idempotence). ``ts_ns`` is the time of the latest
    audit entry. ``request`` is ``"rollback"`` while an operator's rollback
    request waits for the remediation service.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    SCHEMA: ClassVar[str] = Topic.ACTIONS.schema

    id: str = Field(min_length=1, max_length=64)
    diagnosis_id: str = Field(min_length=1, max_length=64)
    created_ns: int = Field(ge=0)
    ts_ns: int = Field(ge=0)
    kind: ActionKind
    target: str = Field(min_length=1, max_length=255)
    fault_type: str = Field(max_length=32)
    confidence: float = Field(ge=0.0, le=1.0)
    mode: ActionMode
    state: ActionState = ActionState.PROPOSED
    steps: tuple[Step, ...] = ()
    undo: tuple[Step, ...] = ()
    affected_hosts: tuple[str, ...] = ()
    affected_jobs: tuple[str, ...] = ()
    reason: str = Field(default="", description="Why this remedy, in words")
    request: str = Field(default="", max_length=16)
    audit: tuple[AuditEntry, ...] = ()

    def moved(self, state: ActionState, *, ts_ns: int, actor: str, note: str = "",
              **changes: object) -> Action:
        """This action in ``state`` with an audit entry; ValueError if the move is not allowed."""
        if state is not self.state and state not in TRANSITIONS[self.state]:
            raise ValueError(f"action {self.id}: cannot go from {self.state.value} to "
                             f"{state.value}")
        entry = AuditEntry(ts_ns=ts_ns, actor=actor, state=state, note=note)
        return self.model_copy(update={**changes, "state": state, "ts_ns": ts_ns,
                                       "audit": (*self.audit, entry)})
