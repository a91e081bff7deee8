"""Configuration of the alert webhooks: the receivers, and how hard delivery is tried.

``load_alerts_config`` reads it from an operator's YAML file (the keys of
``AlertsConfig``; ``receivers`` a list of ``AlertReceiver`` mappings).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from fabricops.core.bus import DEFAULT_PREFIX
from fabricops.core.yamlfile import read_yaml


class AlertsConfigError(ValueError):
    """An alerts file that cannot be used; the message names the file, the key, the cause."""


class AlertFormat(StrEnum):
    """The body a receiver is sent (see :mod:`fabricops.api.alert_payloads`)."""

    FABRICOPS = "fabricops"  # one document per diagnosis revision or action version
    ALERTMANAGER = "alertmanager"  # Alertmanager webhook notifications (version 4)


class AlertEvents(StrEnum):
    """The records a receiver asks for."""

    DIAGNOSES = "diagnoses"
    ACTIONS = "actions"


class AlertReceiver(BaseModel):
    """One team endpoint: where alerts go, how they are signed, which ones it wants."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
                      description="Label of the receiver in metrics and in the outbox "
                                  "(letters, digits, '_', '.', '-'; at most 64)")
    url: str = Field(description="http:// or https:// URL the alerts are posted to")
    secret: SecretStr = Field(default=SecretStr(""),
                              description="HMAC-SHA256 key of X-Fabricops-Signature (none if "
                                          "empty)")
    format: AlertFormat = AlertFormat.FABRICOPS
    events: frozenset[AlertEvents] = Field(default=frozenset(AlertEvents), min_length=1,
                                           description="Records to send: diagnoses, actions")
    min_confidence: float = Field(default=0.0, ge=0.0, le=1.0,
                                  description="Skip diagnoses and actions less sure than this")
    timeout_s: float = Field(default=5.0, gt=0, le=120,
                             description="Per attempt: connect and answer")

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} must start with http:// or https://")
        if not urlsplit(value).hostname or any(c.isspace() for c in value):
            raise ValueError(f"{value!r} is not a URL: no host, or a space in it")
        return value


class AlertsConfig(BaseModel):
    """The receivers, and the outbox's retry schedule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    receivers: tuple[AlertReceiver, ...] = Field(default=(), description="Where alerts go")
    group: str = Field(default="fabricops-alerts", min_length=1, description="Consumer group")
    prefix: str = Field(default=DEFAULT_PREFIX, description="Prefix of the topic names")
    backoff_s: float = Field(default=1.0, gt=0, description="Wait after a row's first failed "
                                                            "attempt; doubles after each")
    max_backoff_s: float = Field(default=60.0, gt=0, description="Longest wait between "
                                                                 "attempts at one row")
    give_up_after_s: float = Field(default=86_400.0, gt=0, description=(
        "A row still failing this long after it was enqueued is marked dead"))
    poll_interval_s: float = Field(default=1.0, gt=0, le=60, description=(
        "How often a sender looks for due rows when it has not been woken"))
    batch_rows: int = Field(default=20, ge=1, le=1000,
                            description="Rows a sender claims at a time")
    lease_s: float = Field(default=300.0, gt=0, description=(
        "How long claimed rows are hidden from other senders; longer than a batch's "
        "attempts take"))
    retention_s: float = Field(default=7 * 86_400.0, gt=0,
                               description="Delivered rows are deleted after this")
    external_url: str = Field(default="", description=(
        "Where people reach this fabricops (Alertmanager's externalURL field)"))
    generator_url: str = Field(default="", description=(
        "An alert's generatorURL; {incident} and {root} are replaced by its labels"))

    @field_validator("receivers")
    @classmethod
    def _unique_names(cls, value: tuple[AlertReceiver, ...]) -> tuple[AlertReceiver, ...]:
        names = [r.name for r in value]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"alert receiver names must be unique; repeated: "
                             f"{', '.join(repeated)}")
        return value

    @model_validator(mode="after")
    def _lease_covers_a_batch(self) -> AlertsConfig:
        slowest_s = max((r.timeout_s for r in self.receivers), default=0.0)
        if self.lease_s < self.batch_rows * slowest_s:
            raise ValueError(f"lease_s {self.lease_s:g} is shorter than a batch can take "
                             f"(batch_rows {self.batch_rows} x timeout_s {slowest_s:g}); "
                             f"raise lease_s or lower batch_rows")
        return self


def load_alerts_config(path: Path) -> AlertsConfig:
    """The alert configuration in the YAML file ``path``; AlertsConfigError if unusable."""
    doc = read_yaml(path, "alerts configuration", AlertsConfigError)
    if not isinstance(doc, dict):
        raise AlertsConfigError(f"{path}: the alerts configuration must be a mapping at the "
                                f"top level")
    try:
        return AlertsConfig.model_validate(doc)
    except ValidationError as exc:
        raise AlertsConfigError(f"{path}: {describe_validation(exc)}") from None


def describe_validation(exc: ValidationError, *, with_place: bool = True,
                        limit: int = 3) -> str:
    """The first ``limit`` problems of ``exc`` on one line: ``key.path: problem; ...``."""
    causes = []
    for err in exc.errors()[:limit]:
        problem = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        problem = problem.removeprefix("Value error, ")
        place = ".".join(map(str, err["loc"])) or "top level"
        causes.append(f"{place}: {problem}" if with_place else problem)
    return "; ".join(causes)
