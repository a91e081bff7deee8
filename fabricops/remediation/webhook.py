"""Remediation over webhooks: steps carried out, and actions announced, by an HTTP receiver.

``WebhookClient.post`` sends one event as a JSON POST with the headers
``X-Fabricops-Event: EVENT``, ``X-Fabricops-Delivery: ID`` (the same on every
retry, so a receiver can drop duplicates; a caller that retries later itself
passes the same ``delivery_id`` again) and, when a secret is set,
``X-Fabricops-Signature: sha256=HEX`` (HMAC-SHA256 of the exact body bytes).
Connection errors, timeouts, 5xx and 429 are retried with exponential backoff
(a numeric ``Retry-After`` is followed, up to ``max_backoff_s``); any other
answer that is not 2xx, and the last failed attempt, raise WebhookError naming
the URL, the attempts and the cause. The answer is the decoded JSON object of
the response body ({} if it is empty or not an object).

``WebhookActuator`` posts ``remediation.step`` for every step; the scalar
members of the receiver's answer are the step's facts (``{"host": "host-031"}``
for ``attach_spare``). ``WebhookNotifier`` posts ``remediation.action`` and
never raises: a dead receiver is logged and counted, and remediation goes on.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from fabricops.core.actions import Action, Param, Step, StepOp
from fabricops.remediation.actuator import ActuatorError, scalar_facts

log = logging.getLogger(__name__)

_MAX_RESPONSE_BYTES = 1 << 20
_RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})


class WebhookConfig(BaseModel):
    """Where events go, how they are signed, and how hard delivery is tried."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(description="http:// or https:// URL the events are posted to")
    secret: SecretStr = Field(default=SecretStr(""),
                              description="HMAC-SHA256 key of the signature header (none if "
                                          "empty)")
    timeout_s: float = Field(default=5.0, gt=0, description="Per attempt: connect and answer")
    attempts: int = Field(default=5, ge=1, le=100, description="Tries before giving up")
    backoff_s: float = Field(default=0.5, ge=0, description="Wait after the first failure; "
                                                           "doubles after each")
    max_backoff_s: float = Field(default=10.0, ge=0, description="Longest wait between tries")

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"webhook url {value!r} must start with http:// or https://")
        return value


class WebhookError(RuntimeError):
    """An event that was not delivered; the message names the URL, the attempts, the cause.

    ``retryable`` is False when the receiver refused it (an answer that retrying will
    not change: 4xx other than 429, 3xx); ``retry_after_s`` is the receiver's numeric
    Retry-After of the last attempt, if it sent one.
    """

    def __init__(self, message: str, *, retryable: bool = True,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.attempts = Counter("fabricops_webhook_attempts",
                                "POSTs tried, by event and result (2xx, 4xx, 429, 5xx, error)",
                                ["event", "result"], registry=registry)
        self.failures = Counter("fabricops_webhook_failures",
                                "Events not delivered after every attempt", ["event"],
                                registry=registry)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer of its own (a POST silently turned into a GET is not delivery)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _RetryableError(Exception):
    def __init__(self, cause: str, retry_after_s: float | None = None) -> None:
        super().__init__(cause)
        self.retry_after_s = retry_after_s


class _RefusedError(Exception):
    """An answer that retrying will not change (4xx other than 429, 3xx)."""


class WebhookClient:
    """Posts signed JSON events to one URL, retrying what may succeed later. Thread-safe."""

    def __init__(self, config: WebhookConfig, *, sleep: Callable[[float], None] = time.sleep,
                 registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.registry = registry if registry is not None else CollectorRegistry()
        self._metrics = _Metrics(self.registry)
        self._sleep = sleep
        self._opener = urllib.request.build_opener(_NoRedirect)

    def post(self, event: str, payload: Mapping[str, object], *,
             delivery_id: str | None = None, attempts: int | None = None,
             ) -> dict[str, object]:
        """Deliver ``event``; the receiver's JSON object. WebhookError when not delivered.

        ``delivery_id`` is the ``X-Fabricops-Delivery`` header (a fresh random id if
        None); ``attempts`` overrides the configured number of tries (1: no retry here,
        the caller schedules the next try)."""
        cfg = self.config
        tries = cfg.attempts if attempts is None else attempts
        if tries < 1:
            raise ValueError(f"webhook {cfg.url}: attempts must be at least 1, not {tries}")
        body = json.dumps(payload, separators=(",", ":")).encode()
        headers = self._headers(event, body, delivery_id or uuid.uuid4().hex)
        cause, retry_after_s = "", None
        for attempt in range(1, tries + 1):
            try:
                return self._attempt(event, body, headers)
            except _RetryableError as exc:
                cause, retry_after_s = str(exc), exc.retry_after_s
                if attempt < tries:
                    self._sleep(self._delay_s(attempt, exc.retry_after_s))
            except _RefusedError as exc:
                self._metrics.failures.labels(event).inc()
                raise WebhookError(f"webhook {cfg.url}: {exc} (attempt {attempt} of "
                                   f"{tries}; not retried)", retryable=False) from None
        self._metrics.failures.labels(event).inc()
        raise WebhookError(f"webhook {cfg.url}: gave up after {tries} attempt"
                           f"{'' if tries == 1 else 's'}; last: {cause}",
                           retry_after_s=retry_after_s)

    def _headers(self, event: str, body: bytes, delivery_id: str) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": "fabricops-webhook", "X-Fabricops-Event": event,
                   "X-Fabricops-Delivery": delivery_id}
        secret = self.config.secret.get_secret_value()
        if secret:
            digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            headers["X-Fabricops-Signature"] = f"sha256={digest}"
        return headers

    def _attempt(self, event: str, body: bytes, headers: Mapping[str, str]) -> dict[str, object]:
        request = urllib.request.Request(self.config.url, data=body, headers=dict(headers),
                                         method="POST")
        try:
            with self._opener.open(request, timeout=self.config.timeout_s) as response:
                answer = response.read(_MAX_RESPONSE_BYTES)
        except urllib.error.HTTPError as exc:
            self._metrics.attempts.labels(event, _result(exc.code)).inc()
            cause = f"HTTP {exc.code} {exc.reason}{_excerpt(exc)}"
            if exc.code in _RETRIED_STATUS:
                retry_after_s = _retry_after_s(exc.headers.get("Retry-After"))
                raise _RetryableError(cause, retry_after_s) from None
            raise _RefusedError(cause) from None
        except (OSError, http.client.HTTPException) as exc:
            self._metrics.attempts.labels(event, "error").inc()
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise _RetryableError(f"{type(reason).__name__}: {reason}") from None
        self._metrics.attempts.labels(event, "2xx").inc()
        return _json_object(answer)

    def _delay_s(self, attempt: int, retry_after_s: float | None) -> float:
        cfg = self.config
        delay = cfg.backoff_s * 2.0 ** (attempt - 1) if retry_after_s is None else retry_after_s
        return min(cfg.max_backoff_s, delay)


def _result(status: int) -> str:
    return "429" if status == 429 else f"{status // 100}xx"


def _retry_after_s(value: str | None) -> float | None:
    """A numeric Retry-After in seconds (an HTTP date is ignored: the backoff applies)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _excerpt(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read(200).decode(errors="replace").strip()
    except OSError:
        return ""
    return f": {text}" if text else ""


def _json_object(body: bytes) -> dict[str, object]:
    try:
        decoded = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {}
    return decoded if isinstance(decoded, dict) else {}


class WebhookActuator:
    """Hands every step to an external automation; its answer's scalars are the facts."""

    name = "webhook"
    ops = frozenset(StepOp)

    def __init__(self, client: WebhookClient, registry: CollectorRegistry | None = None) -> None:
        self.client = client
        self.registry = registry if registry is not None else CollectorRegistry()
        self._steps = Counter("fabricops_webhook_steps", "Steps handed to the webhook, by "
                              "operation and outcome (ok, failed)", ["op", "outcome"],
                              registry=self.registry)

    def check(self, step: Step) -> None:
        """The automation behind the webhook reaches the device; it is not asked ahead."""

    def apply(self, step: Step, action: Action) -> dict[str, Param]:
        """Post ``remediation.step``; ActuatorError names the step if it is not delivered."""
        payload = {"action": action.model_dump(mode="json"), "step": step.model_dump(mode="json")}
        try:
            answer = self.client.post("remediation.step", payload)
        except WebhookError as exc:
            self._steps.labels(step.op.value, "failed").inc()
            raise ActuatorError(f"{step.describe()}: {exc}") from None
        self._steps.labels(step.op.value, "ok").inc()
        return scalar_facts(answer)


class WebhookNotifier:
    """Announces actions (each state they reach) to a receiver; never fails remediation."""

    def __init__(self, client: WebhookClient, registry: CollectorRegistry | None = None) -> None:
        self.client = client
        self.registry = registry if registry is not None else CollectorRegistry()
        self._notices = Counter("fabricops_webhook_notices", "Actions announced, by outcome "
                                "(delivered, failed)", ["outcome"], registry=self.registry)

    def notify(self, action: Action) -> bool:
        """Post ``remediation.action``; False (logged, counted) when it was not delivered."""
        try:
            self.client.post("remediation.action", action.model_dump(mode="json"))
        except WebhookError as exc:
            self._notices.labels("failed").inc()
            log.warning("action %s (%s) not announced: %s", action.id, action.state.value, exc)
            return False
        self._notices.labels("delivered").inc()
        return True
