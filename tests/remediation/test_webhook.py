"""WebhookClient, WebhookActuator and WebhookNotifier against a real local HTTP receiver."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import time
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from fabricops.core.actions import Action, ActionKind, Step, StepOp
from fabricops.remediation.actuator import ActuatorError, inverse
from fabricops.remediation.webhook import (
    WebhookActuator,
    WebhookClient,
    WebhookConfig,
    WebhookError,
    WebhookNotifier,
)
from tests.remediation.http_receiver import Answer, Receiver

ActionFactory = Callable[..., Action]
SECRET = "s3cret-key"




class Sleeps:
    """The injected sleep: records each wait, runs ``on_sleep`` and waits for nothing."""

    def __init__(self, on_sleep: Callable[[int], None] | None = None) -> None:
        self.waits: list[float] = []
        self.on_sleep = on_sleep

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.on_sleep is not None:
            self.on_sleep(len(self.waits))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _client(url: str, sleeps: Sleeps | None = None, registry: CollectorRegistry | None = None,
            **config: object) -> WebhookClient:
    return WebhookClient(WebhookConfig(url=url, **config),
                         sleep=sleeps or Sleeps(), registry=registry)


def _spare_action(make_action: ActionFactory) -> tuple[Step, Action]:
    step = Step(op=StepOp.ATTACH_SPARE, target="job-llm-01")
    return step, make_action(ActionKind.REPLACE_NODE, "host-017", step)


@pytest.mark.integration
def test_the_body_is_signed_and_the_event_named(receiver: Receiver) -> None:
    receiver.default = Answer(body=b'{"accepted": true, "ticket": "OPS-12"}')
    payload = {"action": {"id": "act-1", "reason": "caf\u00e9 \u2192 drained"}, "n": 3}
    answer = _client(receiver.url, secret=SECRET).post("remediation.test", payload)
    (request,) = receiver.requests
    expected = hmac.new(SECRET.encode(), request.body, hashlib.sha256).hexdigest()
    assert request.path == "/hooks/fabricops"
    assert request.headers["X-Fabricops-Signature"] == f"sha256={expected}"
    assert request.headers["X-Fabricops-Event"] == "remediation.test"
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.body) == payload
    assert answer == {"accepted": True, "ticket": "OPS-12"}


@pytest.mark.integration
def test_without_a_secret_nothing_is_signed_and_odd_answers_are_empty(
        receiver: Receiver) -> None:
    receiver.script = [Answer(status=204, body=b""), Answer(body=b"[1, 2]"),
                       Answer(body=b"not json")]
    client = _client(receiver.url)
    answers = [client.post("remediation.test", {"n": i}) for i in range(3)]
    assert answers == [{}, {}, {}]
    assert all("X-Fabricops-Signature" not in r.headers for r in receiver.requests)


@pytest.mark.integration
def test_5xx_is_retried_with_backoff_under_one_delivery_id(receiver: Receiver) -> None:
    receiver.script = [Answer(status=503), Answer(status=503)]
    receiver.default = Answer(body=b'{"ok": 1}')
    sleeps, registry = Sleeps(), CollectorRegistry()
    answer = _client(receiver.url, sleeps, registry).post("remediation.test", {"n": 1})
    assert answer == {"ok": 1}
    assert len(receiver.requests) == 3
    assert sleeps.waits == [0.5, 1.0]
    assert len({r.headers["X-Fabricops-Delivery"] for r in receiver.requests}) == 1
    assert len({r.body for r in receiver.requests}) == 1
    assert registry.get_sample_value("fabricops_webhook_attempts_total",
                                     {"event": "remediation.test", "result": "5xx"}) == 2


@pytest.mark.integration
def test_retry_after_is_followed_up_to_the_longest_backoff(receiver: Receiver) -> None:
    receiver.script = [Answer(status=429, headers=(("Retry-After", "3"),)),
                       Answer(status=503, headers=(("Retry-After", "120"),)),
                       Answer(status=503, headers=(("Retry-After", "Wed, 21 Oct 2015 07:28:00 "
                                                                   "GMT"),))]
    sleeps = Sleeps()
    _client(receiver.url, sleeps, max_backoff_s=10).post("remediation.test", {})
    assert sleeps.waits == [3.0, 10.0, 2.0]  # a date is not followed: the backoff applies


@pytest.mark.integration
def test_a_receiver_that_comes_up_late_gets_the_event() -> None:
    receiver = Receiver(port=_closed_port())
    sleeps = Sleeps(on_sleep=lambda n: receiver.start() if n == 2 else None)
    registry = CollectorRegistry()
    try:
        answer = _client(receiver.url, sleeps, registry).post("remediation.test", {"n": 7})
    finally:
        receiver.stop()
    assert answer == {}
    assert len(sleeps.waits) == 2
    assert [json.loads(r.body) for r in receiver.requests] == [{"n": 7}]
    assert registry.get_sample_value("fabricops_webhook_attempts_total",
                                     {"event": "remediation.test", "result": "error"}) == 2


@pytest.mark.integration
def test_a_slow_answer_times_out_and_is_retried(receiver: Receiver) -> None:
    receiver.script = [Answer(delay_s=5.0)]
    sleeps = Sleeps()
    started = time.monotonic()
    _client(receiver.url, sleeps, timeout_s=0.2).post("remediation.test", {})
    assert time.monotonic() - started < 3.0  # gave up on the 5 s answer after 0.2 s
    assert sleeps.waits == [0.5]
    assert len(receiver.requests) == 2


def test_it_gives_up_after_the_attempts_naming_the_url() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/hook"
    sleeps, registry = Sleeps(), CollectorRegistry()
    with pytest.raises(WebhookError) as err:
        _client(url, sleeps, registry, attempts=3).post("remediation.test", {})
    message = str(err.value)
    assert message.startswith(f"webhook {url}: gave up after 3 attempts; last: ")
    assert "Connection refused" in message
    assert sleeps.waits == [0.5, 1.0]
    assert registry.get_sample_value("fabricops_webhook_failures_total",
                                     {"event": "remediation.test"}) == 1


@pytest.mark.integration
def test_a_4xx_is_not_retried(receiver: Receiver) -> None:
    receiver.default = Answer(status=400, body=b"unknown step op")
    sleeps = Sleeps()
    with pytest.raises(WebhookError, match=r"HTTP 400 Bad Request: unknown step op "
                                           r"\(attempt 1 of 5; not retried\)") as err:
        _client(receiver.url, sleeps).post("remediation.test", {})
    assert receiver.url in str(err.value)
    assert len(receiver.requests) == 1
    assert sleeps.waits == []


@pytest.mark.integration
def test_the_actuator_posts_the_step_and_returns_the_answers_scalars(
        receiver: Receiver, make_action: ActionFactory) -> None:
    receiver.default = Answer(body=json.dumps({
        "host": "host-031", "slot": 4, "warm": True, "score": 0.5, "none": None,
        "detail": {"rack": "r7"}, "tags": ["a"]}).encode())
    step, action = _spare_action(make_action)
    facts = WebhookActuator(_client(receiver.url, secret=SECRET)).apply(step, action)
    (request,) = receiver.requests
    assert request.headers["X-Fabricops-Event"] == "remediation.step"
    assert json.loads(request.body) == {"action": action.model_dump(mode="json"),
                                        "step": step.model_dump(mode="json")}
    assert facts == {"host": "host-031", "slot": 4, "warm": True, "score": 0.5}
    assert inverse(step, facts) == (
        Step(op=StepOp.RELEASE_SPARE, target="host-031", params={"job": "job-llm-01"}),)


@pytest.mark.integration
def test_the_actuator_names_the_step_when_delivery_fails(
        receiver: Receiver, make_action: ActionFactory) -> None:
    receiver.default = Answer(status=500)
    step, action = _spare_action(make_action)
    actuator = WebhookActuator(_client(receiver.url, attempts=2))
    with pytest.raises(ActuatorError, match=r"^attach_spare job-llm-01: webhook .* gave up "
                                            r"after 2 attempts; last: HTTP 500"):
        actuator.apply(step, action)
    assert actuator.ops == frozenset(StepOp)


@pytest.mark.integration
def test_the_notifier_announces_actions_and_survives_a_dead_receiver(
        receiver: Receiver, make_action: ActionFactory, caplog: pytest.LogCaptureFixture,
) -> None:
    _, action = _spare_action(make_action)
    registry, dead_registry = CollectorRegistry(), CollectorRegistry()
    assert WebhookNotifier(_client(receiver.url), registry).notify(action)
    (request,) = receiver.requests
    assert request.headers["X-Fabricops-Event"] == "remediation.action"
    assert Action.model_validate_json(request.body) == action

    dead = WebhookNotifier(_client(f"http://127.0.0.1:{_closed_port()}/", attempts=2),
                           dead_registry)
    with caplog.at_level(logging.WARNING, logger="fabricops.remediation.webhook"):
        assert dead.notify(action) is False
    assert "act-replace_node-1" in caplog.text
    assert registry.get_sample_value("fabricops_webhook_notices_total",
                                     {"outcome": "delivered"}) == 1
    assert dead_registry.get_sample_value("fabricops_webhook_notices_total",
                                          {"outcome": "failed"}) == 1


def test_the_config_is_strict() -> None:
    with pytest.raises(ValueError, match="must start with http"):
        WebhookConfig(url="ftp://example.org/hook")
    with pytest.raises(ValueError, match="extra"):
        WebhookConfig(url="http://x/", retries=3)  # type: ignore[call-arg]
