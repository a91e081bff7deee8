"""One answer to "what is wrong with the fabric?": the incidents open now.

An incident is open while its diagnosis is being revised: the RCA republishes
an ongoing incident every 30 s, so a diagnosis whose newest revision is older
than ``active_s`` has cleared. Each incident says what is wrong, where (the
root entity and its neighbours on the topology), since when, how sure, the
evidence, whom it hurts and what fabricops did or proposes about it. Building
the report is pure: records in, report out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.actions import Action, ActionState
from fabricops.core.entities import EntityKind, entity_kind, split_link, split_port
from fabricops.core.records import Diagnosis, Evidence, RankedEntity
from fabricops.core.topology import Topology

#: A diagnosis not revised for this long has cleared (3 x the RCA's republish interval).
ACTIVE_S = 90.0


class Health(StrEnum):
    """The fabric as a whole: nothing open, open incidents all being healed, or faulty."""

    OK = "ok"
    HEALING = "healing"
    FAULT = "fault"


class ActionSummary(BaseModel):
    """What fabricops did or proposes about an incident, and where that stands."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: str
    target: str
    state: ActionState
    mode: str
    request: str | None = None
    last_note: str = ""
    changed: datetime


class Incident(BaseModel):
    """One open incident, everything an operator needs to decide what to do."""

    model_config = ConfigDict(frozen=True)

    diagnosis_id: str
    fault_type: str
    root: str = Field(description="The most likely root entity")
    root_kind: str
    neighbours: list[str] = Field(description="Entities next to the root on the topology")
    since: datetime = Field(description="When the first symptom was seen")
    last_seen: datetime = Field(description="Newest revision of the diagnosis")
    confidence: float
    alternatives: list[RankedEntity]
    evidence: list[Evidence]
    missing: list[str]
    affected_jobs: list[str]
    affected_hosts: list[str]
    recommended: str = Field(description="The recommended action, in words")
    actions: list[ActionSummary]
    status: str = Field(description="open, proposed (waits for approval), healing, healed, "
                                    "or unhealed (an action failed or was rolled back)")


class DiagnoseReport(BaseModel):
    """The answer of ``fabricops diagnose``."""

    model_config = ConfigDict(frozen=True)

    health: Health
    summary: str
    checked_at: datetime
    incidents: list[Incident]


_HEALING = {ActionState.APPROVED, ActionState.APPLIED}


def build_report(diagnoses: Sequence[Diagnosis], actions: Sequence[Action],
                 topology: Topology | None, *, now_ns: int,
                 active_s: float = ACTIVE_S) -> DiagnoseReport:
    """The incidents among ``diagnoses`` (newest revision each) still open at ``now_ns``."""
    by_diagnosis: dict[str, list[Action]] = {}
    for a in actions:
        by_diagnosis.setdefault(a.diagnosis_id, []).append(a)
    incidents = [_incident(d, by_diagnosis.get(d.id, []), topology)
                 for d in open_incidents(diagnoses, now_ns=now_ns, active_s=active_s)]
    health = _health(incidents)
    return DiagnoseReport(health=health, summary=_summary(health, incidents),
                          checked_at=_time(now_ns), incidents=incidents)


def open_incidents(diagnoses: Sequence[Diagnosis], *, now_ns: int,
                   active_s: float = ACTIVE_S) -> list[Diagnosis]:
    """The newest revision of each incident revised within ``active_s`` of ``now_ns``,
    most confident first."""
    newest: dict[str, Diagnosis] = {}
    for d in diagnoses:
        if d.id not in newest or d.ts_ns > newest[d.id].ts_ns:
            newest[d.id] = d
    horizon = now_ns - int(active_s * 1e9)
    return sorted((d for d in newest.values() if d.ts_ns >= horizon),
                  key=lambda d: -d.confidence)


def _incident(d: Diagnosis, actions: list[Action], topology: Topology | None) -> Incident:
    ordered = sorted(actions, key=lambda a: a.ts_ns)
    return Incident(
        diagnosis_id=d.id, fault_type=d.fault_type, root=d.root, root_kind=d.root_kind,
        neighbours=neighbours(topology, d.root) if topology is not None else [],
        since=_time(d.onset_ns), last_seen=_time(d.ts_ns), confidence=d.confidence,
        alternatives=[r for r in d.ranked if r.entity != d.root][:3],
        evidence=list(dict.fromkeys(d.evidence)), missing=list(d.missing),
        affected_jobs=list(d.affected_jobs), affected_hosts=list(d.affected_hosts),
        recommended=d.action, actions=[_summary_of(a) for a in ordered],
        status=_status(ordered))


def _summary_of(a: Action) -> ActionSummary:
    return ActionSummary(id=a.id, kind=a.kind.value, target=a.target, state=a.state,
                         mode=a.mode.value, request=a.request,
                         last_note=a.audit[-1].note if a.audit else "", changed=_time(a.ts_ns))


def _status(actions: Sequence[Action]) -> str:
    if not actions:
        return "open"
    states = {a.state for a in actions}
    if states & _HEALING:
        return "healing"
    if ActionState.PROPOSED in states:
        return "proposed"
    if ActionState.VERIFIED in states:
        return "healed"
    return "unhealed"


def _health(incidents: Sequence[Incident]) -> Health:
    if not incidents:
        return Health.OK
    if all(i.status in ("healing", "healed") for i in incidents):
        return Health.HEALING
    return Health.FAULT


def _summary(health: Health, incidents: Sequence[Incident]) -> str:
    if health is Health.OK:
        return "no open incident: the fabric looks healthy"
    top = incidents[0]
    more = f" (and {len(incidents) - 1} more)" if len(incidents) > 1 else ""
    return (f"{top.fault_type} at {top.root} since {top.since:%H:%M:%S} UTC, "
            f"{top.confidence:.0%} sure, {top.status}{more}")


def neighbours(topology: Topology, entity: str) -> list[str]:
    """The entities next to ``entity``: a link's two nodes, a node's peers, a port's
    node and peer port. Unknown entities have none."""
    try:
        kind = entity_kind(entity)
    except ValueError:
        return []
    if kind is EntityKind.LINK:
        return sorted({split_port(p)[0] for p in split_link(entity)})
    if entity in topology.port_by_id:
        node = split_port(entity)[0]
        peer = topology.peer_of.get(entity)
        return [node] + ([peer] if peer else [])
    node_ports = {f"{entity}:{p.name}" for p in topology.node_by_id[entity].ports} \
        if entity in topology.node_by_id else set()
    return sorted({split_port(topology.peer_of[p])[0] for p in node_ports
                   if p in topology.peer_of})


def _time(ts_ns: int) -> datetime:
    return datetime.fromtimestamp(ts_ns / 1e9, UTC)
