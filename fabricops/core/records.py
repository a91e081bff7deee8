"""Small control records on the bus, with their JSON codec (low volume, readable)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class SamplingPolicy(BaseModel):
    """The sampling interval the pipeline asks collectors to use for a device.

    ``device`` ``"*"`` sets the default for every device. A policy past
    ``expires_ns`` (if set) no longer applies and the default returns.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(min_length=1)
    interval_s: float = Field(gt=0, le=3600)
    ts_ns: int = Field(ge=0, description="When the policy was issued")
    expires_ns: int | None = Field(default=None, ge=0)
    reason: str = ""

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, data: bytes) -> SamplingPolicy:
        return cls.model_validate_json(data)


class EventKind(StrEnum):
    """What kind of key change an event reports."""

    STATE_CHANGE = "state_change"  # a state metric took a new value
    THRESHOLD = "threshold"  # a rate or gauge crossed a configured limit
    ANOMALY = "anomaly"  # a value far from its series' recent behaviour
    CLEARED = "cleared"  # a threshold or anomaly condition ended


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class Event(BaseModel):
    """A key change the pipeline extracted from one series, kept at full resolution.

    ``value`` is the series value that raised the event: the new state, or the
    rate (per second) or gauge that crossed. ``key`` identifies the event, so a
    re-delivered frame that raises it again is stored once.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    ts_ns: int = Field(ge=0, description="Sample time that raised the event, ns since epoch")
    device: str = Field(min_length=1)
    entity: str = Field(min_length=1)
    metric: str = Field(min_length=1, description="Catalogue metric name")
    kind: EventKind
    value: float
    severity: Severity = Severity.WARNING
    detail: str = ""

    @property
    def key(self) -> tuple[int, str, str, str]:
        return (self.ts_ns, self.entity, self.metric, self.kind.value)

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, data: bytes) -> Event:
        return cls.model_validate_json(data)
