"""Remediation through a program: a scheduler's or an automation's own command line.

``CommandActuator`` runs one program per step, from the template configured for
the step's operation, e.g. for ``drain_host``::

    scontrol update nodename={target} state=drain reason="fabricops {action_id}: {reason}"

The template is split into arguments (``shlex.split``) before anything is
substituted, then each argument is formatted with ``target``, ``action_id``,
``diagnosis_id``, ``kind``, ``fault_type``, ``reason`` and the step's params
(``STEP_PARAMS``). No shell runs: a value lands in one argument whatever it
holds. A template naming another field is a ValueError when the config is
made. The program gets ``timeout_s`` (then its whole process group is killed)
and the fabricops environment plus ``env``. A non-zero exit, a timeout or a
program that cannot be started is an ActuatorError naming the step. If the last
non-empty line of its output is a JSON object, its scalar members are the facts.
Templates should be idempotent, as steps may be applied twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import string
import subprocess
from typing import Final

from prometheus_client import CollectorRegistry, Counter
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fabricops.core.actions import Action, Param, Step, StepOp
from fabricops.remediation.actuator import ActuatorError, scalar_facts

ACTION_FIELDS: Final = frozenset({"target", "action_id", "diagnosis_id", "kind", "fault_type",
                                  "reason"})
STEP_PARAMS: Final[dict[StepOp, frozenset[str]]] = {
    StepOp.SET_WEIGHT: frozenset({"weight"}),
    StepOp.SET_HASH: frozenset({"l4"}),
    StepOp.DRAIN_HOST: frozenset({"job"}),
    StepOp.RESTORE_HOST: frozenset({"job"}),
    StepOp.ATTACH_SPARE: frozenset({"host"}),
    StepOp.RELEASE_SPARE: frozenset({"job"}),
    StepOp.TICKET: frozenset({"summary"}),
    StepOp.LIMIT_INGRESS: frozenset({"share", "job"}),
}
"""The params a step of each operation may carry (see ``StepOp``), usable in its template."""

_STDERR_TAIL_CHARS = 400


def template_fields(op: StepOp, template: str) -> list[str]:
    """The arguments of ``template``; ValueError names the op and what cannot be used."""
    try:
        argv = shlex.split(template)
    except ValueError as exc:
        raise ValueError(f"template of {op.value!r}: {exc}") from None
    if not argv:
        raise ValueError(f"template of {op.value!r} is empty")
    allowed = ACTION_FIELDS | STEP_PARAMS.get(op, frozenset())
    for arg in argv:
        for name in _field_names(arg, op):
            if name not in allowed:
                raise ValueError(f"template of {op.value!r} names field {{{name}}}; use "
                                 f"{', '.join(sorted(allowed))}")
    return argv


def _field_names(text: str, op: StepOp) -> list[str]:
    names = []
    try:
        for _, name, spec, _ in string.Formatter().parse(text):
            if name is not None:
                names.append(name)
            if spec:
                names += _field_names(spec, op)
    except ValueError as exc:
        raise ValueError(f"template of {op.value!r}: {text!r}: {exc}") from None
    return names


class CommandConfig(BaseModel):
    """A command line template per operation; the time and environment they run with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    templates: dict[StepOp, str] = Field(min_length=1, description="Command line per operation")
    timeout_s: float = Field(default=30.0, gt=0, description="Longest run before it is killed")
    env: dict[str, str] = Field(default_factory=dict,
                                description="Added to the environment of fabricops")

    @field_validator("templates")
    @classmethod
    def _fields(cls, value: dict[StepOp, str]) -> dict[StepOp, str]:
        for op, template in value.items():
            template_fields(op, template)
        return value


class CommandActuator:
    """Carries out the operations it has a template for by running a program."""

    name = "command"

    def __init__(self, config: CommandConfig, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.ops = frozenset(config.templates)
        self._argv = {op: template_fields(op, t) for op, t in config.templates.items()}
        self._env = {**os.environ, **config.env}
        self.registry = registry if registry is not None else CollectorRegistry()
        self._steps = Counter("fabricops_command_steps", "Steps carried out by running a "
                              "program, by operation and outcome (ok, failed, timeout, "
                              "not_started, bad_step)", ["op", "outcome"], registry=self.registry)

    def argv(self, step: Step, action: Action) -> list[str]:
        """The program and arguments for ``step``; KeyError names a param the step lacks."""
        fields: dict[str, Param] = {
            "target": step.target, "action_id": action.id, "diagnosis_id": action.diagnosis_id,
            "kind": action.kind.value, "fault_type": action.fault_type, "reason": action.reason,
            **step.params}
        return [arg.format_map(fields) for arg in self._argv[step.op]]

    def check(self, step: Step) -> None:
        """The program reaches the device; it is not run ahead."""

    def apply(self, step: Step, action: Action) -> dict[str, Param]:
        """Run the step's command; its facts, or ActuatorError naming the step and the cause."""
        if step.op not in self.ops:
            raise ActuatorError(f"{step.describe()}: no command is configured for "
                                f"{step.op.value!r}")
        try:
            argv = self.argv(step, action)
        except KeyError as exc:
            self._count(step, "bad_step")
            raise ActuatorError(f"{step.describe()}: the template of {step.op.value!r} needs "
                                f"param {exc.args[0]!r}, which the step lacks") from None
        except ValueError as exc:
            self._count(step, "bad_step")
            raise ActuatorError(f"{step.describe()}: the template of {step.op.value!r} "
                                f"cannot be filled: {exc}") from None
        code, stdout, stderr = self._run(step, argv)
        if code != 0:
            self._count(step, "failed")
            how = f"exited with {code}" if code > 0 else f"was killed by signal {-code}"
            raise ActuatorError(f"{step.describe()}: {argv[0]} {how}{_tail(stderr)}")
        self._count(step, "ok")
        return _facts(stdout)

    def _run(self, step: Step, argv: list[str]) -> tuple[int, str, str]:
        """Run ``argv`` in a session of its own, so a timeout kills what it started too."""
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=self._env, text=True,
                                    errors="replace", start_new_session=True)
        except OSError as exc:
            self._count(step, "not_started")
            raise ActuatorError(f"{step.describe()}: cannot run {argv[0]!r}: "
                                f"{exc.strerror or exc}") from None
        try:
            stdout, stderr = proc.communicate(timeout=self.config.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=5)  # a process that left the group keeps the pipes
            proc.kill()
            proc.wait()
            self._count(step, "timeout")
            raise ActuatorError(f"{step.describe()}: {argv[0]} did not finish within "
                                f"{self.config.timeout_s:g} s and was killed") from None
        return proc.returncode, stdout, stderr

    def _count(self, step: Step, outcome: str) -> None:
        self._steps.labels(step.op.value, outcome).inc()


def _tail(stderr: str) -> str:
    text = stderr.strip()
    if len(text) > _STDERR_TAIL_CHARS:
        text = "..." + text[-_STDERR_TAIL_CHARS:]
    return f": {text}" if text else ""


def _facts(stdout: str) -> dict[str, Param]:
    """The scalar members of the JSON object on the last non-empty line, if it is one."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return {}
    try:
        decoded = json.loads(lines[-1])
    except ValueError:
        return {}
    if not isinstance(decoded, dict):
        return {}
    return scalar_facts(decoded)
