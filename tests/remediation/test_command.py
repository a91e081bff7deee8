"""CommandActuator running real programs (this Python, given scripts on the command line)."""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.core.actions import Action, ActionKind, Step, StepOp
from fabricops.remediation.actuator import ActuatorError
from fabricops.remediation.command import CommandActuator, CommandConfig

ActionFactory = Callable[..., Action]
PYTHON = shlex.quote(sys.executable)
NASTY = "flaps; rm -rf / $(id) `id` | cat > x && \"double\" 'single' \\ * {braces}"


def _script(code: str) -> str:
    """``python -c CODE`` as template text (braces doubled, so they stay literal)."""
    return f"{PYTHON} -c {shlex.quote(code.replace('{', '{{').replace('}', '}}'))}"


def _drain(make_action: ActionFactory, reason: str = "port flaps") -> tuple[Step, Action]:
    step = Step(op=StepOp.DRAIN_HOST, target="host-017", params={"job": "job-llm-01"})
    action = make_action(ActionKind.REPLACE_NODE, "host-017", step).model_copy(
        update={"reason": reason})
    return step, action


def _actuator(templates: dict[StepOp, str], registry: CollectorRegistry | None = None,
              **config: object) -> CommandActuator:
    return CommandActuator(CommandConfig(templates=templates, **config),
                           registry=registry)


def test_values_arrive_as_single_arguments_whatever_they_hold(
        make_action: ActionFactory, tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    write_argv = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[2:]))"
    template = (f"{_script(write_argv)} {shlex.quote(str(out))} nodename={{target}} "
                "state=drain reason=\"fabricops {action_id}: {reason}\" {job} {kind}/{fault_type}")
    step, action = _drain(make_action, reason=NASTY)
    registry = CollectorRegistry()
    facts = _actuator({StepOp.DRAIN_HOST: template}, registry).apply(step, action)
    assert json.loads(out.read_text()) == [
        "nodename=host-017", "state=drain", f"reason=fabricops {action.id}: {NASTY}",
        "job-llm-01", "replace_node/link_flap"]
    assert facts == {}
    assert registry.get_sample_value("fabricops_command_steps_total",
                                     {"op": "drain_host", "outcome": "ok"}) == 1


def test_the_last_json_line_gives_the_facts(make_action: ActionFactory) -> None:
    code = ("import json, os; print('allocating a spare...'); "
            "print(json.dumps({'host': 'host-031', 'slot': 4, 'warm': True, 'site': "
            "os.environ['FABRICOPS_SITE'], 'rack': {'row': 7}, 'tags': ['a'], 'none': None}));"
            "print()")
    step = Step(op=StepOp.ATTACH_SPARE, target="job-llm-01")
    actuator = _actuator({StepOp.ATTACH_SPARE: _script(code)}, env={"FABRICOPS_SITE": "dc-2"})
    facts = actuator.apply(step, make_action(ActionKind.REPLACE_NODE, "host-017", step))
    assert facts == {"host": "host-031", "slot": 4, "warm": True, "site": "dc-2"}


def test_output_that_is_not_a_json_object_gives_no_facts(make_action: ActionFactory) -> None:
    step, action = _drain(make_action)
    for code in ("print('drained')", "print('[1, 2]')", "pass"):
        assert _actuator({StepOp.DRAIN_HOST: _script(code)}).apply(step, action) == {}


def test_a_non_zero_exit_names_the_step_the_code_and_the_end_of_stderr(
        make_action: ActionFactory) -> None:
    code = ("import sys; sys.stderr.write('x' * 2000 + '\\nscontrol: error: Invalid node name "
            "specified\\n'); sys.exit(3)")
    step, action = _drain(make_action)
    with pytest.raises(ActuatorError) as err:
        _actuator({StepOp.DRAIN_HOST: _script(code)}).apply(step, action)
    message = str(err.value)
    assert message.startswith(f"drain_host host-017 (job=job-llm-01): {sys.executable} "
                              "exited with 3: ...")
    assert message.endswith("scontrol: error: Invalid node name specified")
    assert len(message) < 600


def test_a_command_that_overruns_is_killed_with_what_it_started(
        make_action: ActionFactory) -> None:
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
            "time.sleep(30)")
    step, action = _drain(make_action)
    registry = CollectorRegistry()
    started = time.monotonic()
    with pytest.raises(ActuatorError, match=r"^drain_host host-017 .*did not finish within "
                                            r"0.5 s and was killed"):
        _actuator({StepOp.DRAIN_HOST: _script(code)}, registry, timeout_s=0.5).apply(
            step, action)
    assert time.monotonic() - started < 4.0  # the grandchild's pipes did not hold us
    assert registry.get_sample_value("fabricops_command_steps_total",
                                     {"op": "drain_host", "outcome": "timeout"}) == 1


def test_a_missing_program_is_an_actuator_error(make_action: ActionFactory,
                                                 tmp_path: Path) -> None:
    missing = tmp_path / "no-such-scontrol"
    step, action = _drain(make_action)
    with pytest.raises(ActuatorError, match=rf"drain_host host-017 .*cannot run "
                                            rf"'{missing}': No such file or directory"):
        _actuator({StepOp.DRAIN_HOST: f"{missing} {{target}}"}).apply(step, action)


def test_a_step_without_a_param_its_template_needs_is_refused(
        make_action: ActionFactory) -> None:
    step = Step(op=StepOp.DRAIN_HOST, target="host-017")
    actuator = _actuator({StepOp.DRAIN_HOST: "true {target} {job}"})
    with pytest.raises(ActuatorError, match="needs param 'job', which the step lacks"):
        actuator.apply(step, make_action(ActionKind.REPLACE_NODE, "host-017", step))


def test_only_the_operations_with_a_template_are_carried_out(
        make_action: ActionFactory) -> None:
    actuator = _actuator({StepOp.DRAIN_HOST: "true {target}",
                          StepOp.RESTORE_HOST: "true {target} {job}"})
    assert actuator.ops == frozenset({StepOp.DRAIN_HOST, StepOp.RESTORE_HOST})
    step = Step(op=StepOp.SHUT_PORT, target="leaf-1:eth3")
    with pytest.raises(ActuatorError, match="no command is configured for 'shut_port'"):
        actuator.apply(step, make_action(ActionKind.ISOLATE_PORT, step.target, step))


@pytest.mark.parametrize(("template", "expected"), [
    ("scontrol update nodename={target} {host}", r"'drain_host' names field \{host\}"),
    ("scontrol update {}", r"'drain_host' names field \{\}"),
    ("scontrol {target.__class__}", r"'drain_host' names field \{target.__class__\}"),
    ("scontrol {target:>{width}}", r"'drain_host' names field \{width\}"),
    ("scontrol reason=\"unclosed {reason}", r"'drain_host': No closing quotation"),
    ("scontrol {target", r"'drain_host': .*expected '\}'"),
    ("   ", r"'drain_host' is empty"),
])
def test_a_bad_template_is_refused_when_configured(template: str, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        CommandConfig(templates={StepOp.DRAIN_HOST: template})


def test_a_ticket_may_use_its_summary() -> None:
    config = CommandConfig(templates={StepOp.TICKET: "ticket-cli --title {summary} {target}"})
    assert CommandActuator(config).ops == frozenset({StepOp.TICKET})
