"""The JSON bodies of alert webhooks, rendered from diagnoses and actions (pure).

``fabricops`` format: one document per record,
``{"event": "diagnosis" | "action", "id", "ts", "data"}``, where ``ts`` is the
record's time (RFC 3339, UTC) and ``data`` its JSON view (every field).

``alertmanager`` format: the body Prometheus Alertmanager's webhook receiver
posts (``version`` "4"), so tools that take Alertmanager notifications take
fabricops's. One incident (a diagnosis id) is one alert group; its alert has
the labels ``alertname="FabricFault"``, ``incident``, ``fault_type``, ``root``
and ``severity`` (``critical`` for faults that take a link, NIC or switch out
or stall the fabric, else ``warning``; a function of the fault type, so the
labels, and the ``fingerprint`` Alertmanager would compute from them, stay
the same while the incident lasts). A diagnosis fires the alert; a revision
that moves the root or changes the fault type fires the new alert and
resolves the old one in the same notification; the action that reached
``verified`` resolves it (``endsAt`` = when it was verified).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final
from urllib.parse import quote

from fabricops.core.actions import Action
from fabricops.core.records import Diagnosis
from fabricops.core.wording import counted

ALERTNAME: Final = "FabricFault"
ALERTMANAGER_VERSION: Final = "4"
NO_END: Final = "0001-01-01T00:00:00Z"
"""``endsAt`` of a firing alert, as Alertmanager writes an unset time."""
CRITICAL_FAULTS: Final = frozenset({"link_down", "nic_down", "switch_down", "pfc_storm",
                                    "pfc_deadlock"})
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_FNV64_OFFSET: Final = 14695981039346656037
_FNV64_PRIME: Final = 1099511628211
_LABEL_SEPARATOR: Final = b"\xff"


def rfc3339(ts_ns: int) -> str:
    """``ts_ns`` (ns since the Unix epoch) as RFC 3339 UTC with microseconds."""
    moment = _EPOCH + timedelta(microseconds=ts_ns // 1000)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def fabricops_body(record: Diagnosis | Action) -> dict[str, object]:
    """The ``fabricops`` document of one diagnosis revision or action version."""
    event = "diagnosis" if isinstance(record, Diagnosis) else "action"
    return {"event": event, "id": record.id, "ts": rfc3339(record.ts_ns),
            "data": record.model_dump(mode="json")}


def severity(fault_type: str) -> str:
    """``critical`` or ``warning``, by fault type only (see the module docstring)."""
    return "critical" if fault_type in CRITICAL_FAULTS else "warning"


@dataclass(frozen=True)
class IncidentAlert:
    """An incident as an Alertmanager alert: what identifies it and what describes it.

    ``starts_ns`` is the incident's onset; ``ts_ns`` the time of the revision
    the alert was made from (to tell a newer revision from an older one).
    """

    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    starts_ns: int
    ts_ns: int


def incident_alert(d: Diagnosis) -> IncidentAlert:
    """The alert of diagnosis revision ``d``."""
    labels = {"alertname": ALERTNAME, "incident": d.id, "fault_type": d.fault_type,
              "root": d.root, "severity": severity(d.fault_type)}
    kind = f"{d.root_kind} " if d.root_kind else ""
    facts = [f"confidence {d.confidence:.2f}"]
    if d.affected_jobs:
        facts.append(f"jobs {', '.join(d.affected_jobs)}")
    if d.affected_hosts:
        facts.append(f"{counted(len(d.affected_hosts), 'host')} affected")
    if d.missing:
        facts.append(f"telemetry missing: {', '.join(d.missing)}")
    description = "; ".join(facts) + (f". Recommended: {d.action}" if d.action else "")
    annotations = {"summary": f"{d.fault_type} at {kind}{d.root}", "description": description}
    return IncidentAlert(labels, annotations, d.onset_ns, d.ts_ns)


def action_alert(a: Action) -> IncidentAlert:
    """The alert of ``a``'s incident when its diagnosis is not known: the action's
    target taken for the root."""
    labels = {"alertname": ALERTNAME, "incident": a.diagnosis_id, "fault_type": a.fault_type,
              "root": a.target, "severity": severity(a.fault_type)}
    annotations = {"summary": f"{a.fault_type} at {a.target}",
                   "description": f"confidence {a.confidence:.2f}"}
    return IncidentAlert(labels, annotations, a.created_ns, a.created_ns)


def resolved_by(alert: IncidentAlert, a: Action) -> IncidentAlert:
    """``alert`` with a ``resolved_by`` annotation naming the verified action."""
    note = f"{a.kind.value} {a.target} ({a.id}), verified at {rfc3339(a.ts_ns)}"
    return IncidentAlert(alert.labels, {**alert.annotations, "resolved_by": note},
                         alert.starts_ns, alert.ts_ns)


def fingerprint(labels: Mapping[str, str]) -> str:
    """Alertmanager's fingerprint of a label set: FNV-1a 64 of the sorted names and
    values, each followed by byte 0xff, as 16 hex digits."""
    value = _FNV64_OFFSET
    for name in sorted(labels):
        for part in (name.encode(), labels[name].encode()):
            for byte in part + _LABEL_SEPARATOR:
                value = ((value ^ byte) * _FNV64_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def label_set(labels: Mapping[str, str]) -> str:
    """A label set as Alertmanager prints it: ``{a="x", b="y"}``, names sorted."""
    return "{" + ", ".join(f"{n}={json.dumps(labels[n], ensure_ascii=False)}"
                           for n in sorted(labels)) + "}"


def alertmanager_body(*, receiver: str, incident: str, firing: IncidentAlert | None,
                      resolved: Sequence[tuple[IncidentAlert, int]], external_url: str,
                      generator_url: str) -> dict[str, object]:
    """The notification of ``incident``'s group: the ``firing`` alert (if any) and the
    ``resolved`` ones, each with the time it ended (ns).

    ``generator_url`` is each alert's ``generatorURL``, with ``{incident}`` and
    ``{root}`` replaced by the alert's labels (URL-quoted).
    """
    entries: list[tuple[str, IncidentAlert, int | None]] = \
        [("firing", firing, None)] if firing is not None else []
    entries += [("resolved", alert, ends_ns) for alert, ends_ns in resolved]
    group = {"alertname": ALERTNAME, "incident": incident}
    return {
        "version": ALERTMANAGER_VERSION,
        "groupKey": f"{{}}:{label_set(group)}",
        "truncatedAlerts": 0,
        "status": "firing" if firing is not None else "resolved",
        "receiver": receiver,
        "groupLabels": group,
        "commonLabels": _common([alert.labels for _, alert, _ in entries]),
        "commonAnnotations": _common([alert.annotations for _, alert, _ in entries]),
        "externalURL": external_url,
        "alerts": [_alert(status, alert, ends_ns, generator_url)
                   for status, alert, ends_ns in entries],
    }


def _alert(status: str, alert: IncidentAlert, ends_ns: int | None,
           generator_url: str) -> dict[str, object]:
    link = generator_url
    for name in ("incident", "root"):
        link = link.replace(f"{{{name}}}", quote(alert.labels.get(name, ""), safe=""))
    return {"status": status, "labels": dict(alert.labels),
            "annotations": dict(alert.annotations), "startsAt": rfc3339(alert.starts_ns),
            "endsAt": NO_END if ends_ns is None else rfc3339(ends_ns),
            "generatorURL": link, "fingerprint": fingerprint(alert.labels)}


def _common(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The name=value pairs that every one of ``maps`` has."""
    if not maps:
        return {}
    return {k: v for k, v in maps[0].items() if all(m.get(k) == v for m in maps[1:])}
