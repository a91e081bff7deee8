"""Small records on the bus (low volume): sampling policies, events, diagnoses.

Each is a ``WireModel``: on the bus it is the protobuf message its ``SCHEMA``
names (:mod:`fabricops.core.wire_records`); ``model_dump(mode="json")`` is its
readable view.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.bus import Topic
from fabricops.core.wire_records import WireModel


class SamplingPolicy(WireModel):
    """The sampling interval the pipeline asks collectors to use for a device.

    ``device`` ``"*"`` sets the default for every device. A policy past
    ``expires_ns`` (if set) no longer applies and the default returns.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    SCHEMA: ClassVar[str] = Topic.CONTROL.schema

    device: str = Field(min_length=1)
    interval_s: float = Field(gt=0, le=3600)
    ts_ns: int = Field(ge=0, description="When the policy was issued")
    expires_ns: int | None = Field(default=None, ge=0)
    reason: str = ""


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


class Event(WireModel):
    """A key change the pipeline extracted from one series, kept at full resolution.

    ``value`` is the series value that raised the event: the new state, or the
    rate (per second) or gauge that crossed. ``key`` identifies the event, so a
    re-delivered frame that raises it again is stored once.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    SCHEMA: ClassVar[str] = Topic.EVENTS.schema

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


class RankedEntity(BaseModel):
    """One candidate root entity and the probability that it is the root."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    entity: str = Field(min_length=1)
    kind: str = Field(description="link, switch, nic or host")
    probability: float = Field(ge=0.0, le=1.0)
    fault_type: str = Field(description="The most likely fault type for this entity")


class Evidence(BaseModel):
    """One observation that supports (or weakens) a diagnosis."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    entity: str = Field(min_length=1)
    signal: str = Field(min_length=1, description="e.g. fcs_error_ratio, pause_share, missing")
    value: float = Field(allow_inf_nan=False)
    baseline: float | None = Field(default=None, allow_inf_nan=False)
    note: str = ""


class Diagnosis(WireModel):
    """What broke, where, how sure, why, whom it hurts, and what to do.

    ``id`` is stable for one incident: a revised diagnosis of the same incident
    (new evidence, a changed fault type) keeps the id and has a newer ``ts_ns``.
    ``onset_ns`` is when the first symptom of the incident was seen. ``missing``
    names telemetry that was expected and absent; it lowers ``confidence``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    SCHEMA: ClassVar[str] = Topic.DIAGNOSES.schema

    id: str = Field(min_length=1, max_length=64)
    ts_ns: int = Field(ge=0)
    onset_ns: int = Field(ge=0)
    root: str = Field(min_length=1, max_length=255, description="The most likely root entity")
    root_kind: str = Field(max_length=16)
    fault_type: str = Field(max_length=32)
    confidence: float = Field(ge=0.0, le=1.0)
    ranked: tuple[RankedEntity, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    missing: tuple[str, ...] = ()
    affected_hosts: tuple[str, ...] = ()
    affected_jobs: tuple[str, ...] = ()
    action: str = Field(default="", description="Recommended action, in words")
    model_version: str = ""
