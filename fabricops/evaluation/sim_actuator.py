"""The simulated fabric as an actuator: each step is a call on ``Simulator.control``.

The simulator is reached through ``run``, a callable that executes a function
on it between two ticks: ``SimulationDriver.call`` for a fabric running live,
or a direct call where the caller owns the simulation loop (closed-loop runs).
This module is only imported where the user picked the simulated fabric.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fabricops.core.actions import Action, Param, Step, StepOp
from fabricops.core.entities import split_port
from fabricops.remediation.actuator import PREVIOUS, ActuatorError
from fabricops.simulator.control import ControlError
from fabricops.simulator.engine import Simulator

Runner = Callable[[Callable[[Simulator], Any]], Any]


def direct(sim: Simulator) -> Runner:
    """A runner for a simulation the caller steps itself."""
    return lambda fn: fn(sim)


class SimulatorActuator:
    """Applies steps to a simulation through ``run`` (see the module docstring)."""

    name = "simulator"
    ops = frozenset(StepOp)

    def __init__(self, run: Runner) -> None:
        self.run = run

    def check(self, step: Step) -> None:
        """The simulation always answers."""

    def apply(self, step: Step, action: Action) -> dict[str, Param]:
        try:
            result: dict[str, Param] = self.run(lambda sim: self._on(sim, step, action))
        except (ControlError, ValueError, TimeoutError) as exc:
            raise ActuatorError(f"{step.describe()}: {exc}") from exc
        return result

    @staticmethod
    def _on(sim: Simulator, step: Step, action: Action) -> dict[str, Param]:
        c, t, p = sim.control, step.target, step.params
        match step.op:
            case StepOp.SHUT_PORT:
                c.shut_port(t)
            case StepOp.NO_SHUT_PORT:
                c.no_shut_port(t)
            case StepOp.SET_WEIGHT:
                previous = c.wcmp_weight(t)
                c.set_wcmp_weights(split_port(t)[0], {t: int(p["weight"])})
                return {"previous": previous}
            case StepOp.SET_HASH:
                previous = c.ecmp_hash_l4(t)
                c.set_ecmp_hash(t, l4=bool(p["l4"]))
                return {"previous": previous}
            case StepOp.RELABEL_FLOWS:
                return {"flows": c.relabel_flows(t)}
            case StepOp.DRAIN_HOST:
                job = c.drain_host(t)
                return {"job": job} if job else {}
            case StepOp.RESTORE_HOST:
                c.restore_host(t, str(p["job"]))
            case StepOp.ATTACH_SPARE:
                host = p.get("host")
                return {"host": c.attach_spare(t, str(host) if host else None)}
            case StepOp.RELEASE_SPARE:
                c.release_spare(t, str(p["job"]))
            case StepOp.SET_CONFIG:
                return {f"{PREVIOUS}{k}": v for k, v in sim.settings.set(t, p).items()}
            case StepOp.LIMIT_INGRESS:
                return {"previous": c.limit_ingress(t, float(p["share"]), str(p.get("job", "")))}
            case StepOp.TICKET:
                pass  # the simulated fabric has no ticket queue; the audit log is the ticket
        return {}
