"""RemediationEngine: from a diagnosis to an applied, verified (or rolled back) action.

Call ``on_diagnosis`` for each diagnosis and ``tick`` once per telemetry step
(after feeding the watch). The engine

1. ignores a diagnosis below the confidence floor, one whose incident already
   has a live action, and one whose root is already remedied;
2. plans the remedy (``Policy``) and records it as *proposed*. In ``observe``
   mode it stays so (even an approved action is not applied); in ``approve``
   mode it waits for a person; in ``auto`` mode it is approved at once, and
   if a step fails because its device does not answer, the diagnosis is
   planned once more with that device among the ``missing`` (a link is then
   shut at its other end);
3. applies an approved action only if the blast radius admits it, the
   pre-check on the load twin predicts no overload and every device the
   action configures answers when asked (``Actuators.check``, once a device,
   before any step); else it is *rejected* with the reason, nothing applied.
   A step that fails undoes the steps before it (*failed*);
4. verifies: once every related symptom has stayed clear for
   ``verify_hold_s`` (and drained ports carry no traffic) the action is
   *verified*; if ``verify_deadline_s`` passes first it is rolled back. A
   device's silence counts only if a step of the action configured it.

Every move is an audit entry handed to ``record`` (store, bus, webhook).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.actions import (
    ON_DEVICE,
    Action,
    ActionKind,
    ActionMode,
    ActionState,
    Param,
    Step,
    StepOp,
)
from fabricops.core.records import Diagnosis
from fabricops.core.topology import Topology
from fabricops.rca.detect import STOPPED
from fabricops.remediation.actuator import ActuatorError, Actuators, UnreachableError, inverse
from fabricops.remediation.policy import PlanError, Policy, PolicyConfig, action_id
from fabricops.remediation.safety import BlastRadius, SafetyConfig
from fabricops.remediation.twin import LoadTwin
from fabricops.remediation.watch import FabricWatch

log = logging.getLogger(__name__)
Record = Callable[[Action, Action | None], Action]
LIVE = frozenset({ActionState.PROPOSED, ActionState.APPROVED, ActionState.APPLIED,
                  ActionState.VERIFIED})
DRAINS = frozenset({ActionKind.DRAIN_LINK, ActionKind.DRAIN_SWITCH, ActionKind.SHUT_LINK})


class RemediationConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    safety: SafetyConfig = Field(default_factory=SafetyConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    settle_s: float = Field(default=1.0, ge=0, description="Wait before judging an action")
    verify_hold_s: float = Field(default=2.0, ge=0, description="Symptoms clear this long")
    verify_deadline_s: float = Field(default=20.0, gt=0, description="Else roll back")
    moved_util: float = Field(default=0.02, ge=0, le=1,
                              description="A drained port below this utilization carries "
                                          "no traffic any more")


class RemediationEngine:
    """See the module docstring. Not thread-safe: one thread drives it."""

    def __init__(self, config: RemediationConfig, topology: Topology, actuators: Actuators,
                 watch: FabricWatch, placement: Mapping[str, Sequence[str]] | None = None,
                 record: Record | None = None, registry: CollectorRegistry | None = None,
                 intent: Mapping[str, Mapping[str, Param]] | None = None) -> None:
        self.config = config
        self.topology = topology
        self.actuators = actuators
        self.watch = watch
        self.placement: dict[str, list[str]] = {j: list(h) for j, h in (placement or {}).items()}
        self.policy = Policy(config.policy, topology, self.placement, intent)
        self.radius = BlastRadius(config.safety, topology)
        self.twin = LoadTwin(topology)
        self.record = record or (lambda new, prior: new)
        self.actions: dict[str, Action] = {}
        self._applied_ns: dict[str, int] = {}
        self._clear_since: dict[str, int] = {}
        reg = registry if registry is not None else CollectorRegistry()
        self.m_moves = Counter("fabricops_remediation_moves", "Action state changes, by state",
                               ["state"], registry=reg)
        self.m_ignored = Counter("fabricops_remediation_ignored_diagnoses",
                                 "Diagnoses given no action, by reason", ["reason"],
                                 registry=reg)

    def on_diagnosis(self, d: Diagnosis, now_ns: int) -> Action | None:
        """Propose (and in auto mode apply) the remedy for ``d``; None if none is due. If a
        step fails because its device does not answer, the remedy is planned once more
        with that device among the missing (once: each try may wait a whole timeout)."""
        action, gone = self._remedy(d, now_ns)
        if not gone or gone in d.missing:
            return action
        again, _ = self._remedy(d.model_copy(update={"missing": (*d.missing, gone)}), now_ns,
                                without=gone)
        return again or action

    def _remedy(self, d: Diagnosis, now_ns: int,
                without: str = "") -> tuple[Action | None, str]:
        """``on_diagnosis`` once, and the device that did not answer ('' if none);
        ``without``: the device a first try found unreachable, which gives the new plan
        an id of its own (a switch's drain planned again without a neighbour is the same
        incident, kind and target)."""
        safety = self.config.safety
        if d.confidence < safety.confidence_floor:
            self.m_ignored.labels("below_floor").inc()
            return None, ""
        for a in self.actions.values():
            if a.state in LIVE and (a.diagnosis_id == d.id or (
                    a.target == d.root and a.state is not ActionState.PROPOSED)):
                self.m_ignored.labels("handled").inc()
                return None, ""
        try:
            action = self.policy.plan(d, mode=safety.mode, ts_ns=now_ns)
            if without:
                action = action.model_copy(update={"id": action_id(
                    d.id, action.kind, f"{action.target} without {without}")})
        except PlanError as exc:
            self.m_ignored.labels("unplannable").inc()
            log.warning("remediation: diagnosis %s: %s", d.id, exc)
            return None, ""
        if action.id in self.actions:
            self.m_ignored.labels("tried").inc()
            return None, ""
        action = self._store(action, None)
        if safety.mode is ActionMode.AUTO:
            action = self._move(action, ActionState.APPROVED, now_ns, "auto",
                                "auto mode: approved by policy")
            return self._apply(action, now_ns)
        return action, ""

    def submit(self, action: Action, now_ns: int) -> Action:
        """Take an action planned elsewhere (``fabricops config apply``) through the same
        envelope as a remedy: recorded as proposed; in auto mode approved and applied at
        once (blast radius, pre-check, undo on failure), in approve mode left for a
        person, in observe mode only proposed. An id already known returns that action."""
        if action.id in self.actions:
            return self.actions[action.id]
        action = self._store(action, None)
        if self.config.safety.mode is ActionMode.AUTO:
            action = self._move(action, ActionState.APPROVED, now_ns, "auto",
                                "auto mode: approved")
            action, _ = self._apply(action, now_ns)
        return action

    def confirm(self, action_id: str, now_ns: int, actor: str, note: str) -> Action:
        """An applied action whose effect the caller verified itself (settings read back)."""
        return self._move(self.actions[action_id], ActionState.VERIFIED, now_ns, actor, note)

    def rollback(self, action_id: str, now_ns: int, actor: str, why: str) -> Action:
        """Undo an applied action now (its verification failed); returns it rolled back."""
        return self._rollback(self.actions[action_id], now_ns, actor, why)

    def tick(self, now_ns: int, pending: Sequence[Action] = ()) -> None:
        """Verify applied actions; act on approvals and rollback requests in ``pending``."""
        for theirs in pending:
            ours = self.actions.get(theirs.id)
            if ours is None or len(theirs.audit) > len(ours.audit):
                self.actions[theirs.id] = theirs
        for a in list(self.actions.values()):
            if a.request == "rollback" and a.state in (ActionState.APPLIED,
                                                       ActionState.VERIFIED):
                self._rollback(a, now_ns, "operator", "rollback requested")
            elif a.state is ActionState.APPROVED and \
                    self.config.safety.mode is not ActionMode.OBSERVE:
                self._apply(a, now_ns)
            elif a.state is ActionState.APPLIED and a.kind is not ActionKind.TICKET:
                self._verify(a, now_ns)

    def resume(self, actions: Sequence[Action]) -> None:
        """Take up actions recorded before a restart: those in effect count against the
        blast radius again, and applied ones are verified (their clock restarts now)."""
        for a in actions:
            self.actions[a.id] = a
            if a.state in (ActionState.APPLIED, ActionState.VERIFIED):
                self.radius.record(a, a.ts_ns)

    def approve(self, action_id: str, now_ns: int, actor: str = "operator") -> Action:
        """A person approved (for callers without a store; the service reads the store)."""
        return self._move(self.actions[action_id], ActionState.APPROVED, now_ns, actor,
                          "approved")

    def _apply(self, a: Action, now_ns: int) -> tuple[Action, str]:
        """Apply ``a`` (or refuse it); the action, and the device that did not answer if
        a step failed for that ('' otherwise)."""
        refusal = self._refusal(a, now_ns)
        if refusal is not None:
            return self._move(a, ActionState.REJECTED, now_ns, refusal[0], refusal[1]), ""
        silent = self._unanswered(a)
        if silent is not None:
            return self._move(a, ActionState.REJECTED, now_ns, "precheck",
                              f"{silent}; nothing applied"), silent.device
        undo: list[Step] = []
        used = set()
        for step in a.steps:
            try:
                name, facts = self.actuators.apply(step, a)
            except ActuatorError as exc:
                left = self._run_undo(undo, a)
                note = f"{exc}; undid {len(undo)} step(s)" + (f", could not: {left}"
                                                               if left else "")
                gone = exc.device if isinstance(exc, UnreachableError) else ""
                return self._move(a, ActionState.FAILED, now_ns, "actuator", note), gone
            used.add(name)
            self._placement_effect(step, facts)
            undo = [*inverse(step, facts), *undo]
        a = self._move(a, ActionState.APPLIED, now_ns, "actuator:" + ",".join(sorted(used)),
                       "; ".join(s.describe() for s in a.steps), undo=tuple(undo))
        self.radius.record(a, now_ns)
        self._applied_ns[a.id] = now_ns
        return a, ""

    def _unanswered(self, a: Action) -> UnreachableError | None:
        """The first device ``a`` configures that does not answer when asked, each once,
        before any step is applied: a drain is not half applied at one end and undone
        because the other's management is gone. A device that answers and then fails
        its step still fails the action (*failed*, undone)."""
        asked: set[str] = set()
        for step in a.steps:
            if step.op not in ON_DEVICE or step.device in asked:
                continue
            asked.add(step.device)
            try:
                self.actuators.check(step)
            except UnreachableError as exc:
                return exc
            except ActuatorError as exc:  # it answered, refusing: its step will say so
                log.info("remediation: %s: asked ahead: %s", a.id, exc)
        return None

    def _refusal(self, a: Action, now_ns: int) -> tuple[str, str] | None:
        why = self.radius.admit(a, now_ns)
        if why is not None:
            return "safety", why
        pred = self.twin.predict(a, self.watch.load_tx())
        limit = self.config.safety.max_link_load
        if pred is not None and pred.utilization > limit:
            return "precheck", f"{pred.describe()}; the limit is {limit:.0%}"
        if any(s.op is StepOp.ATTACH_SPARE and "host" not in s.params for s in a.steps):
            out = self.radius.hosts_out() | {s.target for s in a.steps
                                             if s.op is StepOp.DRAIN_HOST}
            if not self.twin.spares(self.placement, out):
                return "precheck", "no free spare host to attach"
        return None

    def _verify(self, a: Action, now_ns: int) -> None:
        cfg = self.config
        since = now_ns - self._applied_ns.setdefault(a.id, now_ns)
        if since < cfg.settle_s * 1e9 or not self.watch.warm:
            return
        nodes = self.watch.nodes_of(a.target) | set(a.affected_hosts)
        out = self._out_of_service(a)
        near = _not_silenced_by(a, self.watch.symptoms_near(frozenset(nodes), out))
        drained = [s.target for s in a.steps if s.op is StepOp.SET_WEIGHT]
        busy = a.kind in DRAINS and self.watch.util_of(drained) > cfg.moved_util
        if not near and not busy:
            start = self._clear_since.setdefault(a.id, now_ns)
            if now_ns - start >= cfg.verify_hold_s * 1e9:
                self._move(a, ActionState.VERIFIED, now_ns, "verifier",
                           f"symptoms clear for {(now_ns - start) / 1e9:.1f} s, "
                           f"{since / 1e9:.1f} s after applying")
            return
        self._clear_since.pop(a.id, None)
        if since > cfg.verify_deadline_s * 1e9:
            seen = "; ".join(f"{e}: {', '.join(r)}" for e, r in sorted(near.items())[:5])
            self._rollback(a, now_ns, "verifier", "did not help within "
                           f"{cfg.verify_deadline_s:g} s: " + (seen or "traffic still on "
                                                               "the drained ports"))

    def _out_of_service(self, a: Action) -> frozenset[str]:
        topo, out = self.topology, set()
        for s in a.steps:
            if s.op in (StepOp.SET_WEIGHT, StepOp.SHUT_PORT) and s.target in topo.peer_of:
                out.add(topo.link_of_port(s.target))
            elif s.op is StepOp.DRAIN_HOST and s.target in topo.node_by_id:
                out.add(s.target)
                for p in topo.node_by_id[s.target].ports:
                    nic = f"{s.target}:{p.name}"
                    out.add(nic)
                    if nic in topo.peer_of:
                        out.add(topo.link_of_port(nic))
        if a.kind is ActionKind.DRAIN_SWITCH:
            out.add(a.target)
        return frozenset(out)

    def _rollback(self, a: Action, now_ns: int, actor: str, why: str) -> Action:
        left = self._run_undo(list(a.undo), a)
        self.radius.release(a.id)
        if left:
            return self._move(a, ActionState.FAILED, now_ns, actor,
                              f"{why}; rollback incomplete, needs a person: {left}",
                              request="")
        return self._move(a, ActionState.ROLLED_BACK, now_ns, actor,
                          f"{why}; undid {len(a.undo)} step(s)", request="")

    def _run_undo(self, steps: list[Step], a: Action) -> str:
        """Apply undo steps in order; what could not be undone, in words ('' if all)."""
        failed = []
        for step in steps:
            try:
                _, facts = self.actuators.apply(step, a)
                self._placement_effect(step, facts)
            except ActuatorError as exc:
                failed.append(str(exc))
        return "; ".join(failed)

    def _placement_effect(self, step: Step, facts: Mapping[str, object]) -> None:
        p = {**step.params, **facts}
        job, host = str(p.get("job", "")), str(p.get("host", ""))
        if step.op in (StepOp.ATTACH_SPARE, StepOp.RESTORE_HOST):
            job = step.target if step.op is StepOp.ATTACH_SPARE else job
            host = host if step.op is StepOp.ATTACH_SPARE else step.target
            if job and host and host not in self.placement.setdefault(job, []):
                self.placement[job].append(host)
        elif (step.op in (StepOp.DRAIN_HOST, StepOp.RELEASE_SPARE)
              and step.target in self.placement.get(job, ())):
            self.placement[job].remove(step.target)

    def _move(self, a: Action, state: ActionState, now_ns: int, actor: str, note: str,
              **changes: object) -> Action:
        moved = a.moved(state, ts_ns=now_ns, actor=actor, note=note, **changes)
        stored = self._store(moved, a)
        self.m_moves.labels(state.value).inc()
        log.info("remediation: %s %s %s -> %s (%s: %s)", a.id, a.kind.value, a.target,
                 state.value, actor, note)
        return stored

    def _store(self, new: Action, prior: Action | None) -> Action:
        stored = self.record(new, prior)
        self.actions[stored.id] = stored
        return stored


def _not_silenced_by(a: Action, near: dict[str, list[str]]) -> dict[str, list[str]]:
    """``near`` without a device's silence where no step of ``a`` configures it: a
    device that does not report was not silenced by an action that left it alone
    (a link shut at its one end that still reports, the other's agent being gone)."""
    touched = {s.device for s in a.steps if s.op in ON_DEVICE}
    out = {}
    for entity, rules in near.items():
        kept = rules if entity in touched else [r for r in rules if r != STOPPED]
        if kept:
            out[entity] = kept
    return out
