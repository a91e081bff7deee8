"""The actuator interface, the inverse of each step, and the routing of steps to actuators.

An actuator carries out ``Step``s on something outside fabricops: the simulated
fabric, a switch over gNMI Set, an external automation over a webhook, a
scheduler through a command. ``apply`` returns facts learnt while applying
(the previous WCMP weight, ECMP hash fields or ingress share as ``previous``, the
previous value of each setting a ``set_config`` step wrote as ``previous.<setting>``,
the spare that was attached) from which ``inverse`` builds the steps that undo it;
without a ``previous`` the undo restores the default (weight 1, hashing on L3+L4, no
ingress limit).
Actuators are picked per step operation by ``Actuators``; there is no
discovery by name.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from typing import Protocol

from fabricops.core.actions import ON_DEVICE, Action, Param, Step, StepOp

PREVIOUS = "previous."
"""Prefix of the facts a ``set_config`` step returns: ``previous.<setting>`` -> old value."""


class ActuatorError(RuntimeError):
    """A step that could not be carried out; the message names the target and the cause."""


class UnreachableError(ActuatorError):
    """A step whose device's management did not answer (unreachable, or no answer in
    time): the device may forward on, but cannot be configured now."""

    def __init__(self, message: str, device: str) -> None:
        super().__init__(message)
        self.device = device


def refuse_unreachable(step: Step, unreachable: Collection[str]) -> None:
    """UnreachableError if ``step`` is one a device's management carries out
    (``ON_DEVICE``) on a device in ``unreachable``: for fakes of a device gone quiet."""
    if step.op in ON_DEVICE and step.device in unreachable:
        raise UnreachableError(f"{step.describe()}: unreachable", step.device)


class Actuator(Protocol):
    """Carries out steps of the operations in ``ops``."""

    name: str
    ops: frozenset[StepOp]

    def apply(self, step: Step, action: Action) -> dict[str, Param]:
        """Carry out ``step`` of ``action`` (blocking); return facts for ``inverse``.

        Raises ActuatorError naming the target and the cause. Applying a step
        twice has the effect of applying it once.
        """
        ...

    def check(self, step: Step) -> None:
        """Ask, changing nothing, whether the device that would carry out ``step``
        answers now: UnreachableError if it does not. Any answer (a refusal too) is
        enough; an actuator that cannot ask ahead (an external automation) returns."""
        ...


def scalar_facts(answer: Mapping[str, object]) -> dict[str, Param]:
    """The members of ``answer`` that can be step facts (strings, numbers, booleans)."""
    return {k: v for k, v in answer.items() if isinstance(v, str | int | float | bool)}


def inverse(step: Step, facts: Mapping[str, Param]) -> tuple[Step, ...]:
    """The steps that undo ``step``, given the facts its actuator returned."""
    p = {**step.params, **facts}
    t = step.target
    match step.op:
        case StepOp.SHUT_PORT:
            return (Step(op=StepOp.NO_SHUT_PORT, target=t),)
        case StepOp.NO_SHUT_PORT:
            return (Step(op=StepOp.SHUT_PORT, target=t),)
        case StepOp.SET_WEIGHT:
            return (Step(op=StepOp.SET_WEIGHT, target=t,
                         params={"weight": p.get("previous", 1)}),)
        case StepOp.SET_HASH:
            return (Step(op=StepOp.SET_HASH, target=t, params={"l4": p.get("previous", True)}),)
        case StepOp.DRAIN_HOST if p.get("job"):
            return (Step(op=StepOp.RESTORE_HOST, target=t, params={"job": p["job"]}),)
        case StepOp.ATTACH_SPARE if p.get("host"):
            return (Step(op=StepOp.RELEASE_SPARE, target=str(p["host"]), params={"job": t}),)
        case StepOp.RESTORE_HOST:
            return (Step(op=StepOp.DRAIN_HOST, target=t, params={"job": p["job"]}),)
        case StepOp.RELEASE_SPARE:
            return (Step(op=StepOp.ATTACH_SPARE, target=str(p["job"]), params={"host": t}),)
        case StepOp.LIMIT_INGRESS:
            return (Step(op=StepOp.LIMIT_INGRESS, target=t,
                         params={"share": p.get("previous", 1.0), "job": p.get("job", "")}),)
        case StepOp.SET_CONFIG:
            back = {k.removeprefix(PREVIOUS): v for k, v in facts.items()
                    if k.startswith(PREVIOUS)}
            return (Step(op=StepOp.SET_CONFIG, target=t, params=back),) if back else ()
    return ()  # relabelling and tickets need no undo


class Actuators:
    """Routes each step operation to the actuator configured for it."""

    def __init__(self, by_op: Mapping[StepOp, Actuator]) -> None:
        for op, actuator in by_op.items():
            if op not in actuator.ops:
                raise ValueError(f"actuator {actuator.name!r} cannot carry out {op.value!r}")
        self.by_op = dict(by_op)

    @classmethod
    def single(cls, actuator: Actuator) -> Actuators:
        """Every operation the actuator supports goes to it."""
        return cls(dict.fromkeys(actuator.ops, actuator))

    def supports(self, op: StepOp) -> bool:
        return op in self.by_op

    def check(self, step: Step) -> None:
        """``check`` of the actuator configured for ``step`` (none configured: nothing to
        ask; ``apply`` says so)."""
        actuator = self.by_op.get(step.op)
        if actuator is not None:
            actuator.check(step)

    def apply(self, step: Step, action: Action) -> tuple[str, dict[str, Param]]:
        """Apply through the configured actuator; return its name and facts."""
        actuator = self.by_op.get(step.op)
        if actuator is None:
            raise ActuatorError(f"{step.describe()}: no actuator is configured for "
                                f"{step.op.value!r}")
        return actuator.name, actuator.apply(step, action)


class RecordingActuator:
    """A fake actuator: records each step; targets in ``fail`` raise ActuatorError, and
    steps on the devices in ``unreachable`` UnreachableError (``refuse_unreachable``),
    when checked too; ``checked``: the steps asked about."""

    name = "recording"

    def __init__(self, ops: frozenset[StepOp] = frozenset(StepOp),
                 fail: frozenset[str] = frozenset(),
                 unreachable: frozenset[str] = frozenset()) -> None:
        self.ops = ops
        self.fail = fail
        self.unreachable = unreachable
        self.applied: list[Step] = []
        self.checked: list[Step] = []
        self._lock = threading.Lock()

    def check(self, step: Step) -> None:
        with self._lock:
            self.checked.append(step)
        refuse_unreachable(step, self.unreachable)

    def apply(self, step: Step, action: Action) -> dict[str, Param]:
        refuse_unreachable(step, self.unreachable)
        if step.target in self.fail:
            raise ActuatorError(f"{step.describe()}: refused by the device")
        with self._lock:
            self.applied.append(step)
        if step.op is StepOp.ATTACH_SPARE:
            return {"host": "host-spare"}
        return {}
